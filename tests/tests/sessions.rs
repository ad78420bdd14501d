//! Sessions (RESILIENCE.md §11): each agent session keeps to the key that served
//! it, so its prompt is read from that key's cache; spreading strategies spread sessions, not
//! turns; a session whose key is benched moves within the same request and stays where it went.
//!
//! The mock keeps a prompt cache per key (`MockUpstream::cache_prompts`): a prefix sent on a
//! key before is reported read. The workload is Claude Code's shape: large tool definitions
//! every session shares, a system prompt of each session's own, short turns.

use serde_json::{Value, json};
use switchyard_e2e::harness::{Harness, LOCAL_KEY, Setup};
use switchyard_testkit::Behavior;
use switchyard_testkit::Status;

const SESSIONS: usize = 4;
const TURNS: usize = 8;

/// One provider of each dialect, and one of Responses that re-encodes every request it is sent
/// (`passthrough = false`), three keys each, spread by round robin.
fn pools() -> String {
    let keys = r#"credentials = [{ id = "k1", secret = "env:AN_1" }, { id = "k2", secret = "env:OA_1" }, { id = "k3", secret = "env:OA_2" }]"#;
    [
        ("anthropic-pool", "anthropic", "", "{mock}"),
        ("chat-pool", "openai", "", "{mock}/v1"),
        ("responses-pool", "openai", "api = \"responses\"\n", "{mock}/v1"),
        ("responses-encoded", "openai", "api = \"responses\"\npassthrough = false\n", "{mock}/v1"),
    ]
    .map(|(id, kind, api, base)| {
        format!(
            "[[providers]]\nid = \"{id}\"\nkind = \"{kind}\"\n{api}base_url = \"{base}\"\n\
             selection = {{ strategy = \"round_robin\" }}\n{keys}\n\n"
        )
    })
    .concat()
}

#[derive(Clone, Copy, Debug)]
enum Client {
    /// Claude Code: `X-Claude-Code-Session-Id`.
    Anthropic,
    /// An SDK script: no session id; the session is its system prompt and first message.
    Chat,
    /// Codex: `prompt_cache_key`.
    Responses,
}

/// ~6,000 tokens of tool definitions, the same in every session.
fn tools(client: Client) -> Value {
    let tool = |n: usize| {
        let description = format!("Tool {n}: {}", "does one careful thing. ".repeat(46));
        match client {
            Client::Anthropic => json!({"name": format!("tool_{n}"), "description": description,
                "input_schema": {"type": "object", "properties": {}}}),
            Client::Chat => json!({"type": "function", "function": {"name": format!("tool_{n}"),
                "description": description, "parameters": {"type": "object", "properties": {}}}}),
            Client::Responses => json!({"type": "function", "name": format!("tool_{n}"),
                "description": description, "parameters": {"type": "object", "properties": {}}}),
        }
    };
    Value::Array((0..20).map(tool).collect())
}

/// ~800 tokens of system prompt of session `i`'s own.
fn system(i: usize) -> String {
    format!("You are agent {i}. {}", format!("Session {i} works on its own task. ").repeat(90))
}

/// Sends turn `turn` of session `i` with `history` (alternating user and assistant texts) and
/// returns the answer's text and (prompt tokens, tokens read from the cache).
async fn turn(h: &Harness, client: Client, i: usize, history: &[String]) -> (String, (u64, u64)) {
    turn_to(h, client, None, i, history).await
}

