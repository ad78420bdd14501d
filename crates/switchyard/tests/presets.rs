//! Catalogue presets in config: `preset = "..."` fills what the form leaves out,
//! what the user writes wins, model facts flow into combo targets, and the catalogue's models
//! are facts, never an allow-list.

use std::path::Path;

use switchyard::config::{Config, ProviderConfig};
use switchyard_core::continuation::Continuation;
use switchyard_core::routing::Price;

fn env(var: &str) -> Option<String> {
    (var == "KEY").then(|| "sk-test".to_owned())
}

fn parse(text: &str) -> Result<Config, String> {
    Config::parse(text, Path::new("switchyard.toml"), &env).map_err(|e| e.to_string())
}

fn provider<'c>(config: &'c Config, id: &str) -> &'c ProviderConfig {
    config.provider(&id.into()).unwrap()
}

fn header<'p>(p: &'p ProviderConfig, name: &str) -> Option<&'p str> {
    p.headers.iter().find(|(n, _)| n.as_str() == name).map(|(_, v)| v.to_str().unwrap())
}

#[test]
fn a_preset_fills_kind_base_url_headers_passthrough_and_the_continuation_default() {
    let config = parse(
        r#"
[[providers]]
id = "ds"
preset = "deepseek"
credentials = [{ id = "main", secret = "env:KEY" }]

[[providers]]
id = "or"
preset = "openrouter"

[[providers]]
id = "mi"
preset = "mistral"

[[providers]]
id = "local"
preset = "vllm"
"#,
    )
    .unwrap();
    let ds = provider(&config, "ds");
    assert_eq!(ds.kind, switchyard::config::ProviderKind::Openai);
    assert_eq!(ds.base_url, "https://api.deepseek.com/beta");
    assert!(ds.passthrough);
    assert_eq!(ds.continuation_for("deepseek-chat"), Continuation::Prefix);
    assert_eq!(ds.continuation_for("a-model-newer-than-the-snapshot"), Continuation::Prefix);
    assert_eq!(header(provider(&config, "or"), "x-title"), Some("Switchyard"));
    assert!(!provider(&config, "mi").passthrough, "Mistral refuses fields it does not know");
    let local = provider(&config, "local");
    assert_eq!(local.base_url, "http://localhost:8000/v1");
    assert_eq!(local.continuation, Continuation::Vllm);
}

#[test]
fn what_the_user_writes_wins_over_the_preset() {
    let config = parse(
        r#"
[[providers]]
id = "mi"
preset = "mistral"
base_url = "http://127.0.0.1:9/v1"
passthrough = true
headers = { "X-Title" = "mine" }
models = [
  { id = "mistral-large-latest", continuation = false, context_window = 1000, price = { input_per_mtok = 9.0, output_per_mtok = 9.0 } },
  "codestral-latest",
]

[[providers]]
id = "or"
preset = "openrouter"
headers = { "x-title" = "lowercase wins too" }
"#,
    )
    .unwrap();
    let mi = provider(&config, "mi");
    assert_eq!(mi.base_url, "http://127.0.0.1:9/v1");
    assert!(mi.passthrough);
    assert_eq!(header(mi, "x-title"), Some("mine"));
    assert_eq!(mi.continuation_for("mistral-large-latest"), Continuation::Off);
    assert_eq!(mi.continuation_for("codestral-latest"), Continuation::Prefix);
    let large = mi.facts("mistral-large-latest");
    assert_eq!(large.context_window, Some(1000));
    let written = switchyard_catalogue::ModelPrice {
        input_per_mtok: 9.0,
        output_per_mtok: 9.0,
        cache_read_per_mtok: None,
        cache_write_per_mtok: None,
    };
    assert_eq!(
        large.price,
        Some(written),
        "the written price, with no cache price of the catalogue's"
    );
    let catalogue = switchyard_catalogue::catalogue().provider("mistral").unwrap();
    let known = catalogue.facts("mistral-large-latest");
    assert_eq!(large.max_output, known.max_output, "unwritten facts still come from the catalogue");
    assert_eq!(large.tools, known.tools);
    let or = provider(&config, "or");
    let titles: Vec<_> = or.headers.iter().filter(|(n, _)| n.as_str() == "x-title").collect();
    assert_eq!(titles.len(), 1, "one header, the user's: {titles:?}");
    assert_eq!(header(or, "x-title"), Some("lowercase wins too"));
}

#[test]
fn a_written_kind_other_than_the_presets_takes_nothing_from_it() {
    let config = parse(
        "[[providers]]\nid = \"x\"\npreset = \"deepseek\"\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\n",
    )
    .unwrap();
    let x = provider(&config, "x");
    assert_eq!(x.continuation, Continuation::Anthropic, "the kind's default, not prefix");
    assert!(x.preset.is_none());
    assert!(x.facts("deepseek-chat").is_empty());
}

