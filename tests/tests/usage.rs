//! Usage and cost on every request: whatever the client's dialect and the
//! upstream's, streamed or not, served at once or after a fallback, the request log holds
//! exactly the tokens the mock reported, bucket by bucket, and the cost at the serving
//! target's prices; a non-streamed answer carries it in `x-switchyard-cost`. A Chat stream is
//! asked for its usage, and the chunk that carries it is kept from a client that did not ask.

use serde_json::{Value, json};
use switchyard_core::usage::{Nanodollars, Prices, Usage};
use switchyard_e2e::harness::{Harness, LOCAL_KEY, sse_data};
use switchyard_testkit::{Behavior, Reply, Tokens};

/// The target that fails first is priced too, so a cost taken from the wrong target shows.
const CONFIG: &str = r#"
[[providers]]
id = "rs"
kind = "openai"
api = "responses"
base_url = "{mock}/v1"
credentials = [{ id = "rs-1", secret = "env:OA_1" }]

[[combos]]
name = "chat"
targets = [
  { target = "oa/gpt-4o-mini", price = { input_per_mtok = 0.15, output_per_mtok = 0.6 } },
  { target = "oa/gpt-4o", price = { input_per_mtok = 2.5, output_per_mtok = 10.0 } },
]

[[combos]]
name = "anthropic"
targets = [
  { target = "an/claude-first", price = { input_per_mtok = 0.8, output_per_mtok = 4.0 } },
  { target = "an/claude-second", price = { input_per_mtok = 2.5, output_per_mtok = 10.0 } },
]

[[combos]]
name = "gemini"
targets = [
  { target = "ge/gemini-first", price = { input_per_mtok = 0.3, output_per_mtok = 2.5 } },
  { target = "ge/gemini-second", price = { input_per_mtok = 2.5, output_per_mtok = 10.0 } },
]

[[combos]]
name = "responses"
targets = [
  { target = "rs/gpt-first", price = { input_per_mtok = 1.25, output_per_mtok = 10.0 } },
  { target = "rs/gpt-second", price = { input_per_mtok = 2.5, output_per_mtok = 10.0 } },
]
"#;

/// The upstreams: combo name, the model that fails first and the one that serves.
const UPSTREAMS: [(&str, &str, &str); 4] = [
    ("chat", "gpt-4o-mini", "gpt-4o"),
    ("anthropic", "claude-first", "claude-second"),
    ("gemini", "gemini-first", "gemini-second"),
    ("responses", "gpt-first", "gpt-second"),
];

#[derive(Clone, Copy, Debug)]
enum Client {
    Chat,
    Anthropic,
    Responses,
}

/// What the serving model reports. Only Anthropic has cache writes; every other dialect
/// counts them as ordinary prompt tokens, so they are scripted there alone. Anthropic does
/// not count reasoning apart.
fn tokens(combo: &str) -> Tokens {
    let anthropic = combo == "anthropic";
    Tokens {
        input: 1_000,
        cache_read: 2_000,
        cache_write: if anthropic { 300 } else { 0 },
        output: 500,
        reasoning: if anthropic { 0 } else { 120 },
    }
}

fn expected(t: Tokens) -> Usage {
    Usage {
        uncached_input: t.input,
        cache_read: t.cache_read,
        cache_write: t.cache_write,
        output: t.output,
        reasoning: t.reasoning,
        estimated: false,
    }
}

/// The serving target's price: $2.50 in (cache buckets too: no cache prices are set), $10 out.
fn serving_cost(usage: Usage) -> Nanodollars {
    let prices = Prices::per_mtok(Some(2.5), Some(10.0), None, None);
    usage.cost(&prices).expect("priced")
}

async fn send(h: &Harness, client: Client, model: &str, stream: bool) -> reqwest::Response {
    let request = match client {
        Client::Chat => h.openai(model, stream),
        Client::Anthropic => h.anthropic(model, stream),
        Client::Responses => h
            .http
            .post(h.url("/v1/responses"))
            .bearer_auth(LOCAL_KEY)
            .json(&json!({"model": model, "stream": stream, "input": "hi"})),
    };
    request.send().await.unwrap()
}

fn logged_usage(entry: &Value) -> Usage {
    let usage = &entry["usage"];
    let n = |field: &str| usage[field].as_u64().unwrap_or_else(|| panic!("{field} in {entry}"));
    Usage {
        uncached_input: n("uncached_input"),
        cache_read: n("cache_read"),
        cache_write: n("cache_write"),
        output: n("output"),
        reasoning: n("reasoning"),
        estimated: usage["estimated"].as_bool().unwrap(),
    }
}

