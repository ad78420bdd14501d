//! Content rules: answer by what a request says, not by when it arrives.
//!
//! Real clients send side requests (titles, summaries, quota checks) whose number and order
//! change from one version to the next, so a per-model queue cannot say which answer reaches
//! the conversation's main turn. A [`Rule`] looks at the request instead: its last user
//! message, the tool results it sends back, any text in it, whether it offers tools. In TOML:
//!
//! ```toml
//! "claude-main" = { rules = [
//!     # The client ran the tool and sends its output back: finish with text.
//!     { when = { tool_result_contains = "switchyard-tool-ok" }, then = { reply = { text = "Done." } } },
//!     # The main turn (it offers tools): call one, once.
//!     { when = { has_tools = true, last_user_contains = "run it" }, once = true,
//!       then = { reply = { text = "", tool_call = { name = "Bash", arguments = { command = "echo switchyard-tool-ok" } } } } },
//! ], default = { reply = { text = "A side answer." } } }
//! ```
//!
//! Invariants: every condition set in a [`When`] must hold (an empty `when` matches every
//! request); matching reads the request only, never the clock or the attempt count, so the
//! same request always gets the same answer from the same rules.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::behavior::Behavior;
use crate::dialect::Wire;

/// When a request matches, `then` answers it instead of the model's queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default)]
    pub when: When,
    pub then: Behavior,
    /// Fire at most once, then disappear: a tool call that must not be repeated when the
    /// client comes back with the result.
    #[serde(default)]
    pub once: bool,
}

impl Rule {
    /// A rule that fires on every matching request.
    pub fn new(when: When, then: impl Into<Behavior>) -> Self {
        Self { when, then: then.into(), once: false }
    }

    /// Fires at most once.
    #[must_use]
    pub fn once(mut self) -> Self {
        self.once = true;
        self
    }
}

/// What a request must contain for a [`Rule`] to fire; every field set must hold. Text
/// matches are case-sensitive substring matches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct When {
    /// The last user message's text (string content or its text parts; tool results not
    /// included; for Responses, a string `input` or the last `user` item's `input_text` parts).
    pub last_user_contains: Option<String>,
    /// One of the tool results in the conversation's last turn (Anthropic `tool_result` blocks
    /// of the last user message, OpenAI `tool` messages at the end, Gemini `functionResponse`s
    /// of the last content as JSON, Responses `function_call_output` and
    /// `custom_tool_call_output` items after the last message).
    pub tool_result_contains: Option<String>,
    /// Any string anywhere in the request body: system prompt, messages, tool definitions,
    /// metadata. Searched in the parsed JSON, so no escaping is needed.
    pub request_contains: Option<String>,
    /// Whether the request offers tools (a non-empty `tools`): a coding agent's main turn does,
    /// its title and summary requests usually do not.
    pub has_tools: Option<bool>,
    /// Whether the request asked for a stream.
    pub stream: Option<bool>,
}

impl When {
    /// Matches every request; narrow it with the builder methods.
    pub fn any() -> Self {
        Self::default()
    }

    #[must_use]
    pub fn last_user_contains(mut self, text: impl Into<String>) -> Self {
        self.last_user_contains = Some(text.into());
        self
    }

    #[must_use]
    pub fn tool_result_contains(mut self, text: impl Into<String>) -> Self {
        self.tool_result_contains = Some(text.into());
        self
    }

    #[must_use]
    pub fn request_contains(mut self, text: impl Into<String>) -> Self {
        self.request_contains = Some(text.into());
        self
    }

    #[must_use]
    pub fn has_tools(mut self, has_tools: bool) -> Self {
        self.has_tools = Some(has_tools);
        self
    }

    #[must_use]
    pub fn stream(mut self, stream: bool) -> Self {
        self.stream = Some(stream);
        self
    }

    pub(crate) fn matches(&self, request: &Subject<'_>) -> bool {
        let body = request.body;
        self.stream.is_none_or(|stream| stream == request.stream)
            && self.has_tools.is_none_or(|wanted| {
                let offered =
                    body.get("tools").and_then(Value::as_array).is_some_and(|t| !t.is_empty());
                wanted == offered
            })
            && self
                .last_user_contains
                .as_deref()
                .is_none_or(|needle| request.wire.last_user_text(body).contains(needle))
            && self.tool_result_contains.as_deref().is_none_or(|needle| {
                request.wire.last_tool_results(body).iter().any(|result| result.contains(needle))
            })
            && self
                .request_contains
                .as_deref()
                .is_none_or(|needle| any_string_contains(body, needle))
    }
}

/// The request a rule is matched against: its body read through its dialect.
#[derive(Clone, Copy)]
pub(crate) struct Subject<'a> {
    pub(crate) wire: &'a dyn Wire,
    pub(crate) body: &'a Value,
    pub(crate) stream: bool,
}

impl std::fmt::Debug for Subject<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subject").field("body", self.body).field("stream", &self.stream).finish()
    }
}

