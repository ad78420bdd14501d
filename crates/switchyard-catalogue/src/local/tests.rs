//! Answers in the shapes the servers send (from their sources and docs), and the ones that
//! only look like them.

use serde_json::json;

use super::*;
use crate::catalogue;

fn answer(probed: LocalServer, port: u16, body: &Value) -> Result<FoundServer, String> {
    recognise(probed, port, 200, body.to_string().as_bytes())
}

fn found(probed: LocalServer, port: u16, body: &Value) -> (LocalServer, Vec<String>, String) {
    let f = answer(probed, port, body).unwrap_or_else(|e| panic!("{probed}: {e}"));
    assert_eq!(f.preset, f.server.preset());
    assert!(f.providers.is_empty());
    (f.server, f.models, f.base_url)
}

/// Ollama's `GET /api/tags`.
fn ollama_tags() -> Value {
    json!({"models": [
        {"name": "llama3.2:latest", "model": "llama3.2:latest", "modified_at": "2026-01-02T10:00:00Z",
         "size": 2_019_393_189_u64, "digest": "a80c4f17", "details": {"format": "gguf", "family": "llama"}},
        {"name": "qwen2.5-coder:7b", "model": "qwen2.5-coder:7b", "size": 4_683_087_332_u64},
    ]})
}

/// LM Studio's `GET /v1/models`: a plain OpenAI list.
fn lmstudio_list() -> Value {
    json!({"object": "list", "data": [
        {"id": "qwen2.5-7b-instruct", "object": "model", "owned_by": "organization_owner"},
        {"id": "text-embedding-nomic-embed-text-v1.5", "object": "model", "owned_by": "organization_owner"},
    ]})
}

/// llama-server with one model: `owned_by: llamacpp`, a `meta` object, and an Ollama-style
/// `models` beside `data`.
fn llamacpp_list() -> Value {
    json!({
        "models": [{"name": "gemma-3-4b-it-Q4_K_M.gguf", "model": "gemma-3-4b-it-Q4_K_M.gguf", "type": "model"}],
        "object": "list",
        "data": [{"id": "gemma-3-4b-it-Q4_K_M.gguf", "object": "model", "created": 1_767_225_600,
                  "owned_by": "llamacpp", "meta": {"vocab_type": 1, "n_vocab": 262_144, "n_ctx_train": 131_072}}],
    })
}

/// llama-server in router mode: each model with a `status` object.
fn llamacpp_router_list() -> Value {
    json!({"object": "list", "data": [
        {"id": "ggml-org/gemma-3-4b-it-GGUF:Q4_K_M", "object": "model", "owned_by": "llamacpp",
         "created": 1_767_225_600, "in_cache": true, "status": {"value": "loaded"}},
        {"id": "ggml-org/Qwen3-8B-GGUF:Q8_0", "object": "model", "owned_by": "llamacpp",
         "created": 1_767_225_600, "in_cache": true, "status": {"value": "unloaded"}},
    ]})
}

/// vLLM's `GET /v1/models`.
fn vllm_list() -> Value {
    json!({"object": "list", "data": [
        {"id": "Qwen/Qwen3-8B", "object": "model", "created": 1_767_225_600, "owned_by": "vllm",
         "root": "Qwen/Qwen3-8B", "parent": null, "max_model_len": 40960,
         "permission": [{"id": "modelperm-1", "object": "model_permission", "allow_sampling": true}]},
    ]})
}

