//! Mid-stream continuation (RESILIENCE.md §10): a stream that breaks after content reached the
//! client (cut, stall, error event) is finished by a continuation-capable fallback, and the
//! client reads exactly the canonical answer once, in every client dialect, on both paths
//! (passthrough: the broken upstream spoke the client's dialect; translated: it did not).
//! Where continuing is not safe (no mechanism, inside a tool call, JSON output, a target that
//! refuses the continuation) the client gets the terminal error and never repeated text.

use std::time::Duration;

use serde_json::{Value, json};
use switchyard_e2e::harness::{Harness, Setup};
use switchyard_e2e::streaming::Client;
use switchyard_testkit::{Behavior, Fault, Reply};

/// What the mock answers when nothing is scripted: the canonical text every case expects.
const TEXT: &str = "Hello from the mock upstream.";

/// `ds` continues by `prefix: true` (DeepSeek), `plain` has no mechanism, `rs` speaks
/// Responses; Anthropic models (`an`, `an2`) continue by prefill by default.
const CONFIG: &str = r#"
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
id = "plain"
kind = "openai"
base_url = "{mock}/v1"
models = ["plain-chat"]

[[providers]]
id = "rs"
kind = "openai"
api = "responses"
base_url = "{mock}/v1"
breaker = { enabled = false }
models = ["rs-model"]

[[combos]]
name = "chat-pass"
targets = [{ target = "oa/gpt-4o" }, { target = "ds/ds-chat" }]

[[combos]]
name = "chat-translated"
targets = [{ target = "an/claude-broken" }, { target = "ds/ds-chat" }]

[[combos]]
name = "anthropic-pass"
targets = [{ target = "an/claude-broken" }, { target = "an2/claude-rescue" }]

[[combos]]
name = "anthropic-translated"
targets = [{ target = "oa/gpt-4o" }, { target = "an2/claude-rescue" }]

[[combos]]
name = "responses-pass"
targets = [{ target = "rs/rs-model" }, { target = "ds/ds-chat" }]

[[combos]]
name = "responses-translated"
targets = [{ target = "oa/gpt-4o" }, { target = "ds/ds-chat" }]

[[combos]]
name = "incapable"
targets = [{ target = "oa/gpt-4o" }, { target = "plain/plain-chat" }]
"#;

/// A reply of the canonical text in several deltas that breaks with `fault`.
fn broken(fault: Fault) -> Behavior {
    Reply::default().chunks(6).fault(fault).into()
}

/// A short idle deadline, so a stall breaks at once; no breakers, so the many breaks of one
/// primary here never demote it and every case starts on it.
async fn start() -> Harness {
    let setup = Setup::new(CONFIG).timeouts(|t| t.idle_ms = 300).breaker("{ enabled = false }");
    Harness::start_with(setup).await
}

/// A break that must not be continued, and the reason the trace gives.
struct Refused {
    case: &'static str,
    combo: &'static str,
    primary: Behavior,
    /// Fields added to the client's request.
    extra: Value,
    /// What the fallback does when asked.
    fallback: Option<Behavior>,
    reason: &'static str,
}

/// Only a 400 to the continuation itself means the fallback was asked.
fn fallback_asked(reason: &str) -> bool {
    reason == "continuation_rejected"
}

/// Sends one streamed request, a conversation of its own, and reads it whole. Each case is a
/// new conversation: the same messages again would be a retry of a session that just broke,
/// which starts where it did not break (RESILIENCE.md §11), not on the primary under test.
async fn run(h: &Harness, client: Client, combo: &str, extra: &Value) -> String {
    let mut body = client.fresh_conversation();
    for (key, value) in extra.as_object().into_iter().flatten() {
        body[key] = value.clone();
    }
    let response = client.send(h, combo, &body).send().await.unwrap();
    assert_eq!(response.status(), 200, "{combo}");
    tokio::time::timeout(Duration::from_secs(10), response.text())
        .await
        .expect("the stream ends")
        .unwrap()
}

