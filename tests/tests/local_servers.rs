//! Model servers on this machine: `GET /api/local-servers` probes loopback
//! ports, here the random ports of a fake Ollama and a fake LM Studio (`?ports=`), finds both
//! with their models, and one added through the API as the UI's Add does routes a request to
//! its fake. A port nobody listens on is said so at once; a port that accepts and never answers
//! costs its 300 ms and no more, and the ports are probed at once, so four hung ones cost what
//! one does.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use switchyard_e2e::harness::{Harness, ask, closed_port, openai_text};
use switchyard_testkit::{FakeModelServer, SilentPort};

/// What a whole look may take: the 300 ms of a hung port plus scheduling on a busy machine.
const LOOK: Duration = Duration::from_secs(1);

/// `GET /api/local-servers?ports=...`, timed from the client: the status, the answer and the
/// time it took.
async fn look(h: &Harness, ports: &str) -> (u16, Value, Duration) {
    let started = tokio::time::Instant::now();
    let (status, body) = h.api_get(&format!("/api/local-servers?ports={ports}")).await;
    (status, body, started.elapsed())
}

fn probe(look: &Value, port: u16) -> &Value {
    look["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["port"] == port)
        .unwrap_or_else(|| panic!("port {port} in {look:#}"))
}

#[tokio::test]
async fn a_fake_ollama_and_a_fake_lm_studio_are_found_and_one_added_routes_to_its_fake() {
    let h = Harness::start("").await;
    let ollama = FakeModelServer::ollama(&["llama3.2:latest", "qwen2.5-coder:7b"]).await;
    let lmstudio = FakeModelServer::lmstudio(&["qwen2.5-7b-instruct"]).await;
    let ports = format!("ollama:{},lmstudio:{}", ollama.port, lmstudio.port);

    let (status, found, took) = look(&h, &ports).await;
    assert_eq!(status, 200, "{found}");
    assert!(took < LOOK, "{took:?}");
    let o = probe(&found, ollama.port);
    assert_eq!(o["probed"], "ollama");
    assert_eq!(o["answer"]["status"], "found", "{o}");
    assert_eq!(o["answer"]["server"], "ollama");
    assert_eq!(o["answer"]["preset"], "ollama");
    assert_eq!(o["answer"]["models"], json!(["llama3.2:latest", "qwen2.5-coder:7b"]));
    assert_eq!(o["answer"]["base_url"], format!("http://127.0.0.1:{}/v1", ollama.port));
    assert_eq!(o["answer"]["providers"], json!([]));
    let l = probe(&found, lmstudio.port);
    assert_eq!(l["answer"]["status"], "found", "{l}");
    assert_eq!(l["answer"]["server"], "lmstudio");
    assert_eq!(l["answer"]["models"], json!(["qwen2.5-7b-instruct"]));
    // The probes asked for model lists and nothing else.
    assert!(ollama.chats().is_empty() && lmstudio.chats().is_empty());

    // Add, as the UI's button does: the preset, the URL that answered, the models it listed.
    let form = json!({
        "id": "ollama",
        "preset": o["answer"]["preset"],
        "base_url": o["answer"]["base_url"],
        "models": o["answer"]["models"],
    });
    let (status, added) = h.api(Method::POST, "/api/providers?confirm=true", &form).await;
    assert_eq!(status, 201, "{added}");

    let (_, again, _) = look(&h, &ports).await;
    assert_eq!(probe(&again, ollama.port)["answer"]["providers"], json!(["ollama"]));
    assert_eq!(probe(&again, lmstudio.port)["answer"]["providers"], json!([]));

    let (status, _, body) = ask(&h, "ollama/qwen2.5-coder:7b").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(openai_text(&body), format!("hello from port {}", ollama.port));
    assert_eq!(ollama.chats(), ["qwen2.5-coder:7b"]);
    assert!(lmstudio.chats().is_empty());
}

#[tokio::test]
async fn with_nothing_listening_the_look_ends_within_a_second_and_says_so() {
    let h = Harness::start("").await;
    let ports = format!(
        "ollama:{},lmstudio:{},llamacpp:{},vllm:{}",
        closed_port(),
        closed_port(),
        closed_port(),
        closed_port()
    );
    let (status, found, took) = look(&h, &ports).await;
    assert_eq!(status, 200, "{found}");
    assert!(took < LOOK, "{took:?}");
    let probes = found["probes"].as_array().unwrap();
    let servers: Vec<&str> = probes.iter().map(|p| p["probed"].as_str().unwrap()).collect();
    assert_eq!(servers, ["ollama", "lmstudio", "llamacpp", "vllm"]);
    for p in probes {
        assert_eq!(p["answer"], json!({"status": "refused"}), "{p}");
    }
    assert!(found["elapsed_ms"].as_u64().unwrap() < 1000, "{found}");
}

#[tokio::test]
async fn a_port_that_accepts_and_never_answers_costs_its_300_ms_and_no_more() {
    let h = Harness::start("").await;
    let ollama = FakeModelServer::ollama(&["llama3.2:latest"]).await;
    let hung = SilentPort::start().await;
    let ports = format!("ollama:{},vllm:{}", ollama.port, hung.port);
    let (status, found, took) = look(&h, &ports).await;
    assert_eq!(status, 200, "{found}");
    let silent = probe(&found, hung.port);
    assert_eq!(silent["answer"], json!({"status": "timed_out"}), "{silent}");
    let cost = silent["elapsed_ms"].as_u64().unwrap();
    assert!((300..800).contains(&cost), "the hung port cost {cost} ms");
    // Beside it, the server that answers is found, and not made to wait its turn.
    let o = probe(&found, ollama.port);
    assert_eq!(o["answer"]["status"], "found", "{o}");
    assert!(o["elapsed_ms"].as_u64().unwrap() < 300, "{o}");
    assert!(took < LOOK, "{took:?}");

    // Four hung ports at once cost what one does, not four times it.
    let hung: Vec<SilentPort> =
        futures_util::future::join_all((0..4).map(|_| SilentPort::start())).await;
    let servers = ["ollama", "lmstudio", "llamacpp", "vllm"];
    let ports: Vec<String> =
        hung.iter().zip(servers).map(|(p, s)| format!("{s}:{}", p.port)).collect();
    let (status, found, took) = look(&h, &ports.join(",")).await;
    assert_eq!(status, 200, "{found}");
    for p in found["probes"].as_array().unwrap() {
        assert_eq!(p["answer"]["status"], "timed_out", "{p}");
    }
    assert!(took < LOOK, "four hung ports took {took:?}");
}

#[tokio::test]
async fn an_answer_in_no_model_servers_shape_is_named_and_never_taken_for_one() {
    let h = Harness::start("").await;
    // The harness's mock upstream lists its models as a plain OpenAI list: on vLLM's port that
    // is not vLLM (whose list says so), and it has no `/api/tags` for an Ollama probe.
    let mock = h.mock.base_url();
    let mock_port: u16 = mock.rsplit(':').next().unwrap().parse().unwrap();
    let (status, found, _) = look(&h, &format!("vllm:{mock_port}")).await;
    assert_eq!(status, 200, "{found}");
    let p = probe(&found, mock_port);
    assert_eq!(p["answer"]["status"], "unrecognised", "{p}");
    assert!(p["answer"]["detail"].as_str().unwrap().contains("neither llama.cpp nor vLLM"), "{p}");
    // This very server: it wants a key for `/v1/models`, and none is sent.
    let (_, found, _) = look(&h, &format!("lmstudio:{}", h.port)).await;
    let p = probe(&found, h.port);
    assert_eq!(p["answer"]["status"], "unrecognised", "{p}");
    assert!(p["answer"]["detail"].as_str().unwrap().contains("HTTP 401"), "{p}");
}

#[tokio::test]
async fn ports_that_do_not_parse_are_refused_naming_the_field_and_the_route_needs_the_token() {
    let h = Harness::start("").await;
    let (status, body, _) = look(&h, "ollama:nope").await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["switchyard"]["field"], "ports");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("\"nope\" is not a port"),
        "{body}"
    );
    let (status, body, _) = look(&h, "tgi:8080").await;
    assert_eq!(status, 422, "{body}");
    let anonymous = h.http.get(h.url("/api/local-servers?ports=none")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let (status, body, _) = look(&h, "none").await;
    assert_eq!((status, body), (200, json!({"probes": [], "elapsed_ms": 0})));
}