/// [`turn`] to `model` rather than the client's own pool.
async fn turn_to(
    h: &Harness,
    client: Client,
    model: Option<&str>,
    i: usize,
    history: &[String],
) -> (String, (u64, u64)) {
    let said = |n: usize, text: &str| {
        let role = if n.is_multiple_of(2) { "user" } else { "assistant" };
        json!({"role": role, "content": text})
    };
    let messages: Vec<Value> = history.iter().enumerate().map(|(n, t)| said(n, t)).collect();
    let (path, body) = match client {
        // As Claude Code marks them: the tools, the system prompt and the last message are
        // breakpoints (Anthropic caches nothing unmarked).
        Client::Anthropic => {
            let mut messages = messages;
            if let Some(last) = messages.last_mut() {
                let text = last["content"].take();
                last["content"] =
                    json!([{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]);
            }
            let system = json!([{"type": "text", "text": system(i), "cache_control": {"type": "ephemeral"}}]);
            let mut tools = tools(client);
            if let Some(last) = tools.as_array_mut().and_then(|t| t.last_mut()) {
                last["cache_control"] = json!({"type": "ephemeral"});
            }
            (
                "/v1/messages",
                json!({"model": "anthropic-pool/claude", "max_tokens": 64,
                "system": system, "tools": tools, "messages": messages}),
            )
        }
        Client::Chat => {
            let mut all = vec![json!({"role": "system", "content": system(i)})];
            all.extend(messages);
            (
                "/v1/chat/completions",
                json!({"model": "chat-pool/gpt", "tools": tools(client),
                "messages": all}),
            )
        }
        Client::Responses => (
            "/v1/responses",
            json!({"model": "responses-pool/gpt",
            "instructions": system(i), "tools": tools(client), "input": messages, "store": false,
            "prompt_cache_key": format!("codex-session-{i}")}),
        ),
    };
    let mut body = body;
    if let Some(model) = model {
        body["model"] = json!(model);
    }
    let mut request = h.http.post(h.url(path)).bearer_auth(LOCAL_KEY).json(&body);
    if let Client::Anthropic = client {
        request = request
            .header("anthropic-version", "2023-06-01")
            .header("x-claude-code-session-id", format!("claude-session-{i}"));
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    match client {
        Client::Anthropic => {
            let u = &answer["usage"];
            let read = n(&u["cache_read_input_tokens"]);
            let prompt = n(&u["input_tokens"]) + read + n(&u["cache_creation_input_tokens"]);
            (answer["content"][0]["text"].as_str().unwrap().to_owned(), (prompt, read))
        }
        Client::Chat => {
            let u = &answer["usage"];
            let text = answer["choices"][0]["message"]["content"].as_str().unwrap().to_owned();
            (text, (n(&u["prompt_tokens"]), n(&u["prompt_tokens_details"]["cached_tokens"])))
        }
        Client::Responses => {
            let u = &answer["usage"];
            let text = answer["output"][0]["content"][0]["text"].as_str().unwrap().to_owned();
            (text, (n(&u["input_tokens"]), n(&u["input_tokens_details"]["cached_tokens"])))
        }
    }
}

/// Four sessions of eight turns, interleaved as parallel agents run them: the share of prompt
/// tokens read from the cache, and which keys served each session.
async fn interleaved(h: &Harness, client: Client) -> (f64, Vec<Vec<String>>) {
    let mut histories: Vec<Vec<String>> = vec![Vec::new(); SESSIONS];
    let (mut prompt, mut read) = (0, 0);
    for t in 0..TURNS {
        for (i, history) in histories.iter_mut().enumerate() {
            history.push(format!("Turn {t} of session {i}: go on."));
            let (answer, (p, r)) = turn(h, client, i, history).await;
            history.push(answer);
            prompt += p;
            read += r;
        }
    }
    let attempts = h.mock.attempts();
    let keys = (0..SESSIONS)
        .map(|i| {
            let mine = format!("agent {i}.");
            attempts
                .iter()
                .filter(|a| a.body.to_string().contains(&mine))
                .map(|a| a.api_key().unwrap_or_default().to_owned())
                .collect()
        })
        .collect();
    #[expect(clippy::cast_precision_loss, reason = "token counts of a test fit an f64")]
    let share = read as f64 / prompt as f64;
    (share, keys)
}

async fn start(sessions: bool) -> Harness {
    let setup = Setup::new(&format!("{}\n[settings.routing]\nsessions = {sessions}\n", pools()));
    let h = Harness::start_with(setup).await;
    h.mock.cache_prompts();
    h
}

#[tokio::test]
async fn interleaved_sessions_on_round_robin_keys_read_their_prompts_from_the_cache() {
    for client in [Client::Anthropic, Client::Chat, Client::Responses] {
        let h = start(true).await;
        let (share, keys) = interleaved(&h, client).await;
        for (i, used) in keys.iter().enumerate() {
            assert_eq!(used.len(), TURNS, "{client:?}: session {i}");
            assert!(
                used.iter().all(|k| *k == used[0]),
                "{client:?}: session {i} kept its key: {used:?}"
            );
        }
        let mut spread: Vec<&String> = keys.iter().map(|k| &k[0]).collect();
        spread.sort();
        spread.dedup();
        assert_eq!(spread.len(), 3, "{client:?}: round robin spread the sessions over every key");

        let off = start(false).await;
        let (rotated, keys_off) = interleaved(&off, client).await;
        assert!(
            keys_off.iter().all(|k| k.iter().any(|key| *key != k[0])),
            "{client:?}: without sessions every session hops keys"
        );
        #[expect(clippy::print_stderr, reason = "the figures docs/benchmarks.md quotes")]
        {
            eprintln!(
                "{client:?}: {:.1} % read from the cache with sessions, {:.1} % without",
                share * 100.0,
                rotated * 100.0
            );
        }
        // Anthropic's cache keeps only what is marked, at breakpoints: each session's first
        // turn writes its tools and system prompt once per key, which costs a few points of
        // the share the automatic caches of the other two read.
        let floor = if let Client::Anthropic = client { 0.88 } else { 0.90 };
        assert!(share >= floor, "{client:?}: {share}");
        assert!(share > rotated, "{client:?}: {share} vs {rotated}");
    }
}

/// A session pinned to key A; A is rate limited: the session moves to B within the same
/// request and the trace names the move; once A has recovered the session stays on B.
#[tokio::test]
async fn a_session_whose_key_is_rate_limited_moves_in_the_same_request_and_stays() {
    let h = start(true).await;
    let mut history = vec!["first".to_owned()];
    turn(&h, Client::Anthropic, 0, &history).await;
    let pinned = h.mock.attempts()[0].api_key().unwrap().to_owned();
    history.extend(["answer".to_owned(), "second".to_owned()]);
    h.mock.enqueue("claude", Behavior::status(429));
    turn(&h, Client::Anthropic, 0, &history).await;
    let attempts = h.mock.attempts();
    assert_eq!(attempts[1].api_key(), Some(pinned.as_str()), "the pin was asked first");
    let moved_to = attempts[2].api_key().unwrap().to_owned();
    assert_ne!(moved_to, pinned);
    let trace = h.newest_logged().await["trace"].to_string();
    assert!(
        trace.contains(r#""event":"session""#) && trace.contains(r#""pin":"moved""#),
        "{trace}"
    );
    // A's cooldown ends (the session would be welcome back there): it stays on B.
    let (status, _) =
        h.api(reqwest::Method::POST, "/api/resilience/reset", &json!({"scope": "all"})).await;
    assert_eq!(status, 200);
    for _ in 0..3 {
        history.extend(["answer".to_owned(), "more".to_owned()]);
        turn(&h, Client::Anthropic, 0, &history).await;
    }
    let later: Vec<String> =
        h.mock.attempts()[3..].iter().map(|a| a.api_key().unwrap().to_owned()).collect();
    assert!(later.iter().all(|k| *k == moved_to), "{later:?}");
    let trace = h.newest_logged().await["trace"].to_string();
    assert!(trace.contains(r#""pin":"kept""#), "{trace}");
}

/// A Codex session moved to another key: the encrypted reasoning and compaction items only its
/// old key can read are dropped on the way, and the trace names them; on its own key they go.
#[tokio::test]
async fn a_session_moved_to_another_key_sends_no_item_only_the_old_key_can_read() {
    let h = start(true).await;
    let send = |input: Value| {
        let body = json!({"model": "responses-pool/gpt", "input": input, "store": false,
            "prompt_cache_key": "codex-moving"});
        let request = h.http.post(h.url("/v1/responses")).bearer_auth(LOCAL_KEY).json(&body);
        async move { assert_eq!(request.send().await.unwrap().status(), 200) }
    };
    let user = |text: &str| json!({"role": "user", "content": text});
    send(json!([user("first")])).await;
    let pinned = h.mock.attempts()[0].api_key().unwrap().to_owned();
    let bound = json!([user("first"),
        {"type": "compaction", "encrypted_content": "gCOMPACTED"},
        {"type": "reasoning", "summary": [], "encrypted_content": "gREASONED"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "answer"}]},
        user("second")]);
    send(bound.clone()).await;
    let on_its_key = h.mock.attempts()[1].body["input"].clone();
    assert_eq!(on_its_key, bound, "its own key reads them: sent as they are");

    h.mock.enqueue("gpt", Behavior::status(429));
    send(bound).await;
    let attempts = h.mock.attempts();
    assert_eq!(attempts[2].api_key(), Some(pinned.as_str()), "the pin first, with everything");
    assert_eq!(attempts[2].body["input"].as_array().unwrap().len(), 5);
    assert_ne!(attempts[3].api_key(), Some(pinned.as_str()), "moved");
    let sent = attempts[3].body["input"].to_string();
    assert!(!sent.contains("gCOMPACTED") && !sent.contains("gREASONED"), "{sent}");
    assert!(sent.contains("second") && sent.contains("answer"), "the conversation goes: {sent}");
    let trace = h.newest_logged().await["trace"].to_string();
    assert!(
        trace.contains("1 encrypted reasoning item(s) of another credential")
            && trace.contains("1 compaction item(s) of another credential"),
        "{trace}"
    );
}

/// Codex's history carries reasoning another organisation encrypted (the session was served
/// elsewhere before): OpenAI answers 400 `invalid_encrypted_content`. The same key is asked
/// once more at once without those items, the client gets the answer, and the trace says what
/// was left out; a request with nothing to leave out gets the upstream's 400, sent once.
#[tokio::test]
async fn encrypted_reasoning_the_key_cannot_read_is_left_out_of_one_more_try_on_it() {
    let h = start(true).await;
    let stale = Status::new(400).body_json(json!({"error": {
        "message": "The encrypted content gAAA...DQ== could not be verified.",
        "type": "invalid_request_error", "param": null, "code": "invalid_encrypted_content"}}));
    let send = |input: Value| {
        let body = json!({"model": "responses-pool/gpt", "input": input, "store": false});
        let request = h.http.post(h.url("/v1/responses")).bearer_auth(LOCAL_KEY).json(&body);
        async move { request.send().await.unwrap().status() }
    };
    let user = |text: &str| json!({"role": "user", "content": text});
    let bound = json!([user("first"),
        {"type": "reasoning", "summary": [], "encrypted_content": "gFOREIGN"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "answer"}]},
        user("second")]);
    h.mock.enqueue("gpt", stale.clone());
    assert_eq!(send(bound.clone()).await, 200);
    let attempts = h.mock.attempts();
    assert_eq!(attempts.len(), 2, "one more try, not a fallback");
    assert_eq!(attempts[0].api_key(), attempts[1].api_key(), "the same key");
    assert!(attempts[0].body["input"].to_string().contains("gFOREIGN"));
    let repaired = attempts[1].body["input"].to_string();
    assert!(!repaired.contains("gFOREIGN") && repaired.contains("second"), "{repaired}");
    let logged = h.newest_logged().await;
    let trace = logged["trace"].to_string();
    assert!(trace.contains("1 encrypted reasoning item(s) of another credential"), "{trace}");
    assert_eq!(logged["attempts"], 2);

    // Nothing another credential wrote: the client's error, as the upstream gave it, sent once.
    h.mock.enqueue("gpt", stale);
    let before = h.mock.attempts().len();
    assert_eq!(send(json!([user("plain")])).await, 400);
    assert_eq!(h.mock.attempts().len(), before + 1, "not sent again, nowhere else");
}

/// The same refusal as a gateway relays it, with no code and only OpenAI's message: mended
/// the same way.
#[tokio::test]
async fn encrypted_reasoning_refused_with_only_a_message_is_mended_too() {
    let h = start(true).await;
    h.mock.enqueue(
        "gpt",
        Status::new(400).body_json(json!({"error": {
            "message": "The encrypted content for item rs_0a18 could not be verified. Reason: Encrypted content could not be decrypted or parsed.",
            "type": "invalid_request_error", "param": null, "code": null}})),
    );
    let input = json!([{"role": "user", "content": "first"},
        {"type": "compaction", "encrypted_content": "gCOMPACTED"},
        {"role": "user", "content": "second"}]);
    let body = json!({"model": "responses-pool/gpt", "input": input, "store": false});
    let response =
        h.http.post(h.url("/v1/responses")).bearer_auth(LOCAL_KEY).json(&body).send().await;
    assert_eq!(response.unwrap().status(), 200);
    let attempts = h.mock.attempts();
    assert_eq!(attempts.len(), 2);
    assert!(!attempts[1].body["input"].to_string().contains("gCOMPACTED"));
}

/// `invalid_encrypted_content` as OpenAI answers it, with its `code`, or as a gateway relays
/// it, with `code: null` and only OpenAI's message.
fn stale_reasoning(with_code: bool) -> Status {
    let (message, code) = if with_code {
        (
            "The encrypted content gAAA...DQ== could not be verified.",
            json!("invalid_encrypted_content"),
        )
    } else {
        (
            "The encrypted content for item rs_0a18 could not be verified. Reason: Encrypted content could not be decrypted or parsed.",
            Value::Null,
        )
    };
    Status::new(400).body_json(json!({"error": {"message": message,
        "type": "invalid_request_error", "param": null, "code": code}}))
}

/// Whether a Responses input item is one only the credential that wrote it can read.
fn bound_to_a_credential(item: &Value) -> bool {
    match item["type"].as_str() {
        Some("reasoning") => item.get("encrypted_content").is_some(),
        Some("compaction") => true,
        _ => false,
    }
}

/// `body` as it should go once more: its input without the items of `bound_to_a_credential`,
/// every other field and item as it was.
fn mended(body: &Value) -> Value {
    let mut body = body.clone();
    body["input"].as_array_mut().unwrap().retain(|item| !bound_to_a_credential(item));
    body
}

/// The trace's attempts, in order.
fn attempts_of(logged: &Value) -> Vec<Value> {
    let trace: Value = match &logged["trace"] {
        Value::String(text) => serde_json::from_str(text).unwrap(),
        other => other.clone(),
    };
    trace.as_array().unwrap().iter().filter(|e| e["event"] == "attempted").cloned().collect()
}

/// The repaired retry on the translated path: a Responses request re-encoded for its Responses
/// upstream (`passthrough = false`) carries the encrypted reasoning and compaction items as the
/// client sent them; refused with `invalid_encrypted_content` in either form, the same key is
/// asked once more with the re-encoded request minus those items, and the client gets that
/// answer. Refused again, the client gets the upstream's 400, and no third try is made.
#[tokio::test]
async fn encrypted_reasoning_is_left_out_of_one_more_try_on_the_translated_path_too() {
    for with_code in [true, false] {
        let h = start(true).await;
        let form = if with_code { "with its code" } else { "only a message" };
        let user = |text: &str| json!({"role": "user", "content": text});
        let compaction = json!({"type": "compaction", "encrypted_content": "gCOMPACTED"});
        let reasoning =
            json!({"type": "reasoning", "summary": [], "encrypted_content": "gFOREIGN"});
        let conversation = |last: &str| {
            json!({"model": "responses-encoded/gpt", "instructions": "Answer briefly.",
                "tools": [{"type": "function", "name": "lookup", "description": "Looks it up.",
                    "parameters": {"type": "object", "properties": {}}}],
                "input": [user("first"), compaction, reasoning,
                    {"role": "assistant", "content": [{"type": "output_text", "text": "answer"}]},
                    user(last)],
                "store": false, "max_output_tokens": 512})
        };
        let send = |body: Value| {
            let request = h.http.post(h.url("/v1/responses")).bearer_auth(LOCAL_KEY).json(&body);
            async move { request.send().await.unwrap() }
        };

        h.mock.script("gpt", [stale_reasoning(with_code).into(), Behavior::reply("Mended.")]);
        let response = send(conversation("second")).await;
        assert_eq!(response.status(), 200, "{form}");
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["output"][0]["content"][0]["text"], "Mended.", "{form}: {answer}");
        let attempts = h.mock.attempts();
        assert_eq!(attempts.len(), 2, "{form}: one more try, not a fallback");
        assert_eq!(attempts[0].api_key(), attempts[1].api_key(), "{form}: the same key");
        let first = &attempts[0].body;
        assert_ne!(first["input"][0], user("first"), "{form}: re-encoded, not forwarded: {first}");
        let input = first["input"].as_array().unwrap();
        assert!(input.contains(&compaction) && input.contains(&reasoning), "{form}: {first}");
        assert_eq!(attempts[1].body, mended(first), "{form}: all else goes as it went");
        assert!(attempts[1].body.to_string().contains("second"), "{form}");
        let logged = h.newest_logged().await;
        assert_eq!(logged["attempts"], 2, "{form}: {logged}");
        let tried = attempts_of(&logged);
        assert!(tried.iter().all(|a| a["path"] == "translated"), "{form}: {tried:?}");
        let dropped = tried[1]["dropped"].to_string();
        assert!(
            dropped.contains("1 encrypted reasoning item(s) of another credential")
                && dropped.contains("1 compaction item(s) of another credential"),
            "{form}: {tried:?}"
        );

        // Refused again without them: the client's error, as the upstream gave it; no third try.
        let stale = stale_reasoning(with_code);
        h.mock.script("gpt", [stale.clone().into(), stale.clone().into()]);
        let response = send(conversation("third")).await;
        assert_eq!(response.status(), 400, "{form}");
        let error: Value = response.json().await.unwrap();
        assert!(
            error["error"]["message"].as_str().unwrap().contains("could not be verified"),
            "{form}: {error}"
        );
        let attempts = h.mock.attempts();
        assert_eq!(attempts.len(), 4, "{form}: the mended request once, nowhere else");
        assert_eq!(attempts[3].body, mended(&attempts[2].body), "{form}");

        // Nothing another credential wrote: sent once.
        h.mock.enqueue("gpt", stale);
        let plain = json!({"model": "responses-encoded/gpt", "input": [user("plain")]});
        assert_eq!(send(plain).await.status(), 400, "{form}");
        assert_eq!(h.mock.attempts().len(), 5, "{form}: not sent again, nowhere else");
    }
}

