//! Config files: the documented example works, and every kind of mistake is refused with the
//! file, the field path and what is allowed.

use std::path::Path;

use switchyard::config::{Config, ConfigError, ModelForm, OpenAiApi, ProviderForm};
use switchyard_providers::dialect::Dialect;

/// The environment the tests see: the documented examples' keys, nothing else.
fn env(var: &str) -> Option<String> {
    match var {
        "DEEPSEEK_API_KEY" => Some("sk-test-deepseek".into()),
        "OPENAI_API_KEY" => Some("sk-test-openai".into()),
        "ANTHROPIC_API_KEY" => Some("sk-ant-test-personal".into()),
        "ANTHROPIC_API_KEY_WORK" => Some("sk-ant-test-work".into()),
        "SWITCHYARD_TEAM_DB" => Some("postgres://switchyard:hunter2@db.example:5432/team".into()),
        "NOT_A_DATABASE" => Some("sk-test-openai-hunter2".into()),
        _ => None,
    }
}

fn parse(text: &str) -> Result<Config, String> {
    Config::parse(text, Path::new("switchyard.toml"), &env).map_err(|e| e.to_string())
}

fn error(text: &str) -> String {
    parse(text).expect_err("the config must be refused")
}

/// Every TOML code block of `docs/configuration.md`, in order.
fn documented_examples() -> Vec<String> {
    let doc = include_str!("../../../docs/configuration.md");
    doc.split("```toml\n")
        .skip(1)
        .map(|block| block.split("```").next().unwrap().to_owned())
        .collect()
}

#[test]
fn the_documented_examples_load_and_the_first_has_two_providers_and_a_combo() {
    let examples = documented_examples();
    assert!(!examples.is_empty(), "docs/configuration.md has no toml example");
    for (i, example) in examples.iter().enumerate() {
        let config = parse(example).unwrap_or_else(|e| panic!("{e}\n---\n{example}"));
        if i == 0 {
            assert!(config.providers.len() >= 2);
            assert!(!config.combos.is_empty());
        }
    }
}

#[test]
fn an_exported_config_reads_back_as_the_same_form() {
    for example in documented_examples() {
        let config = parse(&example).unwrap();
        let exported = config.form.to_toml();
        let again = parse(&exported).unwrap_or_else(|e| panic!("{e}\n---\n{exported}"));
        assert_eq!(again.form, config.form, "{exported}");
    }
}

#[test]
fn an_unknown_field_is_refused_with_its_path() {
    let e = error("[[providers]]\nid = \"a\"\nkind = \"openai\"\nbase_ulr = \"http://x\"\n");
    assert!(e.starts_with("switchyard.toml: providers[0]"), "{e}");
    assert!(e.contains("base_ulr"), "{e}");
}

#[test]
fn an_inline_secret_is_refused_without_echoing_it() {
    let e = error(
        "[[providers]]\nid = \"a\"\nkind = \"openai\"\n[[providers.credentials]]\nid = \"k\"\nsecret = \"sk-proj-0123456789abcdef\"\n",
    );
    assert!(e.contains("providers[0].credentials[0].secret"), "{e}");
    assert!(e.contains("env:VARIABLE"), "{e}");
    assert!(!e.contains("sk-proj"), "{e}");
}

#[test]
fn a_missing_environment_variable_leaves_only_its_credential_waiting_and_is_named() {
    let config = parse(
        "[[providers]]\nid = \"a\"\nkind = \"openai\"\n[[providers.credentials]]\nid = \"k\"\nsecret = \"env:SWITCHYARD_SURELY_UNSET_VAR\"\n",
    )
    .expect("a secret that cannot be read is no error in the config");
    let waiting = config.unavailable_secrets();
    assert_eq!(waiting.len(), 1);
    assert_eq!((waiting[0].0.provider.as_str(), waiting[0].0.credential.as_str()), ("a", "k"));
    assert!(waiting[0].1.contains("SWITCHYARD_SURELY_UNSET_VAR is not set"), "{waiting:?}");
    // A reference that is not one still is.
    let e = error(
        "[[providers]]\nid = \"a\"\nkind = \"openai\"\n[[providers.credentials]]\nid = \"k\"\nsecret = \"file:relative\"\n",
    );
    assert!(
        e.contains("providers[0].credentials[0].secret: a file: reference needs an absolute path"),
        "{e}"
    );
}

