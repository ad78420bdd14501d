//! How a stream ended, end to end (RESILIENCE.md §7): every client dialect, both
//! paths (passthrough: the primary speaks the client's dialect; translated: it does not), and
//! each exit of the relay. An answer is complete only after a finish reason: content followed
//! by an end marker (or the end of the body) and no finish is never a success, and is continued
//! where a capable target exists; an end marker before any content falls back and the client
//! reads the fallback's whole answer; an error event after the finish reason completes.

use std::time::Duration;

use serde_json::{Value, json};
use switchyard_core::ManualClock;
use switchyard_core::outcome::BreakerFault;
use switchyard_core::resilience::BreakerState;
use switchyard_e2e::harness::{Harness, Setup, T0, header, openai_stream_text};
use switchyard_e2e::streaming::Client;
use switchyard_testkit::{Behavior, Fault, Reply};

/// What the mock answers when nothing is scripted.
const TEXT: &str = "Hello from the mock upstream.";

/// `ds` continues by `prefix: true`, `an2` by prefill; `ob` is an OpenAI-compatible host with
/// no mechanism (OpenAI Chat has none), the fallback that cannot rescue; `rs` speaks Responses.
const PROVIDERS: &str = r#"
[[providers]]
id = "ds"
kind = "openai"
base_url = "{mock}/v1"
models = [{ id = "ds-chat", continuation = "prefix" }]

[[providers]]
id = "an2"
kind = "anthropic"
base_url = "{mock}"

[[providers]]
id = "ob"
kind = "openai"
base_url = "{mock}/v1"
models = ["ob-chat"]

[[providers]]
id = "rs"
kind = "openai"
api = "responses"
base_url = "{mock}/v1"
models = ["rs-model"]
breaker = { enabled = false }
"#;

/// One (client, path) cell: the primary's target and model, and the fallback that can
/// continue an answer for this client.
struct Cell {
    client: Client,
    path: &'static str,
    primary: &'static str,
    model: &'static str,
    rescuer: &'static str,
}

const CELLS: [Cell; 6] = [
    Cell {
        client: Client::Chat,
        path: "pass",
        primary: "oa/gpt-4o",
        model: "gpt-4o",
        rescuer: "ds/ds-chat",
    },
    Cell {
        client: Client::Chat,
        path: "translated",
        primary: "an/claude-primary",
        model: "claude-primary",
        rescuer: "ds/ds-chat",
    },
    Cell {
        client: Client::Anthropic,
        path: "pass",
        primary: "an/claude-primary",
        model: "claude-primary",
        rescuer: "an2/claude-rescue",
    },
    Cell {
        client: Client::Anthropic,
        path: "translated",
        primary: "oa/gpt-4o",
        model: "gpt-4o",
        rescuer: "an2/claude-rescue",
    },
    Cell {
        client: Client::Responses,
        path: "pass",
        primary: "rs/rs-model",
        model: "rs-model",
        rescuer: "ds/ds-chat",
    },
    Cell {
        client: Client::Responses,
        path: "translated",
        primary: "oa/gpt-4o",
        model: "gpt-4o",
        rescuer: "ds/ds-chat",
    },
];

impl Cell {
    fn name(&self) -> String {
        format!("{:?}-{}", self.client, self.path).to_lowercase()
    }

    /// Two combos per cell: `<cell>-capable` (the rescuer behind the primary) and
    /// `<cell>-incapable` (the plain OpenAI-compatible host behind it).
    fn combos(&self) -> String {
        let (name, primary, rescuer) = (self.name(), self.primary, self.rescuer);
        format!(
            "[[combos]]\nname = \"{name}-capable\"\ntargets = [{{ target = \"{primary}\" }}, {{ target = \"{rescuer}\" }}]\n\n\
             [[combos]]\nname = \"{name}-incapable\"\ntargets = [{{ target = \"{primary}\" }}, {{ target = \"ob/ob-chat\" }}]\n\n"
        )
    }
}

fn config() -> String {
    CELLS.iter().map(Cell::combos).fold(PROVIDERS.to_owned(), |config, c| config + &c)
}

/// No breakers on the harness's providers (`rs` has its own line), so the many broken answers
/// of one primary here never demote it; a short idle deadline.
async fn start() -> Harness {
    let setup = Setup::new(&config()).timeouts(|t| t.idle_ms = 300).breaker("{ enabled = false }");
    Harness::start_with(setup).await
}