/// The other way a Responses request is re-encoded for a Responses upstream that would take it
/// as it is: its history holds a Claude turn's thinking (the session was served by Anthropic
/// through Switchyard, which keeps it in a reasoning item of its own), which only translation
/// can leave out. OpenAI reasoning of another organisation in the same history is carried, and
/// once refused in either form, left out of one more try on the same key.
#[tokio::test]
async fn encrypted_reasoning_is_left_out_of_a_request_re_encoded_for_a_claude_turn_in_its_history()
{
    for with_code in [true, false] {
        let h = start(true).await;
        let form = if with_code { "with its code" } else { "only a message" };
        let user = |text: &str| json!({"role": "user", "content": text});
        let said = |text: &str| json!({"role": "assistant", "content": [{"type": "output_text", "text": text}]});
        let claude = json!({"type": "reasoning", "summary": [],
            "encrypted_content": "switchyard.anthropic.redacted.EqQBCkYIBxgCKkDa"});
        let reasoning =
            json!({"type": "reasoning", "summary": [], "encrypted_content": "gFOREIGN"});
        let body = json!({"model": "responses-pool/gpt", "store": false,
            "input": [user("first"), claude, said("from Claude"), user("second"), reasoning,
                said("from another organisation"), user("third")]});
        h.mock.script("gpt", [stale_reasoning(with_code).into(), Behavior::reply("Mended.")]);
        let response =
            h.http.post(h.url("/v1/responses")).bearer_auth(LOCAL_KEY).json(&body).send().await;
        let response = response.unwrap();
        assert_eq!(response.status(), 200, "{form}");
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["output"][0]["content"][0]["text"], "Mended.", "{form}: {answer}");
        let attempts = h.mock.attempts();
        assert_eq!(attempts.len(), 2, "{form}");
        assert_eq!(attempts[0].api_key(), attempts[1].api_key(), "{form}: the same key");
        let first = &attempts[0].body;
        let sent = first.to_string();
        assert!(!sent.contains("switchyard.anthropic."), "{form}: translation leaves it: {sent}");
        assert!(first["input"].as_array().unwrap().contains(&reasoning), "{form}: {sent}");
        assert_eq!(attempts[1].body, mended(first), "{form}: all else goes as it went");
        let mended_text = attempts[1].body.to_string();
        for kept in ["first", "from Claude", "second", "from another organisation", "third"] {
            assert!(mended_text.contains(kept), "{form}: {kept} is kept: {mended_text}");
        }
        let tried = attempts_of(&h.newest_logged().await);
        assert_eq!(tried.len(), 2, "{form}: {tried:?}");
        assert!(tried.iter().all(|a| a["path"] == "translated"), "{form}: {tried:?}");
        let dropped = tried[1]["dropped"].to_string();
        assert!(
            dropped.contains("redacted_thinking content")
                && dropped.contains("1 encrypted reasoning item(s) of another credential"),
            "{form}: {tried:?}"
        );
    }
}