#[test]
fn a_combo_naming_an_unknown_provider_is_refused() {
    let e = error(
        "[[providers]]\nid = \"local\"\nkind = \"openai\"\n[[combos]]\nname = \"c\"\ntargets = [{ target = \"nope/m\" }]\n",
    );
    assert!(e.contains("combos[0].targets[0].target: unknown provider \"nope\""), "{e}");
}

#[test]
fn an_empty_combo_and_a_bad_weight_are_refused() {
    let base = "[[providers]]\nid = \"local\"\nkind = \"openai\"\n";
    let e = error(&format!("{base}[[combos]]\nname = \"c\"\ntargets = []\n"));
    assert!(e.contains("combos[0].targets: must list at least one target"), "{e}");
    let e = error(&format!(
        "{base}[[combos]]\nname = \"c\"\ntargets = [{{ target = \"local/m\", weight = 0 }}]\n"
    ));
    assert!(e.contains("combos[0].targets[0].weight: 0 is out of range"), "{e}");
}

#[test]
fn hedging_is_off_by_default_and_takes_a_percentile_or_milliseconds() {
    use switchyard_core::routing::HedgeAfter;
    let base = "[[providers]]\nid = \"local\"\nkind = \"openai\"\n[[combos]]\nname = \"c\"\ntargets = [{ target = \"local/m\" }]\n";
    assert_eq!(parse(base).unwrap().combos[0].hedge, None);
    let p95 = parse(&format!("{base}hedge_after = \"p95\"\n")).unwrap();
    assert_eq!(p95.combos[0].hedge, Some(HedgeAfter::Percentile(95)));
    let fixed = parse(&format!("{base}hedge_after_ms = 800\n")).unwrap();
    let ms = std::time::Duration::from_millis(800);
    assert_eq!(fixed.combos[0].hedge, Some(HedgeAfter::Fixed(ms)));
}

#[test]
fn a_bad_or_doubled_hedge_rule_is_refused_naming_the_field() {
    let base = "[[providers]]\nid = \"local\"\nkind = \"openai\"\n[[combos]]\nname = \"c\"\ntargets = [{ target = \"local/m\" }]\n";
    let e = error(&format!("{base}hedge_after = \"95\"\n"));
    assert!(
        e.contains("combos[0].hedge_after: \"95\" is not a percentile; write p1 to p99"),
        "{e}"
    );
    let e = error(&format!("{base}hedge_after_ms = 0\n"));
    assert!(e.contains("combos[0].hedge_after_ms: 0 is out of range; allowed 1..=600000"), "{e}");
    let e = error(&format!("{base}hedge_after = \"p95\"\nhedge_after_ms = 800\n"));
    assert!(
        e.contains("combos[0].hedge_after_ms: hedge_after and hedge_after_ms are alternatives"),
        "{e}"
    );
}

#[test]
fn duplicate_names_are_refused() {
    let e = error(
        "[[providers]]\nid = \"a\"\nkind = \"openai\"\n[[providers]]\nid = \"a\"\nkind = \"gemini\"\n",
    );
    assert!(e.contains("providers[1].id: \"a\" is used by another provider"), "{e}");
}

#[test]
fn invalid_lockout_settings_name_the_field_and_the_range() {
    let e = error("[settings.model_lockouts]\nbase_cooldown_ms = 60000\nmax_cooldown_ms = 1000\n");
    assert!(e.contains("model_lockouts.max_cooldown_ms: 1000 is below base_cooldown_ms"), "{e}");
    let e = error("[settings.model_lockouts]\nerror_codes = [404, 418]\n");
    assert!(
        e.contains("model_lockouts.error_codes[1]: 418 is not a status that can lock a model"),
        "{e}"
    );
}

#[test]
fn a_syntax_error_names_the_file() {
    let e = error("[[providers]\n");
    assert!(e.starts_with("switchyard.toml: "), "{e}");
}

#[test]
fn an_unreadable_file_names_the_file() {
    let e = Config::load(Path::new("/nonexistent/switchyard.toml")).unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }));
    assert!(e.to_string().starts_with("/nonexistent/switchyard.toml: cannot read"));
}

