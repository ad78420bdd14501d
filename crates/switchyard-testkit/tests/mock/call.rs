//! One request to the mock, in the shape a real client of each dialect sends it.

use std::sync::OnceLock;

use reqwest::{Client, RequestBuilder, Response};
use serde_json::{Value, json};
use switchyard_testkit::{BEHAVIOR_HEADER, Behavior, Dialect, MockUpstream};

pub(crate) const OPENAI_KEY: &str = "sk-openai-test";
pub(crate) const ANTHROPIC_KEY: &str = "sk-ant-test";
pub(crate) const GEMINI_KEY: &str = "AIza-test";

#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub(crate) dialect: Dialect,
    model: String,
    stream: bool,
    body: Value,
    headers: Vec<(String, String)>,
}

impl Call {
    pub(crate) fn new(dialect: Dialect, model: &str) -> Self {
        let (body, headers) = match dialect {
            Dialect::OpenAi => (
                json!({ "model": model, "messages": [{ "role": "user", "content": "Hi" }] }),
                vec![("authorization".to_owned(), format!("Bearer {OPENAI_KEY}"))],
            ),
            Dialect::Anthropic => (
                json!({
                    "model": model,
                    "max_tokens": 64,
                    "messages": [{ "role": "user", "content": "Hi" }],
                }),
                vec![
                    ("x-api-key".to_owned(), ANTHROPIC_KEY.to_owned()),
                    ("anthropic-version".to_owned(), "2023-06-01".to_owned()),
                ],
            ),
            Dialect::Gemini => (
                json!({ "contents": [{ "role": "user", "parts": [{ "text": "Hi" }] }] }),
                vec![("x-goog-api-key".to_owned(), GEMINI_KEY.to_owned())],
            ),
            Dialect::Responses => (
                json!({
                    "model": model,
                    "input": [{
                        "type": "message",
                        "role": "user",
                        "content": [{ "type": "input_text", "text": "Hi" }],
                    }],
                }),
                vec![("authorization".to_owned(), format!("Bearer {OPENAI_KEY}"))],
            ),
        };
        Self { dialect, model: model.to_owned(), stream: false, body, headers }
    }

    /// The same request in each dialect.
    pub(crate) fn each(model: &str) -> [Self; 4] {
        [Dialect::OpenAi, Dialect::Anthropic, Dialect::Gemini, Dialect::Responses]
            .map(|d| Self::new(d, model))
    }

    pub(crate) fn stream(mut self) -> Self {
        self.stream = true;
        if self.dialect != Dialect::Gemini {
            self.body["stream"] = true.into();
        }
        self
    }

    pub(crate) fn behavior(self, behavior: &Behavior) -> Self {
        self.header(BEHAVIOR_HEADER, &behavior.header_value())
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Ends the conversation with an assistant turn.
    pub(crate) fn prefill(mut self) -> Self {
        let (key, turn) = match self.dialect {
            Dialect::Gemini => {
                ("contents", json!({ "role": "model", "parts": [{ "text": "Sure," }] }))
            }
            Dialect::OpenAi | Dialect::Anthropic => {
                ("messages", json!({ "role": "assistant", "content": "Sure," }))
            }
            Dialect::Responses => (
                "input",
                json!({
                    "type": "message",
                    "role": "assistant",
                    "content": [{ "type": "output_text", "text": "Sure," }],
                }),
            ),
        };
        self.body[key].as_array_mut().unwrap().push(turn);
        self
    }

    /// The request body, for a test that sends it somewhere else than the dialect's usual path.
    pub(crate) fn body(&self) -> &Value {
        &self.body
    }

    pub(crate) fn with_body(mut self, edit: impl FnOnce(&mut Value)) -> Self {
        edit(&mut self.body);
        self
    }

    pub(crate) fn url(&self, mock: &MockUpstream) -> String {
        match self.dialect {
            Dialect::OpenAi => mock.url("/v1/chat/completions"),
            Dialect::Anthropic => mock.url("/v1/messages"),
            Dialect::Responses => mock.url("/v1/responses"),
            Dialect::Gemini if self.stream => {
                mock.url(&format!("/v1beta/models/{}:streamGenerateContent?alt=sse", self.model))
            }
            Dialect::Gemini => mock.url(&format!("/v1beta/models/{}:generateContent", self.model)),
        }
    }

    /// The request, ready to send (or to adjust first, e.g. with a timeout).
    pub(crate) fn request(&self, mock: &MockUpstream) -> RequestBuilder {
        let mut request = client().post(self.url(mock)).json(&self.body);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        request
    }

    pub(crate) async fn send(&self, mock: &MockUpstream) -> Response {
        self.request(mock).send().await.expect("the mock answers")
    }

    /// Sends and reads the whole body as JSON, with the status.
    pub(crate) async fn json(&self, mock: &MockUpstream) -> (u16, Value) {
        let response = self.send(mock).await;
        let status = response.status().as_u16();
        (status, response.json().await.expect("a JSON body"))
    }
}

/// One client for the whole suite: building one costs tens of milliseconds (TLS roots). It
/// keeps no idle connections, because each test runs its own runtime and a pooled connection
/// would belong to a runtime that is gone; a fresh connection per request also keeps one test's
/// faults from leaking into the next request.
pub(crate) fn client() -> &'static Client {
    static CLIENT: OnceLock<Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        Client::builder().no_proxy().pool_max_idle_per_host(0).build().expect("a plain HTTP client")
    })
}
