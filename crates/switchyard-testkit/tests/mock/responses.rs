//! The OpenAI Responses dialect (what Codex CLI speaks): documents, the numbered event stream,
//! function and custom tool calls, and content rules over its input items.

use serde_json::{Value, json};
use switchyard_testkit::{Behavior, Dialect, Finish, MockUpstream, Reply, Rule, Script, When};

use crate::call::{Call, client};
use crate::transcript::{Frame, Transcript, event_names, frames};

const PATCH: &str =
    "*** Begin Patch\n*** Add File: hello.txt\n+hello from switchyard\n*** End Patch\n";

fn responses(model: &str) -> Call {
    Call::new(Dialect::Responses, model)
}

/// Every event's data, parsed, in order.
fn event_data(body: &[u8]) -> Vec<Value> {
    frames(body)
        .into_iter()
        .filter_map(|frame| match frame {
            Frame::Event { data, .. } => Some(serde_json::from_str(&data).expect("JSON data")),
            Frame::Comment(_) => None,
        })
        .collect()
}

#[tokio::test]
async fn a_responses_reply_is_a_completed_response_with_one_message_and_usage() {
    let mock = MockUpstream::start().await;
    mock.enqueue("gpt-5", Behavior::reply("Bonjour"));
    let (status, body) = responses("gpt-5").json(&mock).await;
    assert_eq!(status, 200);
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["model"], "gpt-5");
    assert!(body["id"].as_str().unwrap().starts_with("resp_"));
    let output = body["output"].as_array().unwrap();
    assert_eq!(output.len(), 1);
    assert_eq!(output[0]["type"], "message");
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(output[0]["content"][0]["type"], "output_text");
    assert_eq!(output[0]["content"][0]["text"], "Bonjour");
    let usage = &body["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["input_tokens"].as_u64().unwrap() + usage["output_tokens"].as_u64().unwrap()
    );
    assert_eq!(mock.attempts()[0].dialect, Dialect::Responses);
    assert_eq!(mock.attempts()[0].path, "/v1/responses");
}

#[tokio::test]
async fn responses_are_served_where_chatgpt_serves_a_subscribers_codex_too() {
    let mock = MockUpstream::start().await;
    mock.enqueue("gpt-5", Behavior::reply("Bonjour"));
    let call = responses("gpt-5");
    let response = client()
        .post(mock.url("/backend-api/codex/responses"))
        .header("authorization", "Bearer chatgpt-access-token")
        .header("chatgpt-account-id", "acct-1234")
        .json(&call.body())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["output"][0]["content"][0]["text"], "Bonjour");
    let attempt = &mock.attempts()[0];
    assert_eq!(
        (attempt.dialect, attempt.path.as_str()),
        (Dialect::Responses, "/backend-api/codex/responses")
    );
    assert_eq!(attempt.api_key(), Some("chatgpt-access-token"));
    assert_eq!(attempt.header("chatgpt-account-id"), Some("acct-1234"));
}

#[tokio::test]
async fn a_responses_function_call_is_an_item_with_call_id_name_and_string_arguments() {
    let mock = MockUpstream::start().await;
    mock.enqueue("gpt-5", Behavior::tool_call("exec_command", json!({ "cmd": "echo hi" })));
    let (_, body) = responses("gpt-5").json(&mock).await;
    let item = &body["output"][0];
    assert_eq!(item["type"], "function_call");
    assert_eq!(item["name"], "exec_command");
    assert!(item["call_id"].as_str().unwrap().starts_with("call_"));
    let arguments: Value = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({ "cmd": "echo hi" }));
    assert_eq!(body["status"], "completed");
}