#[test]
fn a_provider_without_keys_gets_one_default_credential_and_defaults_apply() {
    let config = parse("[[providers]]\nid = \"ollama\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1/\"\nprofile = \"local\"\n").unwrap();
    let p = &config.providers[0];
    assert_eq!(p.base_url, "http://127.0.0.1:11434/v1");
    assert_eq!(p.credentials.len(), 1);
    assert_eq!(p.credentials[0].id.as_str(), "default");
    assert!(p.credentials[0].secret.is_none());
    assert_eq!(p.breaker.failure_threshold, 3, "the local profile");
    assert_eq!(config.port, switchyard::config::DEFAULT_PORT);
}

/// Two providers (`oa` lists its models, `an` does not) and a combo `fast`, then `rest`.
fn with_routes(rest: &str) -> String {
    format!(
        r#"
{rest}
[[providers]]
id = "oa"
kind = "openai"
models = ["gpt-4o", "gpt-4o-mini"]
[[providers]]
id = "an"
kind = "anthropic"
[[combos]]
name = "fast"
targets = [{{ target = "oa/gpt-4o-mini" }}]
"#
    )
}

fn alias(pattern: &str, to: &str) -> String {
    format!("[[aliases]]\nmatch = {pattern:?}\nto = {to:?}\n")
}

#[test]
fn aliases_and_a_default_route_load_compiled_in_the_order_written() {
    let text = with_routes(&format!(
        "default_route = \"an/claude-sonnet\"\n{}{}",
        alias("claude-*haiku*", "fast"),
        alias("claude-*", "oa/gpt-4o"),
    ));
    let config = parse(&text).unwrap();
    let to = |name: &str| config.aliases.lookup(name).map(|a| a.to.clone());
    assert_eq!(to("claude-haiku-4-5-20251001").as_deref(), Some("fast"));
    assert_eq!(to("claude-opus-4-1").as_deref(), Some("oa/gpt-4o"));
    assert_eq!(config.default_route.as_deref(), Some("an/claude-sonnet"));
    let exported = config.form.to_toml();
    assert_eq!(parse(&exported).unwrap().form, config.form, "{exported}");
}

#[test]
fn an_alias_to_nothing_configured_is_refused_with_what_is_allowed() {
    let e = error(&with_routes(&alias("claude-*", "smart")));
    assert!(e.contains("aliases[0].to: \"smart\" is neither a combo nor provider/model"), "{e}");
    assert!(e.contains("[\"fast\"]"), "{e}");
    let e = error(&with_routes(&format!("{}{}", alias("a*", "fast"), alias("b*", "nope/m"))));
    assert!(
        e.contains("aliases[1].to: \"nope/m\" is no combo, and \"nope\" is no provider"),
        "{e}"
    );
    let e = error(&with_routes(&alias("a*", "oa/gpt-5")));
    assert!(e.contains("aliases[0].to: provider \"oa\" does not list model \"gpt-5\""), "{e}");
}

#[test]
fn a_default_route_to_nothing_configured_is_refused() {
    let e = error(&with_routes("default_route = \"smart\"\n"));
    assert!(e.contains("default_route: \"smart\" is neither a combo nor provider/model"), "{e}");
}

#[test]
fn alias_patterns_that_are_empty_too_long_or_spaced_are_refused() {
    let e = error(&with_routes(&alias("", "fast")));
    assert!(e.contains("aliases[0].match: a pattern is 1 to 200 characters"), "{e}");
    let e = error(&with_routes(&alias(&"x".repeat(201), "fast")));
    assert!(e.contains("aliases[0].match: a pattern is 1 to 200 characters"), "{e}");
    let e = error(&with_routes(&alias("claude *", "fast")));
    assert!(e.contains("aliases[0].match: \"claude *\" contains whitespace"), "{e}");
}

#[test]
fn a_repeated_alias_pattern_is_refused() {
    let e =
        error(&with_routes(&format!("{}{}", alias("claude-*", "fast"), alias("claude-*", "fast"))));
    assert!(e.contains("aliases[1].match: \"claude-*\" is already aliases[0].match"), "{e}");
}

#[test]
fn aliases_that_could_never_apply_are_refused() {
    let e = error(&with_routes(&alias("*", "fast")));
    assert!(e.contains("aliases[0].match: a pattern of only '*'"), "{e}");
    assert!(e.contains("default_route"), "{e}");
    let e = error(&with_routes(&alias("fast", "oa/gpt-4o")));
    assert!(e.contains("aliases[0].match: \"fast\" is a combo's name"), "{e}");
    let e = error(&with_routes(&alias("oa/gpt-*", "fast")));
    assert!(e.contains("aliases[0].match: every name \"oa/gpt-*\" matches is oa/model"), "{e}");
    // A glob that merely may match a combo's name is fine: the combo wins for that name only.
    parse(&with_routes(&alias("fa*", "oa/gpt-4o"))).unwrap();
    // So is a slash in a pattern whose prefix names no provider.
    parse(&with_routes(&alias("openrouter/*", "fast"))).unwrap();
}

