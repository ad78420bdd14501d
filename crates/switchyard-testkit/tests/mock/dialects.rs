//! Normal replies in each dialect have the real APIs' shapes.

use serde_json::{Value, json};
use switchyard_testkit::{Behavior, Dialect, MockUpstream, Reply};

use crate::call::{Call, client};
use crate::transcript::{Transcript, event_names};

fn tool_reply() -> Reply {
    Reply::text("Let me check.").with_tool_call("get_weather", json!({ "city": "Paris" }))
}

#[tokio::test]
async fn openai_reply_has_message_finish_reason_and_usage() {
    let mock = MockUpstream::start().await;
    mock.enqueue("gpt-4o", Behavior::reply("Bonjour"));
    let (status, body) = Call::new(Dialect::OpenAi, "gpt-4o").json(&mock).await;
    assert_eq!(status, 200);
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "gpt-4o");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    assert_eq!(body["choices"][0]["message"]["content"], "Bonjour");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    let usage = &body["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
    );
}

#[tokio::test]
async fn openai_tool_call_carries_its_arguments_as_a_json_string() {
    let mock = MockUpstream::start().await;
    mock.enqueue("gpt-4o", Behavior::tool_call("get_weather", json!({ "city": "Paris" })));
    let (_, body) = Call::new(Dialect::OpenAi, "gpt-4o").json(&mock).await;
    let message = &body["choices"][0]["message"];
    assert_eq!(message["content"], Value::Null);
    let call = &message["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(call["function"]["name"], "get_weather");
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({ "city": "Paris" }));
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn openai_stream_sends_role_then_deltas_then_finish_then_done() {
    let mock = MockUpstream::start().await;
    mock.enqueue("gpt-4o", Reply::text("one two three").chunks(3));
    let response = Call::new(Dialect::OpenAi, "gpt-4o").stream().send(&mock).await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let body = response.bytes().await.unwrap();
    let t = Transcript::read(Dialect::OpenAi, &body);
    assert_eq!(t.text, "one two three");
    assert_eq!(t.finish.as_deref(), Some("stop"));
    assert!(t.done);
    assert_eq!(t.usage_chunks, 0, "no usage chunk unless asked for");
    assert_eq!(t.events, 1 + 3 + 1 + 1, "role, three deltas, finish, [DONE]");
    assert!(String::from_utf8_lossy(&body).ends_with("data: [DONE]\n\n"));
}

#[tokio::test]
async fn openai_stream_sends_a_usage_chunk_before_done_when_asked() {
    let mock = MockUpstream::start().await;
    let call = Call::new(Dialect::OpenAi, "gpt-4o")
        .stream()
        .with_body(|body| body["stream_options"] = json!({ "include_usage": true }));
    let body = call.send(&mock).await.bytes().await.unwrap();
    let t = Transcript::read(Dialect::OpenAi, &body);
    assert_eq!(t.usage_chunks, 1);
    assert!(t.done);
}

#[tokio::test]
async fn openai_stream_tool_call_arrives_as_a_header_then_argument_fragments() {
    let mock = MockUpstream::start().await;
    mock.enqueue("gpt-4o", tool_reply());
    let body =
        Call::new(Dialect::OpenAi, "gpt-4o").stream().send(&mock).await.bytes().await.unwrap();
    let t = Transcript::read(Dialect::OpenAi, &body);
    assert_eq!(t.text, "Let me check.");
    assert_eq!(t.tool_name.as_deref(), Some("get_weather"));
    assert_eq!(
        serde_json::from_str::<Value>(&t.tool_arguments).unwrap(),
        json!({ "city": "Paris" })
    );
    assert_eq!(t.finish.as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn anthropic_reply_has_text_and_tool_use_blocks() {
    let mock = MockUpstream::start().await;
    mock.enqueue("claude-sonnet-4", tool_reply());
    let (status, body) = Call::new(Dialect::Anthropic, "claude-sonnet-4").json(&mock).await;
    assert_eq!(status, 200);
    assert_eq!(body["type"], "message");
    assert_eq!(body["role"], "assistant");
    assert_eq!(body["content"][0], json!({ "type": "text", "text": "Let me check." }));
    assert_eq!(body["content"][1]["type"], "tool_use");
    assert_eq!(body["content"][1]["name"], "get_weather");
    assert_eq!(body["content"][1]["input"], json!({ "city": "Paris" }));
    assert_eq!(body["stop_reason"], "tool_use");
    assert!(body["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert!(body["usage"]["output_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn anthropic_stream_sends_every_event_type_in_order() {
    let mock = MockUpstream::start().await;
    mock.enqueue("claude-sonnet-4", tool_reply().chunks(2));
    let body = Call::new(Dialect::Anthropic, "claude-sonnet-4")
        .stream()
        .send(&mock)
        .await
        .bytes()
        .await
        .unwrap();
    assert_eq!(
        event_names(&body),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    let t = Transcript::read(Dialect::Anthropic, &body);
    assert_eq!(t.text, "Let me check.");
    assert_eq!(t.tool_name.as_deref(), Some("get_weather"));
    assert_eq!(
        serde_json::from_str::<Value>(&t.tool_arguments).unwrap(),
        json!({ "city": "Paris" })
    );
    assert_eq!(t.finish.as_deref(), Some("tool_use"));
    assert!(t.done);
}

#[tokio::test]
async fn gemini_reply_has_parts_finish_reason_and_usage_metadata() {
    let mock = MockUpstream::start().await;
    mock.enqueue("gemini-2.5-flash", tool_reply());
    let (status, body) = Call::new(Dialect::Gemini, "gemini-2.5-flash").json(&mock).await;
    assert_eq!(status, 200);
    let candidate = &body["candidates"][0];
    assert_eq!(candidate["content"]["role"], "model");
    assert_eq!(candidate["content"]["parts"][0]["text"], "Let me check.");
    assert_eq!(
        candidate["content"]["parts"][1]["functionCall"],
        json!({ "name": "get_weather", "args": { "city": "Paris" } })
    );
    assert_eq!(candidate["finishReason"], "STOP");
    assert!(body["usageMetadata"]["totalTokenCount"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn gemini_stream_is_crlf_framed_and_ends_with_the_finish_chunk() {
    let mock = MockUpstream::start().await;
    mock.enqueue("gemini-2.5-flash", Reply::text("abcdef").chunks(3));
    let body = Call::new(Dialect::Gemini, "gemini-2.5-flash")
        .stream()
        .send(&mock)
        .await
        .bytes()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&body);
    assert!(text.starts_with("data: {"));
    assert!(text.ends_with("}\r\n\r\n"));
    let t = Transcript::read(Dialect::Gemini, &body);
    assert_eq!(t.text, "abcdef");
    assert_eq!(t.events, 4, "three text chunks and the finish chunk");
    assert_eq!(t.finish.as_deref(), Some("STOP"));
    assert_eq!(t.usage_chunks, 1);
}

#[tokio::test]
async fn gemini_stream_without_alt_sse_is_rejected_like_a_bad_request() {
    let mock = MockUpstream::start().await;
    let response = client()
        .post(mock.url("/v1beta/models/gemini-2.5-flash:streamGenerateContent"))
        .json(&json!({ "contents": [] }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["status"], "INVALID_ARGUMENT");
}

#[tokio::test]
async fn model_listings_speak_each_dialect_and_name_scripted_models() {
    let mock = MockUpstream::builder().models(["listed-only"]).start().await.unwrap();
    mock.enqueue("scripted", Behavior::reply("x"));
    let client = client();
    let openai: Value =
        client.get(mock.url("/v1/models")).send().await.unwrap().json().await.unwrap();
    assert_eq!(openai["object"], "list");
    assert_eq!(openai["data"][0]["id"], "listed-only");
    assert_eq!(openai["data"][1]["id"], "scripted");
    let anthropic: Value = client
        .get(mock.url("/v1/models"))
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(anthropic["data"][0]["type"], "model");
    assert_eq!(anthropic["has_more"], false);
    let gemini: Value =
        client.get(mock.url("/v1beta/models")).send().await.unwrap().json().await.unwrap();
    assert_eq!(gemini["models"][1]["name"], "models/scripted");
    assert_eq!(mock.total_attempts(), 0, "listings are not attempts");
}

#[tokio::test]
async fn unknown_paths_are_404_and_not_attempts() {
    let mock = MockUpstream::start().await;
    let response = client().post(mock.url("/v1/completions")).body("{}").send().await.unwrap();
    assert_eq!(response.status(), 404);
    assert_eq!(mock.total_attempts(), 0);
}

#[tokio::test]
async fn finish_reasons_are_spelled_per_dialect() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Reply::default().finish(switchyard_testkit::Finish::Length));
    let expected = ["length", "max_tokens", "MAX_TOKENS", "max_output_tokens"];
    for (call, want) in Call::each("m").into_iter().zip(expected) {
        let body = call.clone().stream().send(&mock).await.bytes().await.unwrap();
        assert_eq!(Transcript::read(call.dialect, &body).finish.as_deref(), Some(want));
    }
}