#[tokio::test]
async fn a_custom_tool_call_carries_its_raw_input_in_responses_and_an_input_argument_elsewhere() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Behavior::custom_tool_call("apply_patch", PATCH));
    let (_, body) = responses("m").json(&mock).await;
    let item = &body["output"][0];
    assert_eq!(item["type"], "custom_tool_call");
    assert_eq!(item["name"], "apply_patch");
    assert_eq!(item["input"], PATCH);
    assert!(item["call_id"].as_str().unwrap().starts_with("call_"));

    // Chat has no freeform tools here: a function with one string argument `input`.
    let (_, body) = Call::new(Dialect::OpenAi, "m").json(&mock).await;
    let function = &body["choices"][0]["message"]["tool_calls"][0]["function"];
    let arguments: Value = serde_json::from_str(function["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({ "input": PATCH }));
    let (_, body) = Call::new(Dialect::Anthropic, "m").json(&mock).await;
    assert_eq!(body["content"][0]["input"], json!({ "input": PATCH }));
}

#[tokio::test]
async fn a_responses_stream_sends_every_event_type_in_order_with_sequence_numbers() {
    let mock = MockUpstream::start().await;
    mock.enqueue("gpt-5", Reply::text("one two").chunks(2));
    let response = responses("gpt-5").stream().send(&mock).await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let body = response.bytes().await.unwrap();
    assert_eq!(
        event_names(&body),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    // Transcript checks that names and types agree and numbers count from 0.
    let t = Transcript::read(Dialect::Responses, &body);
    assert_eq!((t.text.as_str(), t.finish.as_deref()), ("one two", Some("completed")));
    let data = event_data(&body);
    assert_eq!(data[0]["response"]["status"], "in_progress");
    assert_eq!(data[0]["response"]["output"], json!([]));
    assert_eq!(data[8]["item"]["content"][0]["text"], "one two");
    let completed = &data[9]["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["output"][0], data[8]["item"], "the final response holds the items");
    assert!(completed["usage"]["output_tokens"].as_u64().unwrap() > 0);
    assert!(String::from_utf8_lossy(&body).ends_with("\n\n"));
}

#[tokio::test]
async fn a_streamed_function_call_arrives_as_an_item_then_argument_deltas_then_the_whole_item() {
    let mock = MockUpstream::start().await;
    let reply =
        Reply::text("Checking.").chunks(3).with_tool_call("exec_command", json!({ "cmd": "ls" }));
    mock.enqueue("gpt-5", reply);
    let body = responses("gpt-5").stream().send(&mock).await.bytes().await.unwrap();
    let names = event_names(&body);
    // After the message's ten events (created, in_progress, added, part, 3 deltas, done x3).
    let tail: Vec<&str> = names.iter().skip(10).map(String::as_str).collect();
    assert_eq!(
        tail,
        [
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let t = Transcript::read(Dialect::Responses, &body);
    assert_eq!(t.text, "Checking.");
    assert_eq!(t.tool_name.as_deref(), Some("exec_command"));
    assert_eq!(serde_json::from_str::<Value>(&t.tool_arguments).unwrap(), json!({ "cmd": "ls" }));
    let data = event_data(&body);
    assert_eq!(data[10]["output_index"], 1, "after the message");
    assert_eq!(data[10]["item"]["arguments"], "");
    assert_eq!(data[13]["name"], "exec_command");
    let done = &data[14]["item"];
    assert_eq!(done["type"], "function_call");
    assert_eq!(data[15]["response"]["output"][1], *done);
}

#[tokio::test]
async fn a_streamed_custom_tool_call_sends_input_deltas_and_the_whole_input() {
    let mock = MockUpstream::start().await;
    mock.enqueue("gpt-5", Behavior::custom_tool_call("apply_patch", PATCH));
    let body = responses("gpt-5").stream().send(&mock).await.bytes().await.unwrap();
    assert_eq!(
        event_names(&body),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.custom_tool_call_input.delta",
            "response.custom_tool_call_input.delta",
            "response.custom_tool_call_input.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let t = Transcript::read(Dialect::Responses, &body);
    assert_eq!(t.tool_arguments, PATCH);
    let data = event_data(&body);
    assert_eq!(data[5]["input"], PATCH);
    assert_eq!(data[6]["item"]["type"], "custom_tool_call");
    assert_eq!(data[6]["item"]["input"], PATCH);
}

#[tokio::test]
async fn a_length_stop_ends_the_stream_with_response_incomplete() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Reply::default().finish(Finish::Length));
    let body = responses("m").stream().send(&mock).await.bytes().await.unwrap();
    assert_eq!(event_names(&body).last().map(String::as_str), Some("response.incomplete"));
    let (_, document) = responses("m").json(&mock).await;
    assert_eq!(document["status"], "incomplete");
    assert_eq!(document["incomplete_details"]["reason"], "max_output_tokens");
}

#[tokio::test]
async fn a_responses_error_has_the_openai_error_shape() {
    let mock = MockUpstream::start().await;
    mock.set_default("m", Behavior::status(503));
    let (status, body) = responses("m").stream().json(&mock).await;
    assert_eq!(status, 503);
    assert_eq!(body["error"]["type"], "server_error");
    assert!(body["error"]["message"].as_str().unwrap().contains("overloaded"));
}

/// The items Codex sends after running the tool the mock called.
fn after_tool(call: Call, output_type: &str, output: Value) -> Call {
    let output_type = output_type.to_owned();
    call.with_body(move |body| {
        body["tools"] = json!([{ "type": "function", "name": "exec_command", "parameters": {} }]);
        let input = body["input"].as_array_mut().unwrap();
        input.push(json!({ "type": "reasoning", "summary": [], "encrypted_content": "opaque" }));
        input.push(json!({ "type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}" }));
        input.push(json!({ "type": output_type, "call_id": "call_1", "output": output }));
    })
}

#[tokio::test]
async fn content_rules_see_responses_tool_outputs_in_both_shapes() {
    let script = Script::from_toml(
        r#"
        "codex" = { rules = [
          { when = { tool_result_contains = "switchyard-tool-ok" }, then = { reply = { text = "The command ran." } } },
          { when = { tool_result_contains = "Success. Updated" }, then = { reply = { text = "Patched." } } },
          { when = { has_tools = true, last_user_contains = "Hi" }, once = true, then = { reply = { text = "", tool_call = { name = "exec_command", arguments = { cmd = "echo switchyard-tool-ok" } } } } },
        ], default = { reply = { text = "Side answer." } } }
        "#,
    )
    .unwrap();
    let mock = MockUpstream::builder().script(script).start().await.unwrap();
    let text = |body: &Value| {
        body["output"][0]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
    };

    let first = responses("codex")
        .with_body(|body| body["tools"] = json!([{ "type": "function", "name": "exec_command" }]))
        .json(&mock)
        .await
        .1;
    assert_eq!(first["output"][0]["type"], "function_call");
    let string_output =
        after_tool(responses("codex"), "function_call_output", json!("switchyard-tool-ok\n"));
    assert_eq!(text(&string_output.json(&mock).await.1), "The command ran.");
    let parts_output = after_tool(
        responses("codex"),
        "custom_tool_call_output",
        json!([{ "type": "input_text", "text": "Success. Updated the following files:\nA hello.txt\n" }]),
    );
    assert_eq!(text(&parts_output.json(&mock).await.1), "Patched.");
    assert_eq!(text(&responses("codex").json(&mock).await.1), "Side answer.");
}

#[tokio::test]
async fn a_rule_can_call_a_custom_tool_from_a_toml_script() {
    let script = Script::from_toml(&format!(
        "\"m\" = {{ rules = [{{ when = {{}}, then = {{ reply = {{ text = \"\", tool_call = {{ name = \"apply_patch\", arguments = {} }} }} }} }}] }}",
        toml_string(PATCH)
    ))
    .unwrap();
    let mock = MockUpstream::builder().script(script).start().await.unwrap();
    let body = responses("m").json(&mock).await.1;
    assert_eq!(body["output"][0]["type"], "custom_tool_call");
    assert_eq!(body["output"][0]["input"], PATCH);
}

fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

#[tokio::test]
async fn rule_replies_keep_the_requested_stream_mode() {
    let mock = MockUpstream::start().await;
    mock.add_rule("m", Rule::new(When::any().stream(true), Behavior::reply("streamed")));
    let body = responses("m").stream().send(&mock).await.bytes().await.unwrap();
    assert_eq!(Transcript::read(Dialect::Responses, &body).text, "streamed");
}