#[tokio::test]
async fn a_cut_a_stall_and_an_error_event_are_each_finished_by_a_capable_fallback_in_every_dialect_and_path()
 {
    let h = start().await;
    let cases = [
        (Client::Chat, "chat-pass", "gpt-4o"),
        (Client::Chat, "chat-translated", "claude-broken"),
        (Client::Anthropic, "anthropic-pass", "claude-broken"),
        (Client::Anthropic, "anthropic-translated", "gpt-4o"),
        (Client::Responses, "responses-pass", "rs-model"),
        (Client::Responses, "responses-translated", "gpt-4o"),
    ];
    for (client, combo, primary) in cases {
        // Past the preamble (four events in Chat and Anthropic, more in Responses): text has
        // reached the client when the break comes.
        let n = if matches!(client, Client::Responses) { 6 } else { 4 };
        for fault in [Fault::CutAfter(n), Fault::StallAfter(n), Fault::ErrorAfter(n)] {
            h.mock.enqueue(primary, broken(fault));
            let body = run(&h, client, combo, &json!({})).await;
            let case = format!("{client:?} via {combo}, {fault:?}");
            assert_eq!(client.text(&body), TEXT, "{case}: {body}");
            client.assert_whole(&body);
            let logged = h.newest_logged().await;
            let trace = logged["trace"].to_string();
            assert!(trace.contains("continued"), "{case}: {trace}");
            // The continuation is an attempt of its own, counted like any other.
            assert!(trace.contains(r#""path":"continuation""#), "{case}: {trace}");
            assert_eq!(logged["attempts"], 2, "{case}: {logged}");
        }
    }
    let metrics = h.api_text("/metrics").await;
    assert!(metrics.contains("switchyard_continuations_total 18"), "{metrics}");
    assert!(metrics.contains("switchyard_continuation_refusals_total 0"), "{metrics}");
    assert!(metrics.contains("switchyard_attempts_total 36"), "{metrics}");
}

#[tokio::test]
async fn what_cannot_be_continued_safely_ends_with_the_terminal_error_and_no_repeated_text() {
    let h = start().await;
    let tool_cut = Reply::text("")
        .with_tool_call("lookup", json!({"query": "a long argument to cut in the middle of"}))
        .chunks(6)
        .fault(Fault::CutAfter(4));
    let schema = json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}});
    let cases = [
        Refused {
            case: "no mechanism on the fallback",
            combo: "incapable",
            primary: broken(Fault::CutAfter(4)),
            extra: json!({}),
            fallback: None,
            reason: "no_continuation_mechanism",
        },
        Refused {
            case: "a tool call cut mid-arguments",
            combo: "chat-pass",
            primary: tool_cut.into(),
            extra: json!({}),
            fallback: None,
            reason: "inside_tool_call",
        },
        Refused {
            case: "a JSON-schema answer",
            combo: "chat-pass",
            primary: broken(Fault::CutAfter(4)),
            extra: schema,
            fallback: None,
            reason: "json_output",
        },
        Refused {
            case: "the fallback refuses the continuation with a 400",
            combo: "chat-pass",
            primary: broken(Fault::CutAfter(4)),
            extra: json!({}),
            fallback: Some(Behavior::reject_prefill()),
            reason: "continuation_rejected",
        },
    ];
    for Refused { case, combo, primary, extra, fallback, reason } in cases {
        let before = h.mock.attempts().len();
        h.mock.enqueue("gpt-4o", primary);
        if let Some(fallback) = fallback {
            h.mock.enqueue("ds-chat", fallback);
        }
        let body = run(&h, Client::Chat, combo, &extra).await;
        Client::Chat.assert_terminal_error(&body);
        let text = Client::Chat.text(&body);
        assert!(
            TEXT.starts_with(&text) && text.len() < TEXT.len(),
            "{case}: no repeated text: {body}"
        );
        let asked = h.mock.attempts().len() - before;
        let expected = if fallback_asked(reason) { 2 } else { 1 };
        let logged = h.newest_logged().await;
        let trace = logged["trace"].to_string();
        assert!(trace.contains(reason), "{case}: the trace says why: {trace}");
        assert_eq!(asked, expected, "{case}: only a capable fallback is asked to continue");
        assert_eq!(logged["attempts"], asked, "{case}: every upstream request is counted");
    }
}

#[tokio::test]
async fn a_target_that_refused_a_continuation_is_not_asked_to_continue_again() {
    let h = start().await;
    for fallback_asked in [1, 0] {
        h.mock.enqueue("gpt-4o", broken(Fault::CutAfter(4)));
        h.mock.enqueue("ds-chat", Behavior::reject_prefill());
        let before = h.mock.attempts_for("ds-chat").len();
        let body = run(&h, Client::Chat, "chat-pass", &json!({})).await;
        Client::Chat.assert_terminal_error(&body);
        assert_eq!(h.mock.attempts_for("ds-chat").len() - before, fallback_asked, "{body}");
    }
    let trace = h.newest_logged().await["trace"].to_string();
    assert!(trace.contains("continuation_refused_before"), "{trace}");
}

/// The relay keeps the text it relayed for a continuation up to a cap (1 MiB,
/// `switchyard_core::continuation::MAX_RELAYED_BYTES`): a 50 MB answer cut near its end is not
/// offered a continuation, the trace says why, and the relay never held the 50 MB.
#[tokio::test]
async fn a_50_mb_answer_cut_near_its_end_is_past_the_relay_cap_and_not_continued() {
    // The mock writes the whole answer before its first event: seconds in a debug build.
    let setup = Setup::new(CONFIG).timeouts(|t| {
        t.first_event_ms = 60_000;
        t.first_byte_ms = 60_000;
        t.idle_ms = 60_000;
        t.total_ms = 120_000;
    });
    let h = Harness::start_with(setup.breaker("{ enabled = false }")).await;
    let chunk = 50 * 1024;
    let text = "x".repeat(1000 * chunk);
    h.mock.enqueue("gpt-4o", Reply::text(text).chunks(1000).fault(Fault::CutAfter(990)));
    let body = run_long(&h, Client::Chat, "chat-pass").await;
    Client::Chat.assert_terminal_error(&body);
    assert!(Client::Chat.text(&body).len() >= 980 * chunk, "the client got the text relayed");
    let logged = h.newest_logged().await;
    let trace = logged["trace"].to_string();
    assert!(trace.contains("relayed_over_cap"), "{trace}");
    assert_eq!(h.mock.attempts_for("ds-chat").len(), 0, "the fallback was not asked");
}

/// [`run`] for an answer of many megabytes: a debug build takes seconds to relay it.
async fn run_long(h: &Harness, client: Client, combo: &str) -> String {
    let response = client.send(h, combo, &json!({})).send().await.unwrap();
    assert_eq!(response.status(), 200, "{combo}");
    tokio::time::timeout(Duration::from_secs(120), response.text())
        .await
        .expect("the stream ends")
        .unwrap()
}