#[test]
fn combo_targets_read_window_and_price_from_the_model_facts_unless_they_set_their_own() {
    let config = parse(
        r#"
[[providers]]
id = "ds"
preset = "deepseek"
models = ["deepseek-chat", { id = "deepseek-reasoner", context_window = 4096 }]

[[providers]]
id = "plain"
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
models = [{ id = "m", context_window = 2048, price = { input_per_mtok = 1.0, output_per_mtok = 2.0, cache_read_per_mtok = 0.1 } }]

[[combos]]
name = "c"
strategy = "cost"
targets = [
  { target = "ds/deepseek-chat" },
  { target = "ds/deepseek-reasoner" },
  { target = "plain/m" },
  { target = "ds/deepseek-chat", context_window = 99, price = { input_per_mtok = 5.0, output_per_mtok = 6.0 } },
]
"#,
    )
    .unwrap();
    let targets = &config.combo("c").unwrap().targets;
    let known =
        switchyard_catalogue::catalogue().provider("deepseek").unwrap().facts("deepseek-chat");
    let known_price = known.price.expect("the snapshot prices deepseek-chat");
    assert_eq!(targets[0].context_window, known.context_window);
    assert_eq!(
        targets[0].price,
        Some(Price {
            input_per_mtok: known_price.input_per_mtok,
            output_per_mtok: known_price.output_per_mtok,
            cache_read_per_mtok: known_price.cache_read_per_mtok,
            cache_write_per_mtok: known_price.cache_write_per_mtok,
        })
    );
    assert_eq!(targets[1].context_window, Some(4096), "the written fact beats the catalogue");
    assert_eq!(targets[2].context_window, Some(2048), "facts work without any preset");
    let written = Price { cache_read_per_mtok: Some(0.1), ..Price::default() };
    let written = Price { input_per_mtok: 1.0, output_per_mtok: 2.0, ..written };
    assert_eq!(targets[2].price, Some(written), "a written cache price reaches the target");
    assert_eq!(targets[3].context_window, Some(99), "the target's own numbers win");
    assert_eq!(
        targets[3].price,
        Some(Price { input_per_mtok: 5.0, output_per_mtok: 6.0, ..Price::default() })
    );
    assert_eq!(targets[0].continuation, Continuation::Prefix);
}

#[test]
fn catalogue_models_are_facts_not_an_allow_list() {
    let open = parse(
        "[[providers]]\nid = \"ds\"\npreset = \"deepseek\"\n\n[[combos]]\nname = \"c\"\ntargets = [{ target = \"ds/deepseek-v9-newer-than-the-snapshot\" }]\n",
    )
    .unwrap();
    let ds = provider(&open, "ds");
    assert!(ds.serves("deepseek-v9-newer-than-the-snapshot"));
    let target = &open.combo("c").unwrap().targets[0];
    assert_eq!((target.context_window, target.price), (None, None), "no facts, still routed");
    assert!(ds.facts("deepseek-chat").price.is_some(), "facts without listing the model");

    let listed = "[[providers]]\nid = \"ds\"\npreset = \"deepseek\"\nmodels = [\"deepseek-chat\"]\n\n[[combos]]\nname = \"c\"\ntargets = [{ target = \"ds/deepseek-reasoner\" }]\n";
    let e = parse(listed).unwrap_err();
    assert!(
        e.contains("does not list model \"deepseek-reasoner\""),
        "the user's list is the allow-list: {e}"
    );
}

#[test]
fn an_unknown_preset_or_a_missing_kind_is_refused_naming_the_field_and_the_fix() {
    let e = parse("[[providers]]\nid = \"x\"\npreset = \"nope\"\n").unwrap_err();
    assert!(e.contains("providers[0].preset: \"nope\" is not in the catalogue"), "{e}");
    assert!(e.contains("\"openrouter\""), "the presets are listed: {e}");
    let e = parse("[[providers]]\nid = \"x\"\nbase_url = \"http://127.0.0.1:9\"\n").unwrap_err();
    assert!(e.contains("providers[0].kind: missing"), "{e}");
    assert!(e.contains("preset"), "{e}");
}

#[test]
fn bad_model_facts_are_refused_with_their_path() {
    let base = "[[providers]]\nid = \"ds\"\npreset = \"deepseek\"\nmodels = [";
    let e = parse(&format!("{base}{{ id = \"a\", context_window = 0 }}]\n")).unwrap_err();
    assert!(e.contains("providers[0].models[0].context_window: must be at least 1 token"), "{e}");
    let e = parse(&format!(
        "{base}{{ id = \"a\", price = {{ input_per_mtok = -1.0, output_per_mtok = 1.0 }} }}]\n"
    ))
    .unwrap_err();
    assert!(e.contains("providers[0].models[0].price: prices must be finite"), "{e}");
    let e = parse(&format!("{base}{{ id = \"a\", window = 5 }}]\n")).unwrap_err();
    assert!(e.contains("unknown field `window`"), "{e}");
}

#[test]
fn the_export_writes_what_the_user_wrote_and_the_preset_never_the_catalogue_facts() {
    let text = "[[providers]]\nid = \"ds\"\npreset = \"deepseek\"\nmodels = [\"deepseek-chat\", { id = \"deepseek-reasoner\", max_output = 1000 }]\n";
    let config = parse(text).unwrap();
    let exported = config.form.to_toml();
    assert!(exported.contains("preset = \"deepseek\""), "{exported}");
    assert!(!exported.contains("kind"), "the preset's kind is not inlined: {exported}");
    assert!(!exported.contains("base_url"), "{exported}");
    assert!(!exported.contains("context_window") && !exported.contains("price"), "{exported}");
    assert!(exported.contains("max_output = 1000"), "{exported}");
    assert_eq!(parse(&exported).unwrap().form, config.form, "{exported}");
}