/// A key under its reserve is still known to be after a restart: its windows were kept when
/// it crossed the reserve, and read back at start until their reset.
#[tokio::test]
async fn a_restart_keeps_what_is_known_of_a_keys_quota_until_its_reset() {
    let clock =
        switchyard_testkit::ManualClock::new(switchyard_core::UnixMillis(1_800_000_000_000));
    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let setup = || Setup::new(&pools()).clock(&clock);
    let h = Harness::start_in_with(mock, data.path(), setup()).await;
    h.mock.report_quota("an-1", 1, 100, "60s");
    turn(&h, Client::Anthropic, 0, &["first".to_owned()]).await;
    let below = |health: &Value| {
        let views = health["headroom"].as_array().cloned().unwrap_or_default();
        views.iter().find(|v| v["credential"] == "k1").map(|v| v["below_reserve"].clone())
    };
    let health = h.api_get("/api/monitoring/health").await.1;
    assert_eq!(below(&health), Some(json!(true)), "{health}");
    let mock = h.stop().await;

    let h = Harness::start_in_with(mock, data.path(), setup().reuse_config()).await;
    let health = h.api_get("/api/monitoring/health").await.1;
    assert_eq!(below(&health), Some(json!(true)), "restored before any answer: {health}");
    clock.advance(std::time::Duration::from_secs(61));
    let health = h.api_get("/api/monitoring/health").await.1;
    assert_eq!(below(&health), None, "unknown again after its reset: {health}");
}