#[tokio::test]
async fn every_client_dialect_logs_the_tokens_and_cost_the_upstream_reported_bucket_by_bucket() {
    for client in [Client::Chat, Client::Anthropic, Client::Responses] {
        for (combo, first, second) in UPSTREAMS {
            for stream in [false, true] {
                for fallback in [false, true] {
                    let case =
                        format!("{client:?} to {combo}, stream {stream}, fallback {fallback}");
                    let h = Harness::start(CONFIG).await;
                    let reply =
                        Behavior::Reply(Reply { usage: Some(tokens(combo)), ..Reply::default() });
                    let serving = if fallback {
                        // A retired model: no retry of the same target, straight to the next
                        // (after the provider's other key, where it has one).
                        h.mock.script(first, [Behavior::status(404), Behavior::status(404)]);
                        h.mock.script(second, [reply]);
                        second
                    } else {
                        h.mock.script(first, [reply]);
                        first
                    };
                    let response = send(&h, client, combo, stream).await;
                    assert_eq!(response.status(), 200, "{case}");
                    let cost_header = response
                        .headers()
                        .get("x-switchyard-cost")
                        .map(|v| v.to_str().unwrap().to_owned());
                    let _ = response.text().await.unwrap();
                    let entry = h.newest_logged().await;
                    assert_eq!(
                        entry["served_by"],
                        format!("{}/{serving}", provider(combo)),
                        "{case}"
                    );
                    let want = expected(tokens(combo));
                    assert_eq!(logged_usage(&entry), want, "{case}: {entry}");
                    // The cost is the serving target's; the first target's cheaper prices
                    // would give another figure.
                    let cost = if fallback {
                        serving_cost(want)
                    } else {
                        let first_price = first_prices(combo);
                        want.cost(&first_price).unwrap()
                    };
                    assert_eq!(entry["cost"], cost.to_string(), "{case}: {entry}");
                    if stream {
                        assert_eq!(
                            cost_header, None,
                            "{case}: a stream's headers leave before its usage"
                        );
                    } else {
                        assert_eq!(
                            cost_header.as_deref(),
                            Some(cost.to_string().as_str()),
                            "{case}"
                        );
                    }
                    let used: Vec<&Value> = entry["trace"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|e| e["event"] == "used")
                        .collect();
                    assert_eq!(used.len(), 1, "{case}: one attempt reported usage: {entry}");
                    assert_eq!(
                        used[0]["target"],
                        format!("{}/{serving}", provider(combo)),
                        "{case}"
                    );
                    assert_eq!(used[0]["cost"], cost.to_string(), "{case}");
                }
            }
        }
    }
}

fn provider(combo: &str) -> &'static str {
    match combo {
        "chat" => "oa",
        "anthropic" => "an",
        "gemini" => "ge",
        _ => "rs",
    }
}

fn first_prices(combo: &str) -> Prices {
    let (input, output) = match combo {
        "chat" => (0.15, 0.6),
        "anthropic" => (0.8, 4.0),
        "gemini" => (0.3, 2.5),
        _ => (1.25, 10.0),
    };
    Prices::per_mtok(Some(input), Some(output), None, None)
}