fn any_string_contains(value: &Value, needle: &str) -> bool {
    match value {
        Value::String(text) => text.contains(needle),
        Value::Array(items) => items.iter().any(|item| any_string_contains(item, needle)),
        Value::Object(fields) => fields.values().any(|field| any_string_contains(field, needle)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::dialect::Dialect;

    fn subject(dialect: Dialect, body: &Value) -> Subject<'_> {
        Subject { wire: dialect.wire(), body, stream: false }
    }

    #[test]
    fn an_empty_condition_matches_every_request() {
        assert!(When::any().matches(&subject(Dialect::OpenAi, &json!({}))));
    }

    #[test]
    fn every_condition_set_must_hold() {
        let body = json!({
            "messages": [{ "role": "user", "content": [{ "type": "text", "text": "please run it" }] }],
            "tools": [{ "name": "Bash" }],
        });
        let request = subject(Dialect::Anthropic, &body);
        assert!(When::any().last_user_contains("run it").has_tools(true).matches(&request));
        assert!(!When::any().last_user_contains("run it").has_tools(false).matches(&request));
        assert!(!When::any().last_user_contains("run it").stream(true).matches(&request));
    }

    #[test]
    fn only_the_last_user_message_counts_for_last_user_contains() {
        let body = json!({ "messages": [
            { "role": "user", "content": "first question" },
            { "role": "assistant", "content": "an answer" },
            { "role": "user", "content": "second question" },
            { "role": "system", "content": "a mid-conversation system message" },
        ]});
        let request = subject(Dialect::Anthropic, &body);
        assert!(When::any().last_user_contains("second").matches(&request));
        assert!(!When::any().last_user_contains("first").matches(&request));
        assert!(When::any().request_contains("first").matches(&request));
    }

    #[test]
    fn anthropic_tool_results_count_only_in_the_last_turn() {
        let result = |text: &str| {
            json!({ "role": "user", "content": [
                { "type": "tool_result", "tool_use_id": "t", "content": [{ "type": "text", "text": text }] },
            ]})
        };
        let call = json!({ "role": "assistant", "content": [{ "type": "tool_use", "id": "t", "name": "Bash", "input": {} }] });
        let fresh = json!({ "messages": [call, result("tool-ok")] });
        let system = json!({ "role": "system", "content": "a mid-conversation system message" });
        let fresh_then_system = json!({ "messages": [call, result("tool-ok"), system] });
        let old = json!({ "messages": [call, result("tool-ok"), { "role": "assistant", "content": "done" }, { "role": "user", "content": "more" }] });
        let when = When::any().tool_result_contains("tool-ok");
        assert!(when.matches(&subject(Dialect::Anthropic, &fresh)));
        assert!(when.matches(&subject(Dialect::Anthropic, &fresh_then_system)));
        assert!(!when.matches(&subject(Dialect::Anthropic, &old)));
    }

    #[test]
    fn openai_and_gemini_tool_results_are_read_in_their_own_shapes() {
        let openai = json!({ "messages": [
            { "role": "user", "content": "go" },
            { "role": "assistant", "tool_calls": [] },
            { "role": "tool", "tool_call_id": "c", "content": "tool-ok" },
        ]});
        let gemini = json!({ "contents": [
            { "role": "user", "parts": [{ "text": "go" }] },
            { "role": "user", "parts": [{ "functionResponse": { "name": "f", "response": { "out": "tool-ok" } } }] },
        ]});
        let when = When::any().tool_result_contains("tool-ok");
        assert!(when.matches(&subject(Dialect::OpenAi, &openai)));
        assert!(when.matches(&subject(Dialect::Gemini, &gemini)));
        assert!(!when.matches(&subject(
            Dialect::OpenAi,
            &json!({ "messages": [{ "role": "user", "content": "tool-ok" }] })
        )));
    }

    #[test]
    fn responses_tool_outputs_count_only_after_the_last_message() {
        let call = json!({ "type": "function_call", "call_id": "c", "name": "exec_command", "arguments": "{}" });
        let output = json!({ "type": "function_call_output", "call_id": "c", "output": "tool-ok" });
        let custom = json!({ "type": "custom_tool_call_output", "call_id": "p", "output": [{ "type": "input_text", "text": "patch-ok" }] });
        let user = json!({ "type": "message", "role": "user", "content": [{ "type": "input_text", "text": "go" }] });
        let answer = json!({ "type": "message", "role": "assistant", "content": [{ "type": "output_text", "text": "done" }] });
        let reasoning = json!({ "type": "reasoning", "summary": [] });
        let fresh = json!({ "input": [user, reasoning, call, output, custom] });
        let old = json!({ "input": [user, call, output, answer, user] });
        for (needle, body, wanted) in
            [("tool-ok", &fresh, true), ("patch-ok", &fresh, true), ("tool-ok", &old, false)]
        {
            let when = When::any().tool_result_contains(needle);
            assert_eq!(
                when.matches(&subject(Dialect::Responses, body)),
                wanted,
                "{needle}: {body}"
            );
        }
    }

    #[test]
    fn responses_last_user_text_reads_input_text_parts_or_a_string_input() {
        let items = json!({ "input": [
            { "type": "message", "role": "developer", "content": [{ "type": "input_text", "text": "be brief" }] },
            { "type": "message", "role": "user", "content": [{ "type": "input_text", "text": "<environment_context/>" }] },
            { "type": "message", "role": "user", "content": [{ "type": "input_text", "text": "Say hello." }] },
            { "type": "function_call", "call_id": "c", "name": "f", "arguments": "{}" },
        ]});
        let when = When::any().last_user_contains("Say hello.");
        assert!(when.matches(&subject(Dialect::Responses, &items)));
        assert!(
            !When::any()
                .last_user_contains("be brief")
                .matches(&subject(Dialect::Responses, &items))
        );
        assert!(when.matches(&subject(Dialect::Responses, &json!({ "input": "Say hello." }))));
    }

    #[test]
    fn request_contains_searches_strings_not_escaped_json() {
        let body = json!({ "system": [{ "type": "text", "text": "say \"quoted\" things" }] });
        assert!(
            When::any().request_contains("\"quoted\"").matches(&subject(Dialect::Anthropic, &body))
        );
    }
}
