//! Content rules over real sockets: a tool round trip the way an agent drives it, with side
//! requests in between that must not disturb it.

use serde_json::{Value, json};
use switchyard_testkit::{Behavior, Dialect, MockUpstream, Rule, Script, When};

use crate::call::Call;

/// The conversation after the client ran the tool the mock called, in each dialect's shape.
fn with_tool_result(call: Call, output: &str) -> Call {
    let anthropic = call.dialect == Dialect::Anthropic;
    let turns = if anthropic {
        [
            json!({ "role": "assistant", "content": [
                { "type": "tool_use", "id": "toolu_1", "name": "Bash", "input": { "command": "echo ok" } },
            ]}),
            json!({ "role": "user", "content": [
                { "type": "tool_result", "tool_use_id": "toolu_1", "content": output },
            ]}),
        ]
    } else {
        [
            json!({ "role": "assistant", "content": null, "tool_calls": [
                { "id": "call_1", "type": "function", "function": { "name": "Bash", "arguments": "{}" } },
            ]}),
            json!({ "role": "tool", "tool_call_id": "call_1", "content": output }),
        ]
    };
    call.with_body(|body| body["messages"].as_array_mut().expect("a chat request").extend(turns))
}

fn offering_tools(call: Call) -> Call {
    call.with_body(|body| body["tools"] = json!([{ "name": "Bash", "input_schema": {} }]))
}

#[tokio::test]
async fn a_tool_round_trip_is_answered_by_content_whatever_comes_in_between() {
    for dialect in [Dialect::Anthropic, Dialect::OpenAi] {
        let mock = MockUpstream::start().await;
        let command = json!({ "command": "echo switchyard-tool-ok" });
        mock.add_rule(
            "agent",
            Rule::new(
                When::any().tool_result_contains("switchyard-tool-ok"),
                Behavior::reply("The tool ran."),
            ),
        );
        mock.add_rule(
            "agent",
            Rule::new(When::any().has_tools(true), Behavior::tool_call("Bash", command.clone()))
                .once(),
        );
        mock.set_default("agent", Behavior::reply("A side answer."));
        let ask = Call::new(dialect, "agent");

        let side = text(dialect, &ask.json(&mock).await.1);
        let main = offering_tools(ask.clone()).json(&mock).await.1;
        let another_side = text(dialect, &ask.json(&mock).await.1);
        let result = with_tool_result(offering_tools(ask.clone()), "switchyard-tool-ok\n");
        let result = text(dialect, &result.json(&mock).await.1);

        assert_eq!((side.as_str(), another_side.as_str()), ("A side answer.", "A side answer."));
        assert_eq!(result, "The tool ran.", "{dialect}");
        assert_eq!(tool_call(dialect, &main), ("Bash".to_owned(), command), "{dialect}");
    }
}

/// The text of a non-streamed answer.
fn text(dialect: Dialect, answer: &Value) -> String {
    let text = if dialect == Dialect::Anthropic {
        &answer["content"][0]["text"]
    } else {
        &answer["choices"][0]["message"]["content"]
    };
    text.as_str().unwrap_or_default().to_owned()
}

/// The name and arguments of the one tool a non-streamed answer calls.
fn tool_call(dialect: Dialect, answer: &Value) -> (String, Value) {
    if dialect == Dialect::Anthropic {
        let block = &answer["content"][0];
        assert_eq!(block["type"], "tool_use");
        (block["name"].as_str().unwrap().to_owned(), block["input"].clone())
    } else {
        let call = &answer["choices"][0]["message"]["tool_calls"][0]["function"];
        let arguments = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
        (call["name"].as_str().unwrap().to_owned(), arguments)
    }
}

#[tokio::test]
async fn a_once_rule_does_not_fire_again_so_the_agent_cannot_loop() {
    let mock = MockUpstream::start().await;
    mock.add_rule("m", Rule::new(When::any(), Behavior::tool_call("Bash", json!({}))).once());
    let call = Call::new(Dialect::Anthropic, "m");
    assert_eq!(call.json(&mock).await.1["stop_reason"], "tool_use");
    assert_eq!(call.json(&mock).await.1["stop_reason"], "end_turn");
}

#[tokio::test]
async fn rules_from_a_toml_script_match_the_last_user_message_and_leave_the_queue_alone() {
    let script = Script::from_toml(
        r#"
        "m" = { rules = [{ when = { last_user_contains = "magic word" }, then = { status = { code = 529 } } }], queue = [{ reply = { text = "queued" } }] }
        "*" = { rules = [{ when = { request_contains = "wildcard" }, then = { reply = { text = "any model" } } }] }
        "#,
    )
    .unwrap();
    let mock = MockUpstream::builder().script(script).start().await.unwrap();
    let asking = |model: &str, text: &str| {
        let text = text.to_owned();
        Call::new(Dialect::Anthropic, model)
            .with_body(move |body| body["messages"][0]["content"] = json!(text))
    };
    assert_eq!(asking("m", "say the magic word").json(&mock).await.0, 529);
    assert_eq!(asking("m", "something else").json(&mock).await.1["content"][0]["text"], "queued");
    assert_eq!(
        asking("other", "a wildcard question").json(&mock).await.1["content"][0]["text"],
        "any model"
    );
    assert_eq!(mock.attempt_count("m"), 2);
    assert!(mock.attempts()[0].behavior == Behavior::status(529));
}
