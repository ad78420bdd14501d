//! Reading the mock's streams back: SSE framing, then what each dialect's events say.

use serde_json::Value;
use switchyard_testkit::Dialect;

/// One SSE block: a comment, or an event with optional name and its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    Comment(String),
    Event { name: Option<String>, data: String },
}

/// Splits a body into SSE blocks, accepting LF and CRLF line ends.
pub(crate) fn frames(body: &[u8]) -> Vec<Frame> {
    let text = String::from_utf8_lossy(body).replace("\r\n", "\n");
    text.split("\n\n")
        .filter(|block| !block.is_empty())
        .map(|block| {
            if let Some(comment) = block.strip_prefix(':') {
                return Frame::Comment(comment.trim().to_owned());
            }
            let mut name = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event:") {
                    name = Some(value.trim().to_owned());
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push_str(value.trim_start());
                }
            }
            Frame::Event { name, data }
        })
        .collect()
}

/// Event names (Anthropic) or the `type` of the data, in order, skipping comments.
pub(crate) fn event_names(body: &[u8]) -> Vec<String> {
    frames(body)
        .into_iter()
        .filter_map(|frame| match frame {
            Frame::Event { name: Some(name), .. } => Some(name),
            Frame::Event { name: None, .. } | Frame::Comment(_) => None,
        })
        .collect()
}

/// What a stream said, decoded per dialect.
#[derive(Debug, Default)]
pub(crate) struct Transcript {
    pub(crate) text: String,
    pub(crate) tool_name: Option<String>,
    pub(crate) tool_arguments: String,
    pub(crate) finish: Option<String>,
    /// The terminator arrived (`[DONE]`, `message_stop`).
    pub(crate) done: bool,
    pub(crate) usage_chunks: usize,
    /// Events whose data is not JSON.
    pub(crate) malformed: usize,
    /// SSE comments and Anthropic pings.
    pub(crate) keep_alives: usize,
    /// Every event except comments.
    pub(crate) events: usize,
    /// The next Responses `sequence_number` expected.
    sequence: u64,
}

impl Transcript {
    pub(crate) fn read(dialect: Dialect, body: &[u8]) -> Self {
        let mut t = Self::default();
        for frame in frames(body) {
            let (name, data) = match frame {
                Frame::Comment(_) => {
                    t.keep_alives += 1;
                    continue;
                }
                Frame::Event { name, data } => (name, data),
            };
            t.events += 1;
            if data == "[DONE]" {
                t.done = true;
                continue;
            }
            let Ok(json) = serde_json::from_str::<Value>(&data) else {
                t.malformed += 1;
                continue;
            };
            match dialect {
                Dialect::OpenAi => t.openai(&json),
                Dialect::Anthropic => t.anthropic(name.as_deref(), &json),
                Dialect::Gemini => t.gemini(&json),
                Dialect::Responses => t.responses(name.as_deref(), &json),
            }
        }
        t
    }

    fn openai(&mut self, json: &Value) {
        if json["choices"].as_array().is_some_and(Vec::is_empty) && json.get("usage").is_some() {
            self.usage_chunks += 1;
            return;
        }
        let choice = &json["choices"][0];
        if let Some(text) = choice["delta"]["content"].as_str() {
            self.text.push_str(text);
        }
        let call = &choice["delta"]["tool_calls"][0]["function"];
        if let Some(name) = call["name"].as_str() {
            self.tool_name = Some(name.to_owned());
        }
        if let Some(arguments) = call["arguments"].as_str() {
            self.tool_arguments.push_str(arguments);
        }
        if let Some(finish) = choice["finish_reason"].as_str() {
            self.finish = Some(finish.to_owned());
        }
    }

    fn anthropic(&mut self, name: Option<&str>, json: &Value) {
        assert_eq!(name, json["type"].as_str(), "event name and data type agree");
        match name {
            Some("ping") => self.keep_alives += 1,
            Some("content_block_start") => {
                if let Some(tool) = json["content_block"]["name"].as_str() {
                    self.tool_name = Some(tool.to_owned());
                }
            }
            Some("content_block_delta") => {
                let delta = &json["delta"];
                if let Some(text) = delta["text"].as_str() {
                    self.text.push_str(text);
                }
                if let Some(partial) = delta["partial_json"].as_str() {
                    self.tool_arguments.push_str(partial);
                }
            }
            Some("message_delta") => {
                self.finish = json["delta"]["stop_reason"].as_str().map(str::to_owned);
                self.usage_chunks += 1;
            }
            Some("message_stop") => self.done = true,
            _ => {}
        }
    }

    /// Responses has no terminator (`done` stays false); the final event's status, or the
    /// reason it is incomplete, is the finish.
    fn responses(&mut self, name: Option<&str>, json: &Value) {
        assert_eq!(name, json["type"].as_str(), "event name and data type agree");
        assert_eq!(
            json["sequence_number"].as_u64(),
            Some(self.sequence),
            "sequence numbers count every event from 0"
        );
        self.sequence += 1;
        match name {
            Some("response.output_text.delta") => {
                self.text.push_str(json["delta"].as_str().unwrap_or_default());
            }
            Some("response.output_item.added") => {
                if let Some(tool) = json["item"]["name"].as_str() {
                    self.tool_name = Some(tool.to_owned());
                }
            }
            Some(
                "response.function_call_arguments.delta" | "response.custom_tool_call_input.delta",
            ) => {
                self.tool_arguments.push_str(json["delta"].as_str().unwrap_or_default());
            }
            Some("response.completed") => {
                self.finish = Some("completed".to_owned());
                self.usage_chunks += 1;
            }
            Some("response.incomplete") => {
                self.finish =
                    json["response"]["incomplete_details"]["reason"].as_str().map(str::to_owned);
                self.usage_chunks += 1;
            }
            _ => {}
        }
    }

    fn gemini(&mut self, json: &Value) {
        let candidate = &json["candidates"][0];
        for part in candidate["content"]["parts"].as_array().into_iter().flatten() {
            if let Some(text) = part["text"].as_str() {
                self.text.push_str(text);
            }
            if let Some(call) = part.get("functionCall") {
                self.tool_name = call["name"].as_str().map(str::to_owned);
                self.tool_arguments = call["args"].to_string();
            }
        }
        if let Some(finish) = candidate["finishReason"].as_str() {
            self.finish = Some(finish.to_owned());
        }
        if json.get("usageMetadata").is_some() {
            self.usage_chunks += 1;
        }
    }
}