/// A restart keeps each session on its key: the pins are read back from the request log.
#[tokio::test]
async fn a_restart_keeps_sessions_on_their_keys() {
    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let setup = || Setup::new(&pools());
    let h = Harness::start_in_with(mock, data.path(), setup()).await;
    let mut histories: Vec<Vec<String>> = vec![Vec::new(); 3];
    for (i, history) in histories.iter_mut().enumerate() {
        history.push(format!("session {i}"));
        let (answer, _) = turn(&h, Client::Anthropic, i, history).await;
        history.push(answer);
    }
    let before: Vec<String> =
        h.mock.attempts().iter().map(|a| a.api_key().unwrap().to_owned()).collect();
    let mock = h.stop().await;
    let h = Harness::start_in_with(mock, data.path(), setup().reuse_config()).await;
    // A new session first: round robin would hand the next ones to other keys.
    turn(&h, Client::Anthropic, 9, &["a new session".to_owned()]).await;
    for (i, history) in histories.iter_mut().enumerate() {
        history.push("after the restart".to_owned());
        turn(&h, Client::Anthropic, i, history).await;
    }
    let after: Vec<String> =
        h.mock.attempts()[4..].iter().map(|a| a.api_key().unwrap().to_owned()).collect();
    assert_eq!(after, before, "each session on the key it had before the restart");

    // Usage by session reads what the ring of this run does not hold from the file.
    let (status, usage) = h.api_get("/api/usage?group_by=session").await;
    assert_eq!(status, 200, "{usage}");
    let requests: Vec<u64> = usage["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["total"]["requests"].as_u64().unwrap())
        .collect();
    assert_eq!(requests, [2, 2, 2, 1], "three sessions across the restart, one after: {usage}");
}

/// A session moved off its benched target returns there once it heals, a restart between
/// the two included: its home is read back with its pin.
#[tokio::test]
async fn a_moved_session_returns_home_after_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let config = r#"
[[providers]]
id = "home"
kind = "anthropic"
base_url = "{mock}"
credentials = [{ id = "h1", secret = "env:AN_1" }]

[[providers]]
id = "stand-in"
kind = "anthropic"
base_url = "{mock}"
credentials = [{ id = "s1", secret = "env:OA_1" }]

[[combos]]
name = "pair"
targets = [{ target = "home/claude" }, { target = "stand-in/claude-backup" }]
"#;
    let h = Harness::start_in_with(mock, data.path(), Setup::new(config)).await;
    let ask = |h: &Harness, history: &[&str]| {
        let said = history.iter().enumerate().map(
            |(n, t)| json!({"role": if n % 2 == 0 { "user" } else { "assistant" }, "content": t}),
        );
        let body = json!({"model": "pair", "max_tokens": 16, "messages": said.collect::<Vec<_>>()});
        h.http
            .post(h.url("/v1/messages"))
            .bearer_auth(LOCAL_KEY)
            .header("anthropic-version", "2023-06-01")
            .header("x-claude-code-session-id", "going-home")
            .json(&body)
            .send()
    };
    let served = |h: &Harness| h.mock.attempts().last().unwrap().model.clone();
    assert_eq!(ask(&h, &["one"]).await.unwrap().status(), 200);
    assert_eq!(served(&h), "claude");
    h.mock.enqueue("claude", Behavior::status(503));
    assert_eq!(ask(&h, &["one", "a", "two"]).await.unwrap().status(), 200);
    assert_eq!(served(&h), "claude-backup", "moved to the stand-in");

    let mock = h.stop().await;
    let h = Harness::start_in_with(mock, data.path(), Setup::new(config).reuse_config()).await;
    let (status, _) =
        h.api(reqwest::Method::POST, "/api/resilience/reset", &json!({"scope": "all"})).await;
    assert_eq!(status, 200);
    assert_eq!(ask(&h, &["one", "a", "two", "b", "three"]).await.unwrap().status(), 200);
    assert_eq!(served(&h), "claude", "home again, though a restart came between");
    let trace = h.newest_logged().await["trace"].to_string();
    assert!(trace.contains(r#""pin":"returned""#), "{trace}");
}

/// `max_in_flight = 2` on a key of its own, six requests at once, each answer streamed slowly:
/// the mock never has more than two open on that key, and none fails.
#[tokio::test]
async fn a_capped_key_never_has_more_requests_open_than_its_cap_and_none_fails() {
    let config = r#"
[[providers]]
id = "capped"
kind = "anthropic"
base_url = "{mock}"
credentials = [{ id = "only", secret = "env:AN_1", max_in_flight = 2 }]

[settings.routing]
queue_ms = 20000
"#;
    let h = Harness::start_with(Setup::new(config).timeouts(|t| t.total_ms = 60_000)).await;
    let slow = switchyard_testkit::Reply::text("one two three four")
        .chunks(4)
        .chunk_gap(std::time::Duration::from_millis(100));
    h.mock.set_default("claude", slow);
    let requests = (0..6).map(|i| {
        let request = h
            .http
            .post(h.url("/v1/messages"))
            .bearer_auth(LOCAL_KEY)
            .header("anthropic-version", "2023-06-01")
            .json(&json!({"model": "capped/claude", "max_tokens": 16, "stream": true,
                "messages": [{"role": "user", "content": format!("request {i}")}]}));
        async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 200);
            response.text().await.unwrap()
        }
    });
    let answers = futures_util::future::join_all(requests).await;
    for answer in &answers {
        assert!(answer.contains("message_stop"), "{answer}");
    }
    assert_eq!(h.mock.total_attempts(), 6, "each request once: none went elsewhere or failed");
    assert_eq!(h.mock.credential_peaks().get("an-1"), Some(&2), "{:?}", h.mock.credential_peaks());
    let metrics = h.api_text("/metrics").await;
    assert!(metrics.contains("switchyard_queued_total{result=\"served\"} 4"), "{metrics}");
}