// -- [[providers.models]] ---------------------------------------------------------------------

/// One `openai` provider on Chat whose `models` are spelled `list`.
fn openai_with_models(list: &str) -> String {
    format!(
        "[[providers]]\nid = \"oa\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n{list}"
    )
}

#[test]
fn a_model_is_a_plain_id_or_a_table_and_every_spelling_reads_the_same() {
    let inline = openai_with_models(
        "models = [\"gpt-4o\", { id = \"gpt-5-codex\", api = \"responses\" }]\n",
    );
    let tables = openai_with_models(
        "[[providers.models]]\nid = \"gpt-4o\"\n[[providers.models]]\nid = \"gpt-5-codex\"\napi = \"responses\"\n",
    );
    let inline = parse(&inline).unwrap();
    let tables = parse(&tables).unwrap();
    assert_eq!(inline.form, tables.form);
    let models = &inline.form.providers[0].models;
    assert_eq!(models[0], ModelForm::new("gpt-4o"));
    assert_eq!(
        models[1],
        ModelForm { api: Some(OpenAiApi::Responses), ..ModelForm::new("gpt-5-codex") }
    );
}

#[test]
fn a_model_api_overrides_the_provider_for_that_model_only() {
    let config = parse(&openai_with_models(
        "models = [\"gpt-4o\", { id = \"gpt-5-codex\", api = \"responses\" }]\n",
    ))
    .unwrap();
    let p = &config.providers[0];
    assert_eq!(p.dialect(), Dialect::OpenAi);
    assert_eq!(p.dialect_for("gpt-4o"), Dialect::OpenAi);
    assert_eq!(p.dialect_for("gpt-5-codex"), Dialect::Responses);
    assert_eq!(
        p.dialect_for("unlisted"),
        Dialect::OpenAi,
        "an unlisted model takes the provider's"
    );
    let url = |model: &str| p.chat_url_for(model).map(ToString::to_string);
    assert_eq!(url("gpt-4o").as_deref(), Some("http://127.0.0.1:9/v1/chat/completions"));
    assert_eq!(url("gpt-5-codex").as_deref(), Some("http://127.0.0.1:9/v1/responses"));

    // And the other way round: a Responses provider with one model on Chat.
    let config = parse(&openai_with_models(
        "api = \"responses\"\nmodels = [\"gpt-5-codex\", { id = \"gpt-4o\", api = \"chat\" }]\n",
    ))
    .unwrap();
    let p = &config.providers[0];
    assert_eq!(p.dialect_for("gpt-5-codex"), Dialect::Responses);
    assert_eq!(p.dialect_for("gpt-4o"), Dialect::OpenAi);
}

#[test]
fn plain_models_write_back_as_plain_strings_and_facts_as_tables() {
    let text = openai_with_models("models = [\"gpt-4o\", \"gpt-4o-mini\"]\n");
    let exported = parse(&text).unwrap().form.to_toml();
    assert!(
        exported.contains("models = [\n    \"gpt-4o\",\n    \"gpt-4o-mini\",\n]"),
        "{exported}"
    );

    let text = openai_with_models(
        "models = [\"gpt-4o\", { id = \"gpt-5-codex\", api = \"responses\" }]\n",
    );
    let config = parse(&text).unwrap();
    let exported = config.form.to_toml();
    let again = parse(&exported).unwrap_or_else(|e| panic!("{e}\n---\n{exported}"));
    assert_eq!(again.form, config.form, "{exported}");
    assert!(exported.contains("\"gpt-4o\""), "the plain entry stays a string: {exported}");
}

#[test]
fn the_management_api_form_takes_and_gives_both_spellings() {
    let json = serde_json::json!({
        "id": "oa",
        "kind": "openai",
        "models": ["gpt-4o", {"id": "gpt-5-codex", "api": "responses"}, {"id": "o3"}],
    });
    let form: ProviderForm = serde_json::from_value(json).unwrap();
    assert_eq!(form.models[2], ModelForm::new("o3"));
    assert_eq!(
        serde_json::to_value(&form).unwrap()["models"],
        serde_json::json!(["gpt-4o", {"id": "gpt-5-codex", "api": "responses"}, "o3"]),
        "a table without facts is written back as its plain id"
    );
}