#[tokio::test]
async fn a_chat_stream_is_asked_for_usage_and_the_chunk_reaches_only_a_client_that_asked() {
    let h = Harness::start(CONFIG).await;
    let reply = || Behavior::Reply(Reply { usage: Some(tokens("chat")), ..Reply::default() });
    h.mock.script("gpt-4o-mini", [reply(), reply()]);

    // A client that did not ask: the upstream is asked anyway, the client sees no usage.
    let text = send(&h, Client::Chat, "chat", true).await.text().await.unwrap();
    let sent = &h.mock.attempts_for("gpt-4o-mini")[0];
    assert_eq!(sent.body["stream_options"], json!({"include_usage": true}), "{}", sent.body);
    let chunks = sse_data(&text);
    assert!(!chunks.is_empty(), "{text}");
    for chunk in &chunks {
        assert_ne!(chunk["choices"], json!([]), "a usage-only chunk reached the client: {text}");
        assert!(chunk.get("usage").is_none_or(Value::is_null), "{text}");
    }
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert_eq!(logged_usage(&h.newest_logged().await), expected(tokens("chat")));

    // A client that asked gets the chunk, with the upstream's counts.
    let text = h
        .http
        .post(h.url("/v1/chat/completions"))
        .bearer_auth(LOCAL_KEY)
        .json(&json!({"model": "chat", "stream": true, "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let usage = sse_data(&text).into_iter().find(|c| c["choices"] == json!([])).expect(&text);
    assert_eq!(usage["usage"]["prompt_tokens"], 3_000, "{text}");
    assert_eq!(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 2_000, "{text}");
}

#[tokio::test]
async fn a_provider_that_refuses_stream_options_is_not_sent_them() {
    let config = CONFIG.to_owned()
        + r#"
[[providers]]
id = "strict"
kind = "openai"
base_url = "{mock}/v1"
stream_usage = false
credentials = [{ id = "s-1", secret = "env:OA_1" }]
"#;
    let h = Harness::start(&config).await;
    h.mock.script("strict-model", [Behavior::reply("ok")]);
    let response = send(&h, Client::Chat, "strict/strict-model", true).await;
    assert_eq!(response.status(), 200);
    let _ = response.text().await.unwrap();
    let sent = &h.mock.attempts_for("strict-model")[0];
    assert!(sent.body.get("stream_options").is_none(), "{}", sent.body);
    // No usage came, so none is logged: nothing is made up.
    assert!(h.newest_logged().await["usage"].is_null());
}

#[tokio::test]
async fn a_continued_stream_counts_both_halves_each_at_its_own_prices() {
    let config = CONFIG.to_owned()
        + r#"
[[providers]]
id = "an2"
kind = "anthropic"
base_url = "{mock}"

[[combos]]
name = "continued"
targets = [
  { target = "an/claude-broken", price = { input_per_mtok = 0.8, output_per_mtok = 4.0 } },
  { target = "an2/claude-rescue", price = { input_per_mtok = 2.5, output_per_mtok = 10.0 } },
]
"#;
    let h = Harness::start(&config).await;
    let broken = Reply { usage: Some(tokens("anthropic")), ..Reply::default() }
        .chunks(6)
        .fault(switchyard_testkit::Fault::CutAfter(4));
    let rescue = Tokens { input: 1_200, output: 400, ..Tokens::default() };
    h.mock.script("claude-broken", [broken.into()]);
    h.mock.script(
        "claude-rescue",
        [Behavior::Reply(Reply { usage: Some(rescue), ..Reply::default() })],
    );
    let text = send(&h, Client::Anthropic, "continued", true).await.text().await.unwrap();
    assert!(text.ends_with("data: {\"type\":\"message_stop\"}\n\n"), "continued whole: {text}");

    let entry = h.newest_logged().await;
    // The broken half reported its prompt in `message_start` and one placeholder output
    // token, never its final count: that much is counted, marked as an estimate.
    let first = Usage { output: 1, ..expected(tokens("anthropic")) };
    let second = expected(rescue);
    assert_eq!(logged_usage(&entry), Usage { estimated: true, ..first + second }, "{entry}");
    let cost = first.cost(&first_prices("anthropic")).unwrap() + serving_cost(second);
    assert_eq!(entry["cost"], cost.to_string(), "{entry}");
    let used: Vec<&Value> =
        entry["trace"].as_array().unwrap().iter().filter(|e| e["event"] == "used").collect();
    assert_eq!(used.len(), 2, "{entry}");
    assert_eq!(
        (used[0]["target"].as_str(), used[0]["estimated"].as_bool()),
        (Some("an/claude-broken"), Some(true))
    );
    assert_eq!(
        (used[1]["target"].as_str(), used[1]["estimated"].as_bool()),
        (Some("an2/claude-rescue"), Some(false))
    );
}

#[tokio::test]
async fn a_hedges_loser_counts_what_it_reported_before_it_was_cancelled() {
    let config = CONFIG.to_owned()
        + r#"
[[combos]]
name = "hedged"
targets = [
  { target = "an/claude-slow", price = { input_per_mtok = 0.8, output_per_mtok = 4.0 } },
  { target = "oa/gpt-4o", price = { input_per_mtok = 2.5, output_per_mtok = 10.0 } },
]
hedge_after_ms = 100
"#;
    let h = Harness::start_with(switchyard_e2e::harness::Setup::new(&config).timeouts(|t| {
        t.first_event_ms = 10_000;
        t.first_byte_ms = 10_000;
    }))
    .await;
    // Anthropic sends `message_start`, with the prompt's counts, before it is ready to answer.
    let slow = Reply {
        usage: Some(tokens("anthropic")),
        first_event_delay_ms: 5_000,
        start_at_once: true,
        ..Reply::default()
    };
    h.mock.script("claude-slow", [Behavior::Reply(slow)]);
    h.mock.script(
        "gpt-4o",
        [Behavior::Reply(Reply { usage: Some(tokens("chat")), ..Reply::default() })],
    );
    let response = send(&h, Client::Chat, "hedged", true).await;
    assert_eq!(response.headers()["x-switchyard-target"], "oa/gpt-4o");
    let _ = response.text().await.unwrap();

    let entry = h.newest_logged().await;
    let loser = Usage { output: 1, ..expected(tokens("anthropic")) };
    let winner = expected(tokens("chat"));
    assert_eq!(logged_usage(&entry), Usage { estimated: true, ..loser + winner }, "{entry}");
    let cost = loser.cost(&first_prices("anthropic")).unwrap() + serving_cost(winner);
    assert_eq!(entry["cost"], cost.to_string(), "{entry}");
}

#[tokio::test]
async fn a_model_asked_for_directly_costs_the_price_its_facts_give() {
    let h = Harness::start(
        r#"
[[providers]]
id = "metered"
kind = "openai"
base_url = "{mock}/v1"
models = [{ id = "gpt-4o", price = { input_per_mtok = 2.5, output_per_mtok = 10.0 } }]
credentials = [{ id = "m-1", secret = "env:OA_1" }]
"#,
    )
    .await;
    let tokens = tokens("chat");
    h.mock.script("gpt-4o", [Behavior::Reply(Reply { usage: Some(tokens), ..Reply::default() })]);
    let response = h.openai("metered/gpt-4o", false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let cost = serving_cost(expected(tokens)).to_string();
    assert_eq!(response.headers()["x-switchyard-cost"].to_str().unwrap(), cost);
    let entry = h.newest_logged().await;
    assert_eq!(entry["cost"], cost, "{entry}");
}

/// Issue 25, defect 6: Anthropic's `message_start` reports the prompt's tokens, then the stream
/// says `overloaded_error`: nothing was answered, the request falls back, and the failed attempt
/// is priced at nothing (it stays in the trace as an attempt). Only the answer is billed.
#[tokio::test]
async fn an_attempt_that_failed_before_any_content_is_priced_at_nothing() {
    let config = CONFIG.to_owned()
        + r#"
[[providers]]
id = "an2"
kind = "anthropic"
base_url = "{mock}"

[[combos]]
name = "overloaded"
targets = [
  { target = "an/claude-first", price = { input_per_mtok = 0.8, output_per_mtok = 4.0 } },
  { target = "an2/claude-second", price = { input_per_mtok = 2.5, output_per_mtok = 10.0 } },
]
"#;
    let h = Harness::start(&config).await;
    let overloaded = Reply { usage: Some(tokens("anthropic")), ..Reply::default() }
        .fault(switchyard_testkit::Fault::ErrorAfter(1));
    let served = Tokens { input: 1_200, output: 400, ..Tokens::default() };
    // Overloaded twice: the one same-target retry an overload gets fails too.
    h.mock.script("claude-first", [overloaded.clone().into(), overloaded.into()]);
    h.mock.script(
        "claude-second",
        [Behavior::Reply(Reply { usage: Some(served), ..Reply::default() })],
    );
    let text = send(&h, Client::Anthropic, "overloaded", true).await.text().await.unwrap();
    assert!(text.ends_with("data: {\"type\":\"message_stop\"}\n\n"), "served whole: {text}");

    let entry = h.newest_logged().await;
    assert_eq!(entry["attempts"], 3, "{entry}");
    assert_eq!(logged_usage(&entry), expected(served), "only the answer's tokens: {entry}");
    assert_eq!(entry["cost"], serving_cost(expected(served)).to_string(), "{entry}");
    let used: Vec<&Value> =
        entry["trace"].as_array().unwrap().iter().filter(|e| e["event"] == "used").collect();
    assert_eq!(used.len(), 1, "{entry}");
    assert_eq!(used[0]["target"], "an2/claude-second", "{entry}");
}