/// The mock says key k1 has 1 % of its requests left: no new session goes there while k2 has
/// more, a session already on k1 stays, and once k1's window has reset it takes sessions again
///. The health API and `/metrics` show the windows.
#[tokio::test]
async fn a_key_under_its_reserve_takes_no_new_session_until_its_window_resets() {
    let clock =
        switchyard_testkit::ManualClock::new(switchyard_core::UnixMillis(1_800_000_000_000));
    let h = Harness::start_with(Setup::new(&pools()).clock(&clock)).await;
    h.mock.report_quota("an-1", 1, 100, "60s");
    h.mock.report_quota("oa-1", 50, 100, "60s");
    h.mock.report_quota("oa-2", 50, 100, "60s");
    let key_of = |n: usize| h.mock.attempts()[n].api_key().unwrap().to_owned();
    // Session 0 is the first: round robin gives it k1, before anyone knew k1's quota.
    turn(&h, Client::Anthropic, 0, &["first".to_owned()]).await;
    assert_eq!(key_of(0), "an-1");
    let (_, health) = h.api_get("/api/monitoring/health").await;
    let k1 =
        health["headroom"].as_array().unwrap().iter().find(|v| v["credential"] == "k1").cloned();
    assert_eq!(k1.as_ref().map(|v| v["below_reserve"].clone()), Some(json!(true)), "{health}");
    let metrics = h.api_text("/metrics").await;
    assert!(
        metrics.contains(r#"switchyard_credential_headroom{provider="anthropic-pool",credential="k1",window="requests"} 0.01"#),
        "{metrics}"
    );
    // Six new sessions: round robin would give k1 two of them; none goes there.
    for i in 1..=6 {
        turn(&h, Client::Anthropic, i, &["first".to_owned()]).await;
    }
    let new: Vec<String> = (1..=6).map(key_of).collect();
    assert!(new.iter().all(|k| k != "an-1"), "{new:?}");
    assert!(new.contains(&"oa-1".to_owned()) && new.contains(&"oa-2".to_owned()), "{new:?}");
    // Session 0 continues on k1: a pinned session moves only when its key is out or refused.
    turn(&h, Client::Anthropic, 0, &["first".to_owned(), "a".to_owned(), "second".to_owned()])
        .await;
    assert_eq!(key_of(7), "an-1");
    // k1's window resets: it is unknown again, and new sessions go there too.
    clock.advance(std::time::Duration::from_secs(61));
    h.mock.report_quota("an-1", 100, 100, "60s");
    for i in 7..=12 {
        turn(&h, Client::Anthropic, i, &["first".to_owned()]).await;
    }
    let after: Vec<String> = (8..=13).map(key_of).collect();
    assert!(after.contains(&"an-1".to_owned()), "{after:?}");
}

/// The request log says which session each request belonged to and lists one session's
/// requests, so a user sees what one agent task did and cost (point 4: the log).
#[tokio::test]
async fn the_request_log_lists_one_sessions_requests() {
    let h = start(true).await;
    for i in 0..2 {
        let mut history = vec![format!("task {i}")];
        for _ in 0..2 {
            let (answer, _) = turn(&h, Client::Anthropic, i, &history).await;
            history.extend([answer, "go on".to_owned()]);
        }
    }
    let newest = h.newest_logged().await;
    let short = newest["trace"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "session")
        .and_then(|e| e["session"].as_str())
        .unwrap()
        .to_owned();
    let (status, listed) = h.api_get(&format!("/api/requests?session={short}")).await;
    assert_eq!(status, 200, "{listed}");
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2, "the session's two turns, not the other's");
    assert!(listed.iter().all(|r| r["session"].as_str().unwrap().starts_with(&short)));

    // What each agent task cost: one series per session, labelled as the trace shows it.
    let (status, usage) = h.api_get("/api/usage?group_by=session").await;
    assert_eq!(status, 200, "{usage}");
    let series = usage["series"].as_array().unwrap();
    assert_eq!(series.len(), 2, "{usage}");
    assert!(series.iter().all(|s| s["total"]["requests"] == 2), "{usage}");
    assert!(series.iter().any(|s| s["label"] == short.as_str()), "{usage}");
    let tokens =
        |v: &Value| v["cache_read"].as_u64().unwrap() + v["uncached_input"].as_u64().unwrap();
    let summed: u64 = series.iter().map(|s| tokens(&s["total"])).sum();
    assert_eq!(summed, tokens(&usage["total"]), "the sessions add up to the whole");
}

