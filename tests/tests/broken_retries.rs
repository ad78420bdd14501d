//! A retry never lands where the stream just broke, and a session comes back to its healed
//! primary (RESILIENCE.md §11).
//!
//! A client that retries a turn whose stream broke mid-answer sends the same messages again
//! (aider does; the SDKs never retry an error that arrives after a 200). Here the primary of a
//! priority combo breaks every stream, and no target can continue a partial answer (OpenAI Chat
//! has no mechanism), so the break reaches the client as its dialect's terminal error. The
//! conversation must then be served whole by the fallback from its very next request on, and
//! come back to the primary only once the primary has served a whole streamed answer (another
//! session's) since: a non-streamed answer shows a breaker that works, not a stream that holds.

use std::time::Duration;

use serde_json::{Value, json};
use switchyard_core::UnixMillis;
use switchyard_e2e::harness::{Harness, LOCAL_KEY, Setup, user_requests};
use switchyard_e2e::streaming::Client;
use switchyard_testkit::{Behavior, Fault, ManualClock, Reply};

/// Two providers of one dialect with no continuation mechanism, so a break ends the stream.
const PAIR: &str = r#"
[[providers]]
id = "primary"
kind = "openai"
base_url = "{mock}/v1"
models = ["p-chat"]
credentials = [{ id = "p1", secret = "env:OA_1" }]

[[providers]]
id = "fallback"
kind = "openai"
base_url = "{mock}/v1"
models = ["f-chat"]
credentials = [{ id = "f1", secret = "env:OA_2" }]

[[combos]]
name = "pair"
targets = [{ target = "primary/p-chat" }, { target = "fallback/f-chat" }]

[[combos]]
name = "fallback-first"
targets = [{ target = "fallback/f-chat" }, { target = "primary/p-chat" }]
"#;

/// Several deltas of the mock's reply, broken by `fault` after the fourth event: text has
/// reached the client by then.
fn broken(fault: Fault) -> Behavior {
    Reply::default().chunks(6).fault(fault).into()
}

/// The body of another conversation than the one under test, in `client`'s dialect.
fn other_conversation(client: Client, stream: bool) -> Value {
    let said = "a conversation of its own";
    let mut body = match client {
        Client::Chat | Client::Anthropic => {
            json!({"messages": [{"role": "user", "content": said}]})
        }
        Client::Responses => json!({"input": said}),
    };
    body["stream"] = stream.into();
    body
}

/// Sends a streamed request, reads it to its end and says which models its attempts asked.
async fn attempted(h: &Harness, client: Client, extra: &Value) -> (Vec<String>, String) {
    let before = user_requests(&h.mock.attempts()).len();
    let response = client.send(h, "pair", extra).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body = tokio::time::timeout(Duration::from_secs(10), response.text())
        .await
        .expect("the stream ends")
        .unwrap();
    let attempts = h.mock.attempts();
    let models = user_requests(&attempts)[before..].iter().map(|a| a.model.clone()).collect();
    (models, body)
}

/// [`attempted`] for a request of one attempt: the model that served it.
async fn streamed(h: &Harness, client: Client, extra: &Value) -> (String, String) {
    let (mut models, body) = attempted(h, client, extra).await;
    assert_eq!(models.len(), 1, "one attempt per request: {models:?} {body}");
    (models.remove(0), body)
}

/// The conversation's trace entries of its session, as JSON text.
async fn newest_trace(h: &Harness) -> String {
    h.newest_logged().await["trace"].to_string()
}

