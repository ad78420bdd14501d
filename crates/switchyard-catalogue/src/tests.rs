//! The overlay held against the snapshot: what CI checks so the parse at start cannot fail.

use super::*;

#[test]
fn every_entry_of_both_files_parses_and_every_model_the_overlay_names_exists() {
    let catalogue = Catalogue::parse(OVERLAY, SNAPSHOT).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(catalogue.source.licence, "MIT");
    assert!(!catalogue.source.version.is_empty() && !catalogue.source.fetched.is_empty());
    for id in [
        "openai",
        "anthropic",
        "gemini",
        "openrouter",
        "groq",
        "deepseek",
        "mistral",
        "xai",
        "together",
        "fireworks",
        "cerebras",
        "ollama",
        "lmstudio",
        "llamacpp",
        "vllm",
    ] {
        assert!(catalogue.provider(id).is_some(), "the catalogue offers {id}");
    }
    for p in &catalogue.providers {
        assert_eq!(p.discovered, p.models.is_empty(), "{}: a model list or discovery", p.id);
        for s in &p.suggested {
            assert!(p.model(s).is_some(), "{}: suggested {s} exists", p.id);
        }
        for m in &p.models {
            assert!(m.facts.price.is_none_or(|price| price.is_valid()), "{}/{}", p.id, m.id);
            assert!(m.facts.context_window.is_none_or(|w| w > 0), "{}/{}", p.id, m.id);
        }
    }
}

#[test]
fn every_preset_base_url_is_https_or_http_on_loopback_for_local_servers() {
    for p in &catalogue().providers {
        let (scheme, rest) = p.base_url.split_once("://").expect("a scheme");
        let host = rest.split(['/', ':']).next().unwrap_or_default();
        assert!(
            !host.is_empty() && !rest.contains(char::is_whitespace),
            "{}: {}",
            p.id,
            p.base_url
        );
        assert!(!p.base_url.ends_with('/'), "{}: no trailing slash", p.id);
        if p.local {
            assert_eq!((scheme, host), ("http", "localhost"), "{}: a local server", p.id);
            assert_eq!(p.auth, AuthStyle::None, "{}", p.id);
            assert!(p.discovered, "{}: local models are discovered", p.id);
        } else {
            assert_eq!(scheme, "https", "{}: keys never cross the network in clear", p.id);
            assert!(host.contains('.'), "{}: a public host", p.id);
            // A subscription passes its caller's login through: there is no key to create.
            let keys = p.keys.as_deref().is_some_and(|k| k.starts_with("https://"));
            assert!(keys != (p.auth == AuthStyle::Client), "{}: {:?}", p.id, p.keys);
        }
        assert!(p.docs.starts_with("https://"), "{}", p.id);
    }
}

#[test]
fn each_preset_authenticates_and_continues_as_its_kind_does() {
    for p in &catalogue().providers {
        let auth = match p.kind {
            ProviderKind::Openai => AuthStyle::Bearer,
            ProviderKind::Anthropic => AuthStyle::XApiKey,
            ProviderKind::Gemini => AuthStyle::XGoogApiKey,
        };
        let other = matches!(p.auth, AuthStyle::None | AuthStyle::Client);
        assert!(p.auth == auth || other, "{}: {:?}", p.id, p.auth);
        let fits = match p.continuation {
            Continuation::Off => true,
            Continuation::Anthropic => p.kind == ProviderKind::Anthropic,
            Continuation::Prefix | Continuation::Partial | Continuation::Vllm => {
                p.kind == ProviderKind::Openai && p.api != Some(OpenAiApi::Responses)
            }
        };
        assert!(fits, "{}: {} is not a mechanism of its API", p.id, p.continuation);
        assert!(p.api.is_none() || p.kind == ProviderKind::Openai, "{}", p.id);
    }
    let c = catalogue();
    let continuation = |id: &str| c.provider(id).unwrap().continuation;
    assert_eq!(continuation("deepseek"), Continuation::Prefix);
    assert_eq!(continuation("mistral"), Continuation::Prefix);
    assert_eq!(continuation("moonshot"), Continuation::Partial);
    assert_eq!(continuation("vllm"), Continuation::Vllm);
    assert_eq!(continuation("anthropic"), Continuation::Anthropic);
}

#[test]
fn a_model_the_snapshot_does_not_know_has_no_facts_rather_than_an_error() {
    let deepseek = catalogue().provider("deepseek").unwrap();
    assert!(deepseek.facts("deepseek-chat").price.is_some());
    assert!(deepseek.facts("deepseek-v9-from-the-future").is_empty());
}

#[test]
fn an_overlay_naming_a_model_the_snapshot_lacks_is_refused_with_the_entry() {
    let overlay = OVERLAY.replace(
        r#"suggested = ["deepseek-chat", "deepseek-reasoner"]"#,
        r#"suggested = ["deepseek-chat", "deepseek-nonexistent"]"#,
    );
    assert_ne!(overlay, OVERLAY);
    let e = Catalogue::parse(&overlay, SNAPSHOT).unwrap_err();
    assert!(e.at.contains("\"deepseek\"") && e.problem.contains("deepseek-nonexistent"), "{e}");
    let e = Catalogue::parse("[[providers]]\nid = \"x\"\n", SNAPSHOT).unwrap_err();
    assert!(e.at.contains("providers.toml"), "{e}");
}

#[test]
fn presets_list_their_embedding_models_with_an_input_price_and_bad_entries_are_refused() {
    let openai = catalogue().provider("openai").unwrap();
    let small = openai.embedding_models.iter().find(|e| e.id == "text-embedding-3-small");
    assert_eq!(small.map(|e| e.dimensions), Some(1536));
    let price = openai.facts("text-embedding-3-small").price.expect("priced");
    assert!((price.input_per_mtok - 0.02).abs() < 1e-9 && price.output_per_mtok == 0.0);
    for id in ["gemini", "mistral"] {
        assert!(!catalogue().provider(id).unwrap().embedding_models.is_empty(), "{id}");
    }
    let twice = OVERLAY.replace(
        r#"embedding_models = [{ id = "gemini-embedding-001", dimensions = 3072, input_per_mtok = 0.15 }]"#,
        r#"embedding_models = [{ id = "gemini-embedding-001", dimensions = 0 }]"#,
    );
    assert_ne!(twice, OVERLAY);
    let e = Catalogue::parse(&twice, SNAPSHOT).unwrap_err();
    assert!(e.at.contains("\"gemini\"") && e.problem.contains("gemini-embedding-001"), "{e}");
}

#[test]
fn an_anthropic_endpoint_beside_an_openai_one_is_on_the_same_https_host() {
    let host = |url: &str| {
        url.split_once("://")
            .map(|(s, r)| (s.to_owned(), r.split('/').next().unwrap_or_default().to_owned()))
    };
    let mut both = Vec::new();
    for p in &catalogue().providers {
        let Some(anthropic) = &p.anthropic_base_url else { continue };
        assert_eq!(p.kind, ProviderKind::Openai, "{}: only beside an OpenAI endpoint", p.id);
        assert_eq!(host(anthropic), host(&p.base_url), "{}: the keys' own host", p.id);
        assert!(
            anthropic.starts_with("https://") && !anthropic.ends_with('/'),
            "{}: {anthropic}",
            p.id
        );
        assert!(!anthropic.ends_with("/v1/messages"), "{}: without the Messages path", p.id);
        both.push(p.id.as_str());
    }
    for id in ["deepseek", "moonshot", "zai", "minimax", "dashscope"] {
        assert!(both.contains(&id), "{id} has its Anthropic endpoint: {both:?}");
    }
}