#[test]
fn each_server_is_recognised_by_its_own_answer_with_its_models() {
    let (server, models, url) = found(LocalServer::Ollama, 11434, &ollama_tags());
    assert_eq!(server, LocalServer::Ollama);
    assert_eq!(models, ["llama3.2:latest", "qwen2.5-coder:7b"]);
    assert_eq!(url, "http://127.0.0.1:11434/v1");

    let (server, models, url) = found(LocalServer::LmStudio, 1234, &lmstudio_list());
    assert_eq!(server, LocalServer::LmStudio);
    assert_eq!(models, ["qwen2.5-7b-instruct", "text-embedding-nomic-embed-text-v1.5"]);
    assert_eq!(url, "http://127.0.0.1:1234/v1");

    let (server, models, _) = found(LocalServer::LlamaCpp, 8080, &llamacpp_list());
    assert_eq!(
        (server, models),
        (LocalServer::LlamaCpp, vec!["gemma-3-4b-it-Q4_K_M.gguf".to_owned()])
    );
    let (server, models, _) = found(LocalServer::LlamaCpp, 8080, &llamacpp_router_list());
    assert_eq!(server, LocalServer::LlamaCpp);
    assert_eq!(models.len(), 2);

    let (server, models, url) = found(LocalServer::Vllm, 8000, &vllm_list());
    assert_eq!((server, models), (LocalServer::Vllm, vec!["Qwen/Qwen3-8B".to_owned()]));
    assert_eq!(url, "http://127.0.0.1:8000/v1");
}

#[test]
fn llama_cpp_and_vllm_are_told_apart_by_their_lists_not_by_the_port() {
    // Each on the other's port (or LM Studio's) is still itself, reached where it answered.
    let (server, _, url) = found(LocalServer::LlamaCpp, 8080, &vllm_list());
    assert_eq!((server, url.as_str()), (LocalServer::Vllm, "http://127.0.0.1:8080/v1"));
    let (server, _, url) = found(LocalServer::Vllm, 8000, &llamacpp_list());
    assert_eq!((server, url.as_str()), (LocalServer::LlamaCpp, "http://127.0.0.1:8000/v1"));
    let (server, ..) = found(LocalServer::LmStudio, 1234, &vllm_list());
    assert_eq!(server, LocalServer::Vllm);
    // A mark on one entry is enough: `max_model_len` alone says vLLM, `meta` alone llama.cpp.
    let only_len = json!({"data": [{"id": "m", "max_model_len": 8192}]});
    assert_eq!(found(LocalServer::LlamaCpp, 8080, &only_len).0, LocalServer::Vllm);
    let only_meta = json!({"object": "list", "data": [{"id": "m", "meta": {"n_ctx_train": 4096}}]});
    assert_eq!(found(LocalServer::Vllm, 8000, &only_meta).0, LocalServer::LlamaCpp);
}

#[test]
fn an_unmarked_openai_list_is_lm_studio_only_on_its_port() {
    for probed in [LocalServer::LlamaCpp, LocalServer::Vllm] {
        let e = answer(probed, probed.default_port(), &lmstudio_list()).unwrap_err();
        assert!(e.contains("neither llama.cpp nor vLLM"), "{probed}: {e}");
    }
}

#[test]
fn a_server_with_no_models_yet_is_still_found() {
    let (server, models, _) = found(LocalServer::Ollama, 11434, &json!({"models": []}));
    assert_eq!((server, models.len()), (LocalServer::Ollama, 0));
    let (server, models, _) =
        found(LocalServer::LmStudio, 1234, &json!({"object": "list", "data": []}));
    assert_eq!((server, models.len()), (LocalServer::LmStudio, 0));
}