/// The four requests of one conversation (the same messages, as a retrying client sends
/// them) to a combo whose primary breaks every stream: broken once, then whole three times on
/// the fallback; back on the primary only after it healed and served another session's
/// stream whole. The retry is sent the moment the terminal event is read.
async fn a_retry_goes_elsewhere_and_returns_after_a_whole_stream(client: Client, fault: Fault) {
    let case = format!("{client:?}, {fault:?}");
    let h = Harness::start_with(Setup::new(PAIR).timeouts(|t| t.idle_ms = 300)).await;
    h.mock.set_default("p-chat", broken(fault));
    let conversation = json!({});

    let (served, body) = streamed(&h, client, &conversation).await;
    assert_eq!(served, "p-chat", "{case}: the primary first");
    client.assert_terminal_error(&body);
    assert!(!client.text(&body).is_empty(), "{case}: text reached the client first: {body}");
    let trace = newest_trace(&h).await;
    assert!(
        trace.contains(r#""pin":"moved""#) && trace.contains(r#""because":"broke""#),
        "{case}: the trace says the session moved with the break: {trace}"
    );
    for retry in 1..=3 {
        let (served, body) = streamed(&h, client, &conversation).await;
        assert_eq!(served, "f-chat", "{case}: retry {retry} goes elsewhere");
        client.assert_whole(&body);
    }
    assert_eq!(h.mock.attempt_count("p-chat"), 1, "{case}: broken once");

    // The primary heals. Eligible is not healed, nor is a non-streamed answer.
    h.mock.clear_scripts();
    assert_eq!(streamed(&h, client, &conversation).await.0, "f-chat", "{case}: not healed yet");
    let (status, _) = json_of(client.send(&h, "pair", &other_conversation(client, false))).await;
    assert_eq!(status, 200, "{case}");
    assert_eq!(h.mock.attempts().last().unwrap().model, "p-chat", "{case}: a new session");
    let (served, _) = streamed(&h, client, &conversation).await;
    assert_eq!(served, "f-chat", "{case}: a non-streamed answer heals no stream");

    // Another session's stream, whole on the primary: the conversation returns.
    let (served, body) = streamed(&h, client, &other_conversation(client, true)).await;
    assert_eq!(served, "p-chat", "{case}");
    client.assert_whole(&body);
    let (served, body) = streamed(&h, client, &conversation).await;
    assert_eq!(served, "p-chat", "{case}: home again");
    client.assert_whole(&body);
    let trace = newest_trace(&h).await;
    assert!(
        trace.contains(r#""pin":"returned""#)
            && trace.contains(r#""because":"served_whole_stream""#),
        "{case}: {trace}"
    );
}

async fn json_of(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or_default())
}

#[tokio::test]
async fn a_chat_clients_retry_after_a_cut_or_a_stall_is_served_whole_elsewhere() {
    for fault in [Fault::CutAfter(4), Fault::StallAfter(4), Fault::ErrorAfter(4)] {
        a_retry_goes_elsewhere_and_returns_after_a_whole_stream(Client::Chat, fault).await;
    }
}

#[tokio::test]
async fn an_anthropic_clients_retry_after_a_cut_or_a_stall_is_served_whole_elsewhere() {
    for fault in [Fault::CutAfter(4), Fault::StallAfter(4)] {
        a_retry_goes_elsewhere_and_returns_after_a_whole_stream(Client::Anthropic, fault).await;
    }
}

#[tokio::test]
async fn a_responses_clients_retry_after_a_cut_or_a_stall_is_served_whole_elsewhere() {
    for fault in [Fault::CutAfter(4), Fault::StallAfter(4)] {
        a_retry_goes_elsewhere_and_returns_after_a_whole_stream(Client::Responses, fault).await;
    }
}

/// A conversation that names its session (Claude Code's header), turn by turn.
async fn turn(h: &Harness, combo: &str, turns: usize) -> (String, String) {
    let mut messages = Vec::new();
    for n in 0..turns {
        messages.push(json!({"role": "user", "content": format!("turn {n}")}));
        messages.push(json!({"role": "assistant", "content": format!("answer {n}")}));
    }
    messages.push(json!({"role": "user", "content": format!("turn {turns}")}));
    let body = json!({"model": combo, "max_tokens": 16, "stream": true, "messages": messages});
    let response = h
        .http
        .post(h.url("/v1/messages"))
        .header("x-api-key", LOCAL_KEY)
        .header("anthropic-version", "2023-06-01")
        .header("x-claude-code-session-id", "pinned-by-another-combo")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    Client::Anthropic.assert_whole(&text);
    let attempts = h.mock.attempts();
    let served = user_requests(&attempts).last().unwrap().model.clone();
    (served, newest_trace(h).await)
}

/// A conversation pinned to the fallback by another combo, while the primary of its priority
/// combo fails: it stays on the fallback while the primary is benched, and the turn after the
/// proxy's recovery probe succeeded (RESILIENCE.md §3: a healed target has its users back
/// within one probe interval) it is back on the primary, because the user's order says so.
#[tokio::test]
async fn a_conversation_pinned_to_a_fallback_by_another_combo_comes_back_to_the_healed_primary() {
    let clock = ManualClock::new(UnixMillis(1_800_000_000_000));
    let setup =
        Setup::new(PAIR).clock(&clock).breaker("{ failure_threshold = 1, degraded_threshold = 1 }");
    let h = Harness::start_with(setup).await;
    assert_eq!(turn(&h, "fallback-first", 0).await.0, "f-chat", "pinned by the other combo");

    // The primary fails a new session's request: its breaker opens, the fallback serves.
    h.mock.set_default("p-chat", Behavior::status(503));
    let (status, _) =
        json_of(Client::Chat.send(&h, "pair", &other_conversation(Client::Chat, true))).await;
    assert_eq!(status, 200);
    let (served, trace) = turn(&h, "pair", 1).await;
    assert_eq!(served, "f-chat", "the primary is benched: {trace}");

    // It heals; its cooldown runs out; the next turn goes on where it is while the proxy
    // probes the primary; the probe's success brings the conversation up at its next turn.
    h.mock.clear_scripts();
    clock.advance(Duration::from_secs(30));
    assert_eq!(turn(&h, "pair", 2).await.0, "f-chat", "probed alongside, not on a user");
    h.app.probes_settled().await;
    let (served, trace) = turn(&h, "pair", 3).await;
    assert_eq!(served, "p-chat", "back in the user's order: {trace}");
    assert!(
        trace.contains(r#""pin":"returned""#) && trace.contains(r#""because":"higher_in_order""#),
        "{trace}"
    );
    assert_eq!(turn(&h, "pair", 4).await.0, "p-chat", "and it stays");
}

/// A continuation that finished the answer (RESILIENCE.md §10) pins the session where it
/// finished: that target's cache now holds the prefix, and the next turn goes there first.
#[tokio::test]
async fn a_continued_answer_pins_its_session_on_the_target_that_finished_it() {
    const CONTINUING: &str = r#"
[[providers]]
id = "an2"
kind = "anthropic"
base_url = "{mock}"
credentials = [{ id = "an2-1", secret = "env:AN_1" }]

[[combos]]
name = "pair"
targets = [{ target = "an/claude-broken" }, { target = "an2/claude-rescue" }]
"#;
    let h = Harness::start_with(Setup::new(CONTINUING).timeouts(|t| t.idle_ms = 300)).await;
    h.mock.enqueue("claude-broken", broken(Fault::CutAfter(4)));
    let conversation = json!({});
    let (asked, body) = attempted(&h, Client::Anthropic, &conversation).await;
    assert_eq!(asked, ["claude-broken", "claude-rescue"], "broken, then continued");
    Client::Anthropic.assert_whole(&body);
    let logged = h.newest_logged().await;
    let sessions: Vec<&Value> =
        logged["trace"].as_array().unwrap().iter().filter(|e| e["event"] == "session").collect();
    let lines: Vec<(&str, &str, &str)> = sessions
        .iter()
        .map(|e| {
            (
                e["target"].as_str().unwrap_or(""),
                e["pin"].as_str().unwrap_or(""),
                e["because"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(
        lines.contains(&("an/claude-broken", "moved", "broke"))
            && lines.contains(&("an2/claude-rescue", "moved", "broke")),
        "moved with the break, and pinned where the answer finished: {logged}"
    );
    let attempts_before = h.mock.attempt_count("claude-broken");
    let (served, body) = streamed(&h, Client::Anthropic, &conversation).await;
    assert_eq!(served, "claude-rescue", "the next request goes where the answer finished");
    Client::Anthropic.assert_whole(&body);
    assert_eq!(h.mock.attempt_count("claude-broken"), attempts_before);
}

/// The session moves before the client can read the terminal event: a retry sent the moment
/// the error event arrives, while the broken response is still open, already goes elsewhere.
#[tokio::test]
async fn a_retry_sent_the_moment_the_error_event_arrives_is_already_routed_elsewhere() {
    use futures_util::StreamExt as _;

    let h = Harness::start_with(Setup::new(PAIR)).await;
    h.mock.set_default("p-chat", broken(Fault::ErrorAfter(4)));
    let response = Client::Chat.send(&h, "pair", &json!({})).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut read = String::new();
    while !read.contains(r#""error""#) {
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
            .await
            .expect("the error event comes")
            .expect("before the body ends")
            .unwrap();
        read.push_str(&String::from_utf8_lossy(&chunk));
    }
    // The broken response is not read to its end: the retry goes out now.
    let (served, retried) = streamed(&h, Client::Chat, &json!({})).await;
    assert_eq!(served, "f-chat", "{read}");
    Client::Chat.assert_whole(&retried);
    drop(body);
}