#[test]
fn a_model_api_outside_openai_is_refused_naming_the_entry() {
    let e = error(
        "[[providers]]\nid = \"an\"\nkind = \"anthropic\"\nmodels = [\"claude\", { id = \"x\", api = \"chat\" }]\n",
    );
    assert!(
        e.contains("providers[0].models[1].api: only `kind = \"openai\"` providers choose an API"),
        "{e}"
    );
}

#[test]
fn an_unknown_model_api_is_refused_listing_the_allowed_values() {
    let e = error(&openai_with_models(
        "models = [\"gpt-4o\", { id = \"x\", api = \"completions\" }]\n",
    ));
    assert!(e.contains("providers[0].models[1].api"), "{e}");
    assert!(e.contains("completions") && e.contains("`chat`") && e.contains("`responses`"), "{e}");
}

#[test]
fn an_unknown_model_fact_and_a_non_model_are_refused_with_their_path() {
    let e = error(&openai_with_models("models = [{ id = \"x\", context_windw = 5 }]\n"));
    assert!(e.contains("providers[0].models[0]"), "{e}");
    assert!(e.contains("context_windw"), "{e}");
    let e = error(&openai_with_models("models = [\"gpt-4o\", 5]\n"));
    assert!(e.contains("providers[0].models[1]"), "{e}");
    assert!(e.contains("a model id"), "{e}");
}

#[test]
fn a_model_listed_twice_is_refused_in_either_spelling() {
    let e = error(&openai_with_models(
        "models = [\"gpt-4o\", \"o3\", { id = \"gpt-4o\", api = \"responses\" }]\n",
    ));
    assert!(
        e.contains("providers[0].models[2].id: \"gpt-4o\" is already providers[0].models[0]"),
        "{e}"
    );
    let e = error(&openai_with_models("models = [\"o3\", \"o3\"]\n"));
    assert!(e.contains("providers[0].models[1]: \"o3\" is already providers[0].models[0]"), "{e}");
}

fn provider_with(lines: &str) -> String {
    format!("[[providers]]\nid = \"a\"\nkind = \"openai\"\n{lines}\n")
}

#[test]
fn a_credential_header_in_plain_text_is_refused_without_echoing_it() {
    for name in ["Authorization", "x-api-key", "X-Portkey-Api-Key", "x-auth-token", "Cookie"] {
        let e = error(&provider_with(&format!(
            "[providers.headers]\n\"{name}\" = \"Bearer sk-proj-0123456789abcdef\""
        )));
        assert!(e.contains(&format!("providers[0].headers.{name}")), "{e}");
        assert!(e.contains("env:VAR"), "{e}");
        assert!(!e.contains("sk-proj"), "{e}");
    }
}

#[test]
fn a_header_value_may_be_a_secret_reference_and_is_sent_marked_sensitive() {
    let config = parse(&provider_with(
        "[providers.headers]\nx-api-key = \"env:OPENAI_API_KEY\"\nx-title = \"Switchyard\"",
    ))
    .unwrap();
    let headers = &config.providers[0].headers;
    let key = headers.iter().find(|(n, _)| n == "x-api-key").expect("the header is kept");
    assert_eq!(key.1, "sk-test-openai");
    assert!(key.1.is_sensitive(), "a header from a secret is marked sensitive");
    let title = headers.iter().find(|(n, _)| n == "x-title").expect("plain headers stay");
    assert_eq!(title.1, "Switchyard");
    assert!(!title.1.is_sensitive());

    let e =
        error(&provider_with("[providers.headers]\nx-api-key = \"env:SWITCHYARD_SURELY_UNSET\""));
    assert!(e.contains("providers[0].headers.x-api-key"), "{e}");
    assert!(e.contains("SWITCHYARD_SURELY_UNSET"), "{e}");
}

#[test]
fn a_base_url_with_a_user_or_password_is_refused_without_echoing_it() {
    for url in
        ["https://user:sk-secret-123@api.example.com/v1", "https://sk-secret-123@api.example.com"]
    {
        let e = error(&provider_with(&format!("base_url = \"{url}\"")));
        assert!(e.contains("providers[0].base_url"), "{e}");
        assert!(e.contains("user:pass@host"), "{e}");
        assert!(!e.contains("sk-secret"), "{e}");
    }
    // An `@` after the host is a path, not a credential.
    parse(&provider_with("base_url = \"https://api.example.com/v1/@team\"")).unwrap();
}