/// Three sessions of eight turns of a client of another dialect (OpenAI Chat, Responses) to an
/// Anthropic target, whose cache keeps only what a request marks: every turn after a session's
/// first reads its prompt from the cache when translation places the breakpoints, and next to
/// nothing when it does not (`cache_breakpoints = "off"`).
#[tokio::test]
async fn a_translated_client_reads_its_prompt_from_an_anthropic_cache() {
    async fn shares(client: Client, breakpoints: &str) -> Vec<Vec<f64>> {
        let extra =
            format!("{}\n[settings.routing]\ncache_breakpoints = \"{breakpoints}\"\n", pools());
        let h = Harness::start_with(Setup::new(&extra)).await;
        h.mock.cache_prompts();
        let mut histories: Vec<Vec<String>> = vec![Vec::new(); 3];
        let mut shares = vec![Vec::new(); 3];
        for t in 0..TURNS {
            for (i, history) in histories.iter_mut().enumerate() {
                history.push(format!("Turn {t} of session {i}: go on."));
                let model = Some("anthropic-pool/claude");
                let (answer, (prompt, read)) = turn_to(&h, client, model, i, history).await;
                history.push(answer);
                #[expect(clippy::cast_precision_loss, reason = "token counts of a test")]
                shares[i].push(read as f64 / prompt as f64);
            }
        }
        let sent = h.mock.attempts();
        let marks =
            |a: &switchyard_testkit::Attempt| a.body.to_string().matches("cache_control").count();
        assert!(sent.iter().all(|a| marks(a) <= 4), "never more than four breakpoints");
        let trace = h.newest_logged().await["trace"].to_string();
        let named = trace.contains("cache_control on the last message");
        assert_eq!(named, breakpoints != "off", "the trace names what was added: {trace}");
        shares
    }
    for client in [Client::Chat, Client::Responses] {
        let marked = shares(client, "sessions").await;
        let unmarked = shares(client, "off").await;
        let later = |s: &[Vec<f64>]| {
            s.iter().flat_map(|turns| turns[1..].iter().copied()).collect::<Vec<_>>()
        };
        let worst = later(&marked).into_iter().fold(1.0, f64::min);
        let best_unmarked = later(&unmarked).into_iter().fold(0.0, f64::max);
        #[expect(clippy::print_stderr, reason = "the figures docs/benchmarks.md quotes")]
        {
            eprintln!(
                "{client:?} -> Anthropic: every later turn reads at least {:.1} % from the cache with breakpoints, at most {:.1} % without",
                worst * 100.0,
                best_unmarked * 100.0
            );
        }
        assert!(worst >= 0.85, "{client:?}: {marked:?}");
        assert!(best_unmarked < 0.05, "{client:?} without breakpoints: {unmarked:?}");
    }
}