/// A streamed request of `client` for `model`, a conversation of its own (the same messages
/// again would be a retry, which starts where the session did not break): the target that
/// served and the whole body.
async fn stream(client: Client, h: &Harness, model: &str) -> (String, String) {
    let response = client.send(h, model, &client.fresh_conversation()).send().await.unwrap();
    assert_eq!(response.status(), 200, "{model}");
    let served = header(response.headers(), "x-switchyard-target").to_owned();
    let text = tokio::time::timeout(Duration::from_secs(10), response.text())
        .await
        .expect("the stream ends")
        .unwrap();
    (served, text)
}

/// The canonical text in six deltas, then `fault`.
fn broken(fault: Fault) -> Behavior {
    Reply::default().chunks(6).fault(fault).into()
}

#[tokio::test]
async fn content_then_an_end_marker_or_the_end_of_the_body_without_a_finish_reason_is_never_a_success()
 {
    let h = start().await;
    for cell in &CELLS {
        for fault in [Fault::EndWithoutFinish, Fault::Truncated] {
            let case = format!("{} {fault:?}", cell.name());
            // Nobody can continue: the terminal error, never the end marker.
            let asked = h.mock.attempt_count("ob-chat");
            h.mock.enqueue(cell.model, broken(fault));
            let (served, body) =
                stream(cell.client, &h, &format!("{}-incapable", cell.name())).await;
            assert_eq!(served, cell.primary, "{case}");
            cell.client.assert_terminal_error(&body);
            let text = cell.client.text(&body);
            assert!(!text.is_empty() && TEXT.starts_with(&text), "{case}: {body}");
            assert_eq!(h.mock.attempt_count("ob-chat"), asked, "{case}: no continuation asked");
            let trace = h.newest_logged().await["trace"].to_string();
            assert!(trace.contains("not_continued"), "{case}: {trace}");

            // A capable target continues it: the client reads the whole answer once.
            h.mock.enqueue(cell.model, broken(fault));
            let (_, body) = stream(cell.client, &h, &format!("{}-capable", cell.name())).await;
            cell.client.assert_whole(&body);
            assert_eq!(cell.client.text(&body), TEXT, "{case}: {body}");
            let logged = h.newest_logged().await;
            let trace = logged["trace"].to_string();
            assert!(trace.contains("\"continued\""), "{case}: {trace}");
            assert_eq!(logged["attempts"], 2, "{case}: {logged}");
        }
    }
}

#[tokio::test]
async fn an_end_marker_before_any_content_falls_back_and_the_client_reads_the_whole_fallback() {
    let h = start().await;
    for cell in &CELLS {
        let case = cell.name();
        // A role chunk (or `message_start`, `response.created`) and the end, nothing answered.
        let empty: Behavior = Reply::text("").fault(Fault::EndWithoutFinish).into();
        h.mock.script(cell.model, [empty.clone(), empty]);
        let (served, body) = stream(cell.client, &h, &format!("{case}-incapable")).await;
        assert_eq!(served, "ob/ob-chat", "{case}: {body}");
        cell.client.assert_whole(&body);
        assert_eq!(cell.client.text(&body), TEXT, "{case}: {body}");
        h.mock.clear();
    }
}

#[tokio::test]
async fn an_error_event_after_the_finish_reason_completes_the_answer_and_nothing_is_appended() {
    let h = start().await;
    for cell in &CELLS {
        let case = cell.name();
        h.mock.enqueue(cell.model, Behavior::error_after_finish());
        let asked = h.mock.attempt_count(cell.rescuer.split('/').nth(1).unwrap());
        let (served, body) = stream(cell.client, &h, &format!("{case}-capable")).await;
        assert_eq!(served, cell.primary, "{case}");
        cell.client.assert_whole(&body);
        assert_eq!(cell.client.text(&body), TEXT, "{case}: exactly once: {body}");
        let logged = h.newest_logged().await;
        assert_eq!(logged["attempts"], 1, "{case}: no continuation of a finished answer");
        assert!(!logged["trace"].to_string().contains("continued"), "{case}: {logged}");
        let rescuer = cell.rescuer.split('/').nth(1).unwrap();
        assert_eq!(h.mock.attempt_count(rescuer), asked, "{case}");
    }
}