#[test]
fn answers_of_the_wrong_shape_are_named_never_taken_for_a_server() {
    let cases: [(LocalServer, u16, &[u8], &str); 10] = [
        (LocalServer::Ollama, 200, br#"{"object":"list","data":[{"id":"m"}]}"#, "\"models\" list"),
        (LocalServer::Ollama, 200, br#"{"models":[{"model":"no-name"}]}"#, "no \"name\""),
        (LocalServer::Ollama, 200, br#"{"models":[{"name":""}]}"#, "no \"name\""),
        (LocalServer::Ollama, 200, b"<html>Ollama is running</html>", "other than JSON"),
        (LocalServer::LmStudio, 200, br#"{"models":[{"name":"m"}]}"#, "(\"data\")"),
        (LocalServer::LmStudio, 200, br#"{"object":"page","data":[{"id":"m"}]}"#, "not a \"list\""),
        (LocalServer::LmStudio, 200, br#"{"data":[{"name":"m"}]}"#, "no \"id\""),
        (LocalServer::LmStudio, 200, b"[]", "(\"data\")"),
        (
            LocalServer::Vllm,
            401,
            br#"{"error":"Unauthorized"}"#,
            "HTTP 401 to GET /v1/models (it wants a key)",
        ),
        (LocalServer::LlamaCpp, 404, b"Not Found", "HTTP 404"),
    ];
    for (probed, status, body, says) in cases {
        let e = recognise(probed, probed.default_port(), status, body).unwrap_err();
        assert!(e.contains(says), "{probed} {status} {}: {e}", String::from_utf8_lossy(body));
    }
}

#[test]
fn model_ids_are_listed_once_in_the_servers_order() {
    let body = json!({"data": [{"id": "b"}, {"id": "a"}, {"id": "b"}]});
    assert_eq!(found(LocalServer::LmStudio, 1234, &body).1, ["b", "a"]);
}

#[test]
fn every_local_server_is_a_local_preset_of_the_catalogue_at_its_default_port() {
    for server in LocalServer::ALL {
        let preset = catalogue().provider(server.preset()).unwrap_or_else(|| panic!("{server}"));
        assert!(preset.local && preset.discovered, "{server}");
        assert!(reaches_loopback_port(&preset.base_url, server.default_port()), "{server}");
        assert!(reaches_loopback_port(
            &server.base_url(server.default_port()),
            server.default_port()
        ));
        assert_eq!(preset.kind, crate::ProviderKind::Openai, "{server}");
        let serde = serde_json::to_value(server).unwrap();
        assert_eq!(serde, json!(server.preset()));
        assert_eq!(LocalServer::from_preset(server.preset()), Some(server));
    }
    // And every local preset is probed for.
    for p in catalogue().providers.iter().filter(|p| p.local) {
        assert!(LocalServer::from_preset(&p.id).is_some(), "{} is local but never detected", p.id);
    }
}

#[test]
fn ports_are_every_server_on_its_own_by_default_or_the_pairs_given() {
    let default = LocalPorts::default();
    assert_eq!(default.to_string(), "ollama:11434,lmstudio:1234,llamacpp:8080,vllm:8000");
    assert_eq!(LocalPorts::parse(&default.to_string()), Ok(default));
    let given = LocalPorts::parse(" ollama:5001 , vllm : 5002").unwrap();
    assert_eq!(given.pairs(), [(LocalServer::Ollama, 5001), (LocalServer::Vllm, 5002)]);
    // The same server on two ports is fine; the same port twice is not.
    assert!(LocalPorts::parse("ollama:5001,ollama:5002").is_ok());
    assert!(LocalPorts::parse("NONE").unwrap().is_empty());
    assert_eq!(LocalPorts::parse("none").unwrap().to_string(), "none");
    for (spec, says) in [
        ("", "is not SERVER:PORT"),
        ("ollama", "is not SERVER:PORT"),
        ("ollama:", "is not a port"),
        ("ollama:0", "is not a port"),
        ("ollama:70000", "is not a port"),
        ("tgi:8080", "\"tgi\" is not a local server"),
        ("ollama:5001,lmstudio:5001", "port 5001 is named twice"),
        ("ollama:5001,", "is not SERVER:PORT"),
    ] {
        let e = LocalPorts::parse(spec).unwrap_err();
        assert!(e.contains(says), "{spec:?}: {e}");
    }
}

#[test]
fn a_provider_reaches_a_port_through_any_loopback_name_over_plain_http() {
    for (url, port, reaches) in [
        ("http://localhost:11434/v1", 11434, true),
        ("http://127.0.0.1:11434", 11434, true),
        ("http://[::1]:11434/v1/", 11434, true),
        ("http://LOCALHOST:1234/v1", 1234, true),
        ("http://localhost:11434/v1", 1234, false),
        ("https://localhost:11434/v1", 11434, false),
        ("http://192.168.1.2:11434/v1", 11434, false),
        ("http://localhost.example.com:11434/v1", 11434, false),
        ("http://localhost/v1", 80, true),
        ("http://localhost/v1", 8080, false),
        ("http://[::1]/v1", 80, true),
    ] {
        assert_eq!(reaches_loopback_port(url, port), reaches, "{url} on {port}");
    }
}