/// An OpenAI upstream keys its cache by `prompt_cache_key`, which an Anthropic client cannot
/// send: its translated turns carry their session's key, the same for every turn of a session
/// and another for another session; a provider not known to take the field gets none.
#[tokio::test]
async fn a_session_translated_to_openai_carries_its_key_as_prompt_cache_key() {
    let extra = r#"
[[providers]]
id = "keyed"
kind = "openai"
base_url = "{mock}/v1"
prompt_cache_key = true
credentials = [{ id = "k1", secret = "env:OA_1" }]
"#;
    let h = Harness::start_with(Setup::new(&format!("{}{extra}", pools()))).await;
    let mut keys = Vec::new();
    for model in ["keyed/gpt", "chat-pool/gpt"] {
        for i in 0..2 {
            let mut history = vec!["first".to_owned()];
            for _ in 0..2 {
                let (answer, _) = turn_to(&h, Client::Anthropic, Some(model), i, &history).await;
                history.extend([answer, "next".to_owned()]);
                let sent = h.mock.attempts().pop().expect("sent");
                keys.push(sent.body.get("prompt_cache_key").cloned());
            }
        }
    }
    let [a1, a2, b1, b2, none @ ..] = keys.as_slice() else { panic!("{keys:?}") };
    assert!(a1.as_ref().is_some_and(Value::is_string), "{keys:?}");
    assert_eq!((a1, b1), (a2, b2), "one key per session, every turn");
    assert_ne!(a1, b1, "another session, another key");
    assert!(
        none.iter().all(Option::is_none),
        "a provider not known to take it gets none: {keys:?}"
    );
    h.logged(8).await;
    let (_, log) = h.api_get("/api/requests").await;
    let named = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["trace"].to_string().contains("\"prompt_cache_key\""))
        .count();
    assert_eq!(named, 4, "the trace of each keyed turn names what was added");
}
