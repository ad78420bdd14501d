//! A streaming client of each dialect, as the e2e tests of streams' endings and rescues use it:
//! the request it sends, the text it reads, and what a whole answer and a terminal error look
//! like to it.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::harness::{
    Harness, LOCAL_KEY, anthropic_stream_text, openai_stream_text, sse_data, sse_events,
};

/// A client dialect that streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    Chat,
    Anthropic,
    Responses,
}

impl Client {
    /// A streamed request for `model`, `extra` merged into its body.
    pub fn send(self, h: &Harness, model: &str, extra: &Value) -> reqwest::RequestBuilder {
        let (path, mut body) = match self {
            Self::Chat => {
                ("/v1/chat/completions", json!({"messages": [{"role": "user", "content": "hi"}]}))
            }
            Self::Anthropic => (
                "/v1/messages",
                json!({"max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}),
            ),
            Self::Responses => ("/v1/responses", json!({"input": "hi"})),
        };
        body["model"] = model.into();
        body["stream"] = true.into();
        for (key, value) in extra.as_object().into_iter().flatten() {
            body[key] = value.clone();
        }
        let request = h.http.post(h.url(path)).json(&body);
        match self {
            Self::Anthropic => request.header("x-api-key", LOCAL_KEY),
            _ => request.bearer_auth(LOCAL_KEY),
        }
    }

    /// `extra` for [`Self::send`] that makes the request a conversation of its own, whose first
    /// (and only) user message says `said`: the same messages again are the same session, and a
    /// retry of a session that just broke goes elsewhere (RESILIENCE.md §11).
    pub fn conversation(self, said: &str) -> Value {
        match self {
            Self::Chat | Self::Anthropic => {
                json!({"messages": [{"role": "user", "content": said}]})
            }
            Self::Responses => json!({"input": said}),
        }
    }

    /// [`Self::conversation`] numbered across the test binary: a new conversation each call,
    /// for tests of one target's faults that must start on that target every time.
    pub fn fresh_conversation(self) -> Value {
        static CONVERSATIONS: AtomicUsize = AtomicUsize::new(0);
        let n = CONVERSATIONS.fetch_add(1, Ordering::Relaxed);
        self.conversation(&format!("conversation {n}"))
    }

    /// The answer's text, as the client reads it.
    pub fn text(self, body: &str) -> String {
        match self {
            Self::Chat => openai_stream_text(body),
            Self::Anthropic => anthropic_stream_text(body),
            Self::Responses => sse_data(body)
                .iter()
                .filter(|e| e["type"] == "response.output_text.delta")
                .filter_map(|e| e["delta"].as_str().map(str::to_owned))
                .collect(),
        }
    }

    /// The stream ended properly, as one message, with no error in it.
    pub fn assert_whole(self, body: &str) {
        let data = sse_data(body);
        match self {
            Self::Chat => {
                assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
                assert!(data.iter().all(|c| c.get("error").is_none()), "{body}");
                let ids: Vec<&Value> = data.iter().map(|c| &c["id"]).collect();
                assert!(ids.windows(2).all(|w| w[0] == w[1]), "one chunk id: {body}");
            }
            Self::Anthropic => {
                let events = sse_events(body);
                assert_eq!(events.last(), Some(&"message_stop"), "{body}");
                assert!(!events.contains(&"error"), "{body}");
                assert_eq!(events.iter().filter(|e| **e == "message_start").count(), 1, "{body}");
            }
            Self::Responses => {
                assert_eq!(data.last().unwrap()["type"], "response.completed", "{body}");
                assert!(
                    data.iter().all(|e| e["type"] != "error" && e["type"] != "response.failed"),
                    "{body}"
                );
                let created = data.iter().filter(|e| e["type"] == "response.created").count();
                assert_eq!(created, 1, "{body}");
                let items: Vec<&Value> = data
                    .iter()
                    .filter(|e| e["type"] == "response.output_text.delta")
                    .map(|e| &e["item_id"])
                    .collect();
                assert!(items.windows(2).all(|w| w[0] == w[1]), "one message item: {body}");
                let numbers: Vec<u64> =
                    data.iter().filter_map(|e| e["sequence_number"].as_u64()).collect();
                assert!(numbers.windows(2).all(|w| w[0] < w[1]), "one sequence: {body}");
            }
        }
    }

    /// The stream ended with its dialect's terminal error and nothing that says complete:
    /// no end marker, no finish reason.
    pub fn assert_terminal_error(self, body: &str) {
        let data = sse_data(body);
        match self {
            Self::Chat => {
                assert!(!body.contains("[DONE]"), "{body}");
                assert!(data.last().unwrap()["error"]["message"].is_string(), "{body}");
                assert!(
                    data.iter().all(|c| c["choices"][0]["finish_reason"].is_null()),
                    "no chunk may claim the answer finished: {body}"
                );
            }
            Self::Anthropic => {
                assert!(!body.contains("message_stop"), "{body}");
                assert_eq!(sse_events(body).last(), Some(&"error"), "{body}");
            }
            Self::Responses => {
                assert!(!body.contains("response.completed"), "{body}");
                let last = &data.last().unwrap()["type"];
                assert!(last == "error" || last == "response.failed", "{body}");
            }
        }
    }
}