#[tokio::test]
async fn an_empty_stream_falls_back_and_is_charged_as_a_failure_before_the_first_byte() {
    let setup = Setup::new(&config()).timeouts(|t| t.idle_ms = 300);
    let h = Harness::start_with(setup).await;
    let empty: Behavior = Reply::text("").fault(Fault::EndWithoutFinish).into();
    h.mock.script("gpt-4o", [empty.clone(), empty]);
    let (served, body) = stream(Client::Chat, &h, "chat-pass-incapable").await;
    assert_eq!(served, "ob/ob-chat", "{body}");
    Client::Chat.assert_whole(&body);
    let oa = h.app.breaker("oa").expect("the empty answers are charged");
    assert_ne!(oa.last_fault, Some(BreakerFault::StreamBroken), "nothing reached the client");
    let logged = h.newest_logged().await;
    assert_eq!(logged["outcome"], "complete", "{logged}");
}

/// The continuation's own stream fails before its first real event (an overload right after
/// `message_start`): it has not taken over the client's stream, so the next capable target
/// continues instead (RESILIENCE.md §10).
#[tokio::test]
async fn a_continuation_that_fails_before_its_first_real_event_hands_over_to_the_next_capable_target()
 {
    let config = PROVIDERS.to_owned()
        + r#"
[[combos]]
name = "two-rescuers"
targets = [{ target = "oa/gpt-4o" }, { target = "an2/claude-rescue" }, { target = "ds/ds-chat" }]
"#;
    let setup = Setup::new(&config).timeouts(|t| t.idle_ms = 300).breaker("{ enabled = false }");
    let h = Harness::start_with(setup).await;
    h.mock.enqueue("gpt-4o", broken(Fault::CutAfter(4)));
    h.mock.enqueue("claude-rescue", Behavior::error_after(1));
    let (served, body) = stream(Client::Chat, &h, "two-rescuers").await;
    assert_eq!(served, "oa/gpt-4o");
    Client::Chat.assert_whole(&body);
    assert_eq!(Client::Chat.text(&body), TEXT, "{body}");
    assert!(!body.contains("overloaded"), "the failed continuation never reached the client");
    let logged = h.newest_logged().await;
    assert_eq!(logged["attempts"], 3, "{logged}");
    let trace: Vec<Value> = logged["trace"].as_array().unwrap().clone();
    let continued: Vec<&Value> = trace.iter().filter(|e| e["event"] == "continued").collect();
    assert_eq!(continued.len(), 1, "{logged}");
    assert_eq!(continued[0]["target"], "ds/ds-chat", "{logged}");
}

/// Issue 25, defect 7: a continuation that rides on a half-open breaker is that breaker's
/// probe, and it settles at the continuation's first real event (the provider answers again),
/// not when its long stream ends.
#[tokio::test]
async fn a_half_open_continuation_target_settles_at_its_first_real_event() {
    let config = r#"
[[providers]]
id = "an2"
kind = "anthropic"
base_url = "{mock}"
models = [{ id = "claude-rescue", probe = false }]
breaker = { failure_threshold = 1 }

[[combos]]
name = "rescued"
targets = [{ target = "oa/gpt-4o" }, { target = "an2/claude-rescue" }]
"#;
    let clock = ManualClock::new(T0);
    let setup = Setup::new(config)
        .clock(&clock)
        .timeouts(|t| t.idle_ms = 10_000)
        .breaker("{ enabled = false }");
    let h = Harness::start_with(setup).await;
    // One failure opens an2's breaker; its cooldown runs out, so the next admission is its
    // half-open probe.
    h.mock.enqueue("claude-rescue", Behavior::status(500));
    let status = h.anthropic("an2/claude-rescue", false).send().await.unwrap().status();
    assert_eq!(status, 503);
    assert_eq!(h.app.breaker("an2").map(|b| b.state), Some(BreakerState::Open));
    clock.advance(Duration::from_secs(31));

    // The primary breaks mid-answer; an2 continues it, slowly after its first delta.
    h.mock.enqueue("gpt-4o", broken(Fault::CutAfter(4)));
    let slow: Behavior = Reply::default().chunks(6).chunk_gap(Duration::from_millis(400)).into();
    h.mock.enqueue("claude-rescue", slow);
    let response = Client::Chat.send(&h, "rescued", &json!({})).send().await.unwrap();
    let mut body = response.bytes_stream();
    let mut text = String::new();
    let continued = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = futures_util::StreamExt::next(&mut body).await {
            text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            // Past the primary's part ("Hello from the "): the continuation has begun.
            if openai_stream_text(&text).len() > 16 {
                return;
            }
        }
    });
    continued.await.expect("the continuation streams");
    assert!(!text.contains("[DONE]"), "still streaming: {text}");
    let state = h.app.breaker("an2").map(|b| b.state);
    assert!(
        matches!(state, None | Some(BreakerState::Closed)),
        "the probe settled at the first event, mid-stream: {state:?}"
    );
}