#[test]
fn a_model_continuation_is_its_own_fact_else_its_provider_kinds_default() {
    use switchyard_core::continuation::Continuation;
    let config = parse(&format!(
        "{}[[providers]]\nid = \"an\"\nkind = \"anthropic\"\nmodels = [\"claude-x\", {{ id = \"claude-y\", continuation = false }}]\n[[combos]]\nname = \"c\"\ntargets = [{{ target = \"oa/deepseek-chat\" }}, {{ target = \"oa/gpt-4o\" }}, {{ target = \"an/claude-x\" }}, {{ target = \"an/claude-y\" }}]\n",
        openai_with_models(
            "models = [\"gpt-4o\", { id = \"deepseek-chat\", continuation = \"prefix\" }]\n"
        )
    ))
    .unwrap();
    let combo = &config.combos[0];
    let continuation: Vec<Continuation> = combo.targets.iter().map(|t| t.continuation).collect();
    assert_eq!(
        continuation,
        [Continuation::Prefix, Continuation::Off, Continuation::Anthropic, Continuation::Off]
    );
    let exported = config.form.to_toml();
    assert!(exported.contains("continuation = \"prefix\""), "{exported}");
    assert!(exported.contains("continuation = false"), "{exported}");
}

#[test]
fn a_continuation_mechanism_of_another_api_is_refused_naming_the_field() {
    let wrong_api = error(&openai_with_models(
        "models = [{ id = \"gpt-4o\", continuation = \"anthropic\" }]\n",
    ));
    assert!(wrong_api.contains("providers[0].models[0].continuation"), "{wrong_api}");
    assert!(wrong_api.contains("\"prefix\""), "{wrong_api}");
    let responses = error(&openai_with_models(
        "models = [{ id = \"gpt-5\", api = \"responses\", continuation = \"vllm\" }]\n",
    ));
    assert!(responses.contains("write `false`"), "{responses}");
    let unknown =
        error(&openai_with_models("models = [{ id = \"gpt-4o\", continuation = \"openai\" }]\n"));
    assert!(unknown.contains("unknown continuation mechanism \"openai\""), "{unknown}");
    let vague = error(&openai_with_models("models = [{ id = \"gpt-4o\", continuation = true }]\n"));
    assert!(vague.contains("does not say how"), "{vague}");
}

#[test]
fn a_keychain_reference_to_another_credentials_entry_is_refused_naming_the_field_and_the_fix() {
    let e = error(
        r#"
[[providers]]
id = "a"
kind = "openai"
credentials = [
  { id = "k1", secret = "env:OPENAI_API_KEY" },
  { id = "k2", secret = "keychain:b/k" },
]
"#,
    );
    assert!(e.contains("providers[0].credentials[1].secret"), "{e}");
    assert!(e.contains("keychain:a/k2"), "the reference to use instead: {e}");
    let e = error(
        r#"
[[providers]]
id = "a"
kind = "openai"
headers = { "x-api-key" = "keychain:b/k" }
"#,
    );
    assert!(e.contains("providers[0].headers.x-api-key"), "{e}");
}

/// Issue 26, point 4: a header may not carry an OAuth credential's stored tokens (its refresh
/// token included) to the API host, and no provider may take the id team mode keeps its own
/// keychain entries under.
#[test]
fn a_header_naming_an_oauth_entry_and_a_provider_called_team_are_refused() {
    let e = error(
        r#"
[[providers]]
id = "acme"
kind = "openai"
base_url = "https://api.acme.example/v1"
oauth = { authorize_url = "https://login.acme.example/authorize", token_url = "https://login.acme.example/token", client_id = "switchyard" }
credentials = [{ id = "me", kind = "oauth" }]
headers = { "x-a" = "keychain:acme/me" }
"#,
    );
    assert!(e.contains("providers[0].headers.x-a"), "{e}");
    assert!(e.contains("OAuth credential's entry"), "{e}");
    let e = error("[[providers]]\nid = \"team\"\nkind = \"openai\"\n");
    assert!(e.contains("providers[0].id") && e.contains("reserved"), "{e}");
}

#[test]
fn each_credential_is_bound_to_the_destinations_its_secrets_go_to() {
    use switchyard_core::binding::Binding;
    let config = parse(
        r#"
[[providers]]
id = "a"
kind = "openai"
base_url = "https://API.Example.com/v1"
headers = { "x-api-key" = "env:ANTHROPIC_API_KEY" }
credentials = [{ id = "k", secret = "env:OPENAI_API_KEY" }]

[[providers]]
id = "acme"
kind = "openai"
base_url = "https://api.acme.example:8443/v1"
oauth = { authorize_url = "https://login.acme.example/authorize", token_url = "https://login.acme.example/token", client_id = "switchyard" }
credentials = [{ id = "me", kind = "oauth" }]
"#,
    )
    .unwrap();
    let exposures = config.exposures();
    assert_eq!(
        exposures[0].bindings,
        vec![
            Binding::new("env:OPENAI_API_KEY", "https://api.example.com:443/v1"),
            Binding::new("env:ANTHROPIC_API_KEY", "https://api.example.com:443/v1"),
            Binding::destination_only("https://api.example.com:443/v1"),
        ]
    );
    assert_eq!(
        exposures[1].bindings,
        vec![
            Binding::new("keychain:acme/me", "https://api.acme.example:8443/v1"),
            Binding::new("keychain:acme/me", "https://login.acme.example:443/token"),
            Binding::destination_only("https://api.acme.example:8443/v1"),
            Binding::destination_only("https://login.acme.example:443/token"),
        ],
        "an OAuth credential's tokens go to the token endpoint too"
    );
}

#[test]
fn a_keyless_provider_is_bound_to_where_its_requests_go() {
    use switchyard_core::binding::Binding;
    let config = parse(
        r#"
[[providers]]
id = "collector"
kind = "openai"
base_url = "https://Collector.example/v1"
"#,
    )
    .unwrap();
    let exposures = config.exposures();
    assert_eq!(exposures[0].key.credential.as_str(), "default");
    assert_eq!(
        exposures[0].bindings,
        vec![Binding::destination_only("https://collector.example:443/v1")],
        "no secret, yet every prompt goes there"
    );
}

#[test]
fn a_team_database_named_by_a_reference_is_parsed_and_without_one_there_is_no_team() {
    let team = parse("[team]\ndatabase_url = \"env:SWITCHYARD_TEAM_DB\"\ninstance = \"ci-1\"\n")
        .unwrap()
        .team
        .expect("a team");
    assert_eq!(team.instance.unwrap().as_str(), "ci-1");
    assert!(!format!("{:?}", team.url).contains("hunter2"), "the URL is never printed");
    let without = parse("").unwrap();
    assert!(without.team.is_none());
    assert!(!without.form.to_toml().contains("[team]"), "no team, nothing written");
}

#[test]
fn a_team_database_url_written_inline_or_holding_something_else_is_refused_without_echoing_it() {
    let inline = error("[team]\ndatabase_url = \"postgres://u:hunter2@db.example/team\"\n");
    assert!(inline.contains("team.database_url"), "{inline}");
    assert!(inline.contains("env:"), "says what to write instead: {inline}");
    assert!(!inline.contains("hunter2"), "{inline}");

    let not_a_database = error("[team]\ndatabase_url = \"env:NOT_A_DATABASE\"\n");
    assert!(not_a_database.contains("team.database_url"), "{not_a_database}");
    assert!(not_a_database.contains("env:NOT_A_DATABASE"), "names the reference: {not_a_database}");
    assert!(not_a_database.contains("postgres://user:password@host"), "{not_a_database}");
    assert!(!not_a_database.contains("hunter2"), "{not_a_database}");

    let unset = error("[team]\ndatabase_url = \"env:SWITCHYARD_TEAM_DB_UNSET\"\n");
    assert!(unset.contains("SWITCHYARD_TEAM_DB_UNSET"), "{unset}");
}

#[test]
fn a_team_instance_name_needs_a_database_and_a_plain_name() {
    let alone = error("[team]\ninstance = \"ci-1\"\n");
    assert!(alone.contains("team.database_url") && alone.contains("required"), "{alone}");
    let bad = error("[team]\ndatabase_url = \"env:SWITCHYARD_TEAM_DB\"\ninstance = \"a b\"\n");
    assert!(bad.contains("team.instance"), "{bad}");
    let unknown = error("[team]\ndatabase = \"env:SWITCHYARD_TEAM_DB\"\n");
    assert!(unknown.contains("team") && unknown.contains("database"), "{unknown}");
}

#[test]
fn the_connection_cap_defaults_to_1100_and_out_of_range_names_the_field_and_the_range() {
    assert_eq!(parse("").unwrap().max_connections, 1_100);
    assert_eq!(parse("[server]\nmax_connections = 16\n").unwrap().max_connections, 16);
    for n in [0, 7, 65_537] {
        let message = error(&format!("[server]\nmax_connections = {n}\n"));
        assert!(message.contains("server.max_connections"), "{message}");
        assert!(message.contains("8 to 65536"), "{message}");
    }
}

#[test]
fn auto_weights_and_allow_entries_are_checked_naming_the_field() {
    const P: &str = "[[providers]]\nid = \"p\"\nkind = \"openai\"\nmodels = [\"m\"]\n";
    let negative = error(&format!("{P}[settings.auto]\ncheap = {{ price = -1 }}\n"));
    assert!(negative.contains("settings.auto.cheap.price"), "{negative}");
    let zero = "{ health = 0, headroom = 0, affinity = 0, latency = 0, price = 0, fit = 0, capability = 0 }";
    let all_zero = error(&format!("{P}[settings.auto]\nfast = {zero}\n"));
    assert!(
        all_zero.contains("settings.auto.fast") && all_zero.contains("every weight is 0"),
        "{all_zero}"
    );
    let bad = error(&format!("{P}[settings.auto]\nallow = [\"p\"]\n"));
    assert!(bad.contains("settings.auto.allow[0]") && bad.contains("provider/model"), "{bad}");
    let typo = error(&format!("{P}[settings.auto]\nbalanced = {{ prize = 1 }}\n"));
    assert!(typo.contains("prize"), "{typo}");
    // A weight written replaces that weight only; the rest keep the preset's.
    let config = parse(&format!("{P}[settings.auto]\ncheap = {{ price = 8 }}\n")).unwrap();
    let cheap = config.auto.weights(switchyard_core::settings::AutoPreset::Cheap);
    assert_eq!((cheap.price, cheap.latency), (8.0, 0.5));
}

#[test]
fn an_anthropic_endpoint_is_on_the_providers_own_host_and_beside_an_openai_one_only() {
    use switchyard_providers::dialect::Dialect;
    let provider = |kind: &str, anthropic: &str| {
        format!(
            "[[providers]]\nid = \"p\"\nkind = \"{kind}\"\nbase_url = \"https://api.example.com/v1\"\nanthropic_base_url = \"{anthropic}\"\n"
        )
    };
    let config = parse(&provider("openai", "https://api.example.com/anthropic/")).unwrap();
    let p = &config.providers[0];
    let url = p.anthropic_url.as_ref().map(ToString::to_string);
    assert_eq!(url.as_deref(), Some("https://api.example.com/anthropic/v1/messages"));
    assert_eq!(p.dialect_toward("m", Dialect::Anthropic), Dialect::Anthropic);
    assert_eq!(p.dialect_toward("m", Dialect::OpenAi), Dialect::OpenAi);
    assert_eq!(p.dialect_toward("m", Dialect::Responses), Dialect::OpenAi);
    let elsewhere = error(&provider("openai", "https://other.example.com/anthropic"));
    assert!(
        elsewhere.contains("providers[0].anthropic_base_url") && elsewhere.contains("host"),
        "{elsewhere}"
    );
    let anthropic = error(&provider("anthropic", "https://api.example.com/anthropic"));
    assert!(anthropic.contains("providers[0].anthropic_base_url"), "{anthropic}");
    // A preset brings its own.
    let preset = parse("[[providers]]\nid = \"kimi\"\npreset = \"moonshot\"\n").unwrap();
    let url = preset.providers[0].anthropic_url.as_ref().map(ToString::to_string);
    assert_eq!(url.as_deref(), Some("https://api.moonshot.ai/anthropic/v1/messages"));
    // ...which a provider pointed at another host (a gateway) does not get.
    let elsewhere = parse(
        "[[providers]]\nid = \"kimi\"\npreset = \"moonshot\"\nbase_url = \"https://gateway.example/v1\"\n",
    )
    .unwrap();
    assert!(elsewhere.providers[0].anthropic_url.is_none());
}
