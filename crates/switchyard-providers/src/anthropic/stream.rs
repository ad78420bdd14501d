//! Anthropic streams: Messages events decoded from upstreams and encoded for clients.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::error::{ErrorOut, error_report};
use super::response::{UsageOut, UsageWire, message_id};
use super::{stop_reason, stop_reason_str};
use crate::chat::{StopReason, StreamEvent, Usage};
use crate::dialect::{Dialect, ResponseMeta};
use crate::error::{ErrorKind, ProviderError};
use crate::json::{self, Str};
use crate::sse::{SseEvent, write_json_event};
use crate::stream::{Progress, StreamStatus};

#[derive(Deserialize)]
struct EventWire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    message: Option<MessageStartWire<'a>>,
    #[serde(default)]
    index: Option<usize>,
    #[serde(borrow, default)]
    content_block: Option<BlockStartWire<'a>>,
    #[serde(borrow, default)]
    delta: Option<DeltaWire<'a>>,
    #[serde(default)]
    usage: Option<UsageWire>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct MessageStartWire<'a> {
    #[serde(borrow, default)]
    id: Option<Str<'a>>,
    #[serde(borrow, default)]
    model: Option<Str<'a>>,
    #[serde(default)]
    usage: Option<UsageWire>,
}

#[derive(Deserialize)]
struct BlockStartWire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    text: Option<Str<'a>>,
    #[serde(borrow, default)]
    id: Option<Str<'a>>,
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    thinking: Option<Str<'a>>,
    #[serde(borrow, default)]
    data: Option<Str<'a>>,
}

/// A `content_block_delta`'s or a `message_delta`'s `delta`; which fields are set depends on
/// the event.
#[derive(Deserialize)]
struct DeltaWire<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Str<'a>>,
    #[serde(borrow, default)]
    text: Option<Str<'a>>,
    #[serde(borrow, default)]
    partial_json: Option<Str<'a>>,
    #[serde(borrow, default)]
    thinking: Option<Str<'a>>,
    #[serde(borrow, default)]
    signature: Option<Str<'a>>,
    #[serde(borrow, default)]
    stop_reason: Option<Str<'a>>,
    #[serde(borrow, default)]
    stop_sequence: Option<Str<'a>>,
}

/// What an upstream content block turned into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Block {
    Text,
    Thinking,
    /// The n-th tool call of the answer.
    Tool(u32),
    /// Server tool calls, their results and future block types: not forwarded.
    Ignored,
}

/// How far ahead of the blocks seen so far a new block's index may jump.
const MAX_INDEX_GAP: usize = 16;

/// Decodes one upstream Messages stream.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    blocks: Vec<Block>,
    tools: u32,
    usage: UsageWire,
    status: StreamStatus,
}

impl StreamDecoder {
    /// `message_stop` ends the stream; `ping` and unknown event types emit nothing; `error`
    /// is the upstream giving up (`overloaded_error` mid-stream).
    pub fn decode<'e>(
        &mut self,
        event: &SseEvent<'e>,
        emit: &mut impl FnMut(StreamEvent<'e>),
    ) -> Result<Progress, ProviderError> {
        let wire: EventWire<'e> = json::parse(event.data.as_bytes()).map_err(|e| {
            ProviderError::MalformedEvent { dialect: Dialect::Anthropic, message: e.describe() }
        })?;
        let malformed = |message: &str| ProviderError::MalformedEvent {
            dialect: Dialect::Anthropic,
            message: format!("`{}` event: {message}", wire.kind.0),
        };
        match wire.kind.0.as_ref() {
            "message_start" => {
                let message = wire.message.ok_or_else(|| malformed("no `message`"))?;
                emit(StreamEvent::Start {
                    id: message.id.map(Str::into_cow).unwrap_or_default(),
                    model: message.model.map(Str::into_cow).unwrap_or_default(),
                });
                if let Some(usage) = message.usage {
                    self.usage.update(&usage);
                    emit(StreamEvent::Usage(self.usage.usage()));
                }
            }
            "content_block_start" => {
                let index = wire.index.ok_or_else(|| malformed("no `index`"))?;
                // Blocks are numbered in order; a wild index must not size a vector.
                if index > self.blocks.len() + MAX_INDEX_GAP {
                    return Err(malformed("block index out of order"));
                }
                let block = wire.content_block.ok_or_else(|| malformed("no `content_block`"))?;
                self.block_start(index, block, emit);
            }
            "content_block_delta" => {
                let index = wire.index.ok_or_else(|| malformed("no `index`"))?;
                let delta = wire.delta.ok_or_else(|| malformed("no `delta`"))?;
                self.block_delta(index, delta, emit);
            }
            "message_delta" => {
                if let Some(reason) = wire.delta.as_ref().and_then(|d| d.stop_reason.as_ref()) {
                    self.status.finish_seen = true;
                    emit(StreamEvent::Finish {
                        reason: stop_reason(&reason.0),
                        stop_sequence: wire.delta.and_then(|d| d.stop_sequence).map(Str::into_cow),
                    });
                }
                if let Some(usage) = wire.usage {
                    self.usage.update(&usage);
                    emit(StreamEvent::Usage(self.usage.usage()));
                }
            }
            "message_stop" => {
                self.status.end_seen = true;
                return Ok(Progress::End);
            }
            "error" => {
                let error = wire.error.map_or("{}", RawValue::get);
                return Err(ProviderError::UpstreamStream {
                    dialect: Dialect::Anthropic,
                    error: error_report(
                        format!("{{\"type\":\"error\",\"error\":{error}}}").as_bytes(),
                    ),
                });
            }
            _ => {}
        }
        Ok(Progress::Continue)
    }

    fn block_start<'e>(
        &mut self,
        index: usize,
        block: BlockStartWire<'e>,
        emit: &mut impl FnMut(StreamEvent<'e>),
    ) {
        let kind = match block.kind.0.as_ref() {
            "text" => {
                if let Some(text) = block.text.filter(|t| !t.0.is_empty()) {
                    emit(StreamEvent::TextDelta(text.into_cow()));
                }
                Block::Text
            }
            "thinking" => {
                if let Some(text) = block.thinking.filter(|t| !t.0.is_empty()) {
                    emit(StreamEvent::ThinkingDelta(text.into_cow()));
                }
                Block::Thinking
            }
            "redacted_thinking" => {
                if let Some(data) = block.data {
                    emit(StreamEvent::RedactedThinking(data.into_cow()));
                }
                Block::Ignored
            }
            "tool_use" => {
                let index = self.tools;
                self.tools += 1;
                emit(StreamEvent::ToolCallStart {
                    index,
                    id: block.id.map(Str::into_cow).unwrap_or_default(),
                    name: block.name.map(Str::into_cow).unwrap_or_default(),
                });
                // The start carries `{}`; the arguments follow as deltas. Anything
                // else there is a whole input sent up front.
                if let Some(input) = block.input.filter(|i| i.get() != "{}") {
                    emit(StreamEvent::ToolCallDelta {
                        index,
                        arguments: Cow::Borrowed(input.get()),
                    });
                }
                Block::Tool(index)
            }
            _ => Block::Ignored,
        };
        if self.blocks.len() <= index {
            self.blocks.resize(index + 1, Block::Ignored);
        }
        self.blocks[index] = kind;
    }

    fn block_delta<'e>(
        &mut self,
        index: usize,
        delta: DeltaWire<'e>,
        emit: &mut impl FnMut(StreamEvent<'e>),
    ) {
        let block = self.blocks.get(index).copied().unwrap_or(Block::Ignored);
        match (block, delta.kind.as_ref().map(|k| k.0.as_ref())) {
            (Block::Text, Some("text_delta")) => {
                if let Some(text) = delta.text {
                    emit(StreamEvent::TextDelta(text.into_cow()));
                }
            }
            (Block::Thinking, Some("thinking_delta")) => {
                if let Some(text) = delta.thinking {
                    emit(StreamEvent::ThinkingDelta(text.into_cow()));
                }
            }
            (Block::Thinking, Some("signature_delta")) => {
                if let Some(signature) = delta.signature {
                    emit(StreamEvent::ThinkingSignature(signature.into_cow()));
                }
            }
            (Block::Tool(index), Some("input_json_delta")) => {
                if let Some(json) = delta.partial_json.filter(|j| !j.0.is_empty()) {
                    emit(StreamEvent::ToolCallDelta { index, arguments: json.into_cow() });
                }
            }
            _ => {}
        }
    }

    pub fn status(&self) -> StreamStatus {
        self.status
    }
}

#[derive(Serialize)]
struct MessageStartOut<'r> {
    #[serde(rename = "type")]
    kind: &'static str,
    message: MessageOut<'r>,
}

#[derive(Serialize)]
struct MessageOut<'r> {
    id: &'r str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    model: &'r str,
    content: [(); 0],
    stop_reason: Option<()>,
    stop_sequence: Option<()>,
    usage: UsageOut,
}

#[derive(Serialize)]
struct BlockStartOut<'r> {
    #[serde(rename = "type")]
    kind: &'static str,
    index: u32,
    content_block: BlockOut<'r>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockOut<'r> {
    Text { text: &'static str },
    Thinking { thinking: &'static str, signature: &'static str },
    RedactedThinking { data: &'r str },
    ToolUse { id: &'r str, name: &'r str, input: Empty },
}

/// `{}`.
#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct BlockDeltaOut<'r> {
    #[serde(rename = "type")]
    kind: &'static str,
    index: u32,
    delta: DeltaOut<'r>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[expect(clippy::enum_variant_names, reason = "Anthropic's delta type names")]
enum DeltaOut<'r> {
    TextDelta { text: &'r str },
    ThinkingDelta { thinking: &'r str },
    SignatureDelta { signature: &'r str },
    InputJsonDelta { partial_json: &'r str },
}

#[derive(Serialize)]
struct BlockStopOut {
    #[serde(rename = "type")]
    kind: &'static str,
    index: u32,
}

#[derive(Serialize)]
struct MessageDeltaOut<'r> {
    #[serde(rename = "type")]
    kind: &'static str,
    delta: StopOut<'r>,
    usage: UsageOut,
}

#[derive(Serialize)]
struct StopOut<'r> {
    stop_reason: &'static str,
    stop_sequence: Option<&'r str>,
}

#[derive(Serialize)]
struct TypeOnly {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct ErrorEventOut<'r> {
    #[serde(rename = "type")]
    kind: &'static str,
    error: ErrorOut<'r>,
}

/// The block the client currently has open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
    Tool,
}

/// Encodes canonical events as a Messages stream for a client.
///
/// `message_start` is held until the first content so it can carry the input token count
/// (Anthropic upstreams send usage right after the start; older SDKs read input tokens from
/// `message_start` only). Usage and stop reason are held for the closing `message_delta`,
/// because OpenAI upstreams send usage after the finish reason.
#[derive(Debug)]
pub struct StreamEncoder {
    id: String,
    model: String,
    start_written: bool,
    next_block: u32,
    open: Option<(Open, u32)>,
    /// Client block index of each canonical tool call.
    tool_blocks: Vec<u32>,
    usage: Usage,
    stop: Option<(StopReason, Option<String>)>,
    ended: bool,
}

impl StreamEncoder {
    pub fn new(meta: &ResponseMeta<'_>) -> Self {
        Self {
            id: message_id("", meta).into_owned(),
            model: meta.model.to_owned(),
            start_written: false,
            next_block: 0,
            open: None,
            tool_blocks: Vec::new(),
            usage: Usage::default(),
            stop: None,
            ended: false,
        }
    }

    pub fn encode(&mut self, event: &StreamEvent<'_>, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        match event {
            StreamEvent::Start { id, .. } => {
                if !self.start_written && !id.is_empty() {
                    (**id).clone_into(&mut self.id);
                }
            }
            StreamEvent::Usage(usage) => self.usage = *usage,
            StreamEvent::TextDelta(text) => {
                self.block_delta(Open::Text, DeltaOut::TextDelta { text }, out);
            }
            StreamEvent::ThinkingDelta(thinking) => {
                self.block_delta(Open::Thinking, DeltaOut::ThinkingDelta { thinking }, out);
            }
            StreamEvent::ThinkingSignature(signature) => {
                self.block_delta(Open::Thinking, DeltaOut::SignatureDelta { signature }, out);
            }
            StreamEvent::RedactedThinking(data) => {
                let index = self.start_block(None, BlockOut::RedactedThinking { data }, out);
                Self::stop_block(index, out);
            }
            StreamEvent::ToolCallStart { index: tool, id, name } => {
                let index = self.start_block(
                    Some(Open::Tool),
                    BlockOut::ToolUse { id, name, input: Empty {} },
                    out,
                );
                let tool = usize::try_from(*tool).unwrap_or(usize::MAX);
                if self.tool_blocks.len() <= tool {
                    self.tool_blocks.resize(tool + 1, u32::MAX);
                }
                self.tool_blocks[tool] = index;
            }
            StreamEvent::ToolCallDelta { index: tool, arguments } => {
                // Deltas of a call whose block was already closed still name its index:
                // SDKs accumulate by index.
                let block = usize::try_from(*tool).ok().and_then(|t| self.tool_blocks.get(t));
                if let Some(&index) = block.filter(|&&i| i != u32::MAX) {
                    self.write_start(out);
                    write_json_event(
                        out,
                        Some("content_block_delta"),
                        &BlockDeltaOut {
                            kind: "content_block_delta",
                            index,
                            delta: DeltaOut::InputJsonDelta { partial_json: arguments },
                        },
                    );
                }
            }
            StreamEvent::Finish { reason, stop_sequence } => {
                self.close_open(out);
                self.stop = Some((*reason, stop_sequence.as_deref().map(str::to_owned)));
            }
        }
    }

    fn write_start(&mut self, out: &mut Vec<u8>) {
        if self.start_written {
            return;
        }
        self.start_written = true;
        let start = MessageStartOut {
            kind: "message_start",
            message: MessageOut {
                id: &self.id,
                kind: "message",
                role: "assistant",
                model: &self.model,
                content: [],
                stop_reason: None,
                stop_sequence: None,
                usage: UsageOut::new(&Usage { output: 0, ..self.usage }),
            },
        };
        write_json_event(out, Some("message_start"), &start);
    }

    /// A `content_block_delta` into the open block of `kind`, started if needed.
    fn block_delta(&mut self, kind: Open, delta: DeltaOut<'_>, out: &mut Vec<u8>) {
        let index = self.ensure_open(kind, out);
        write_json_event(
            out,
            Some("content_block_delta"),
            &BlockDeltaOut { kind: "content_block_delta", index, delta },
        );
    }

    /// The open text or thinking block, started if needed. (Tool blocks start only on a
    /// tool call's start.)
    fn ensure_open(&mut self, kind: Open, out: &mut Vec<u8>) -> u32 {
        match self.open {
            Some((open, index)) if open == kind => index,
            _ => {
                let block = if kind == Open::Text {
                    BlockOut::Text { text: "" }
                } else {
                    BlockOut::Thinking { thinking: "", signature: "" }
                };
                self.start_block(Some(kind), block, out)
            }
        }
    }

    fn start_block(&mut self, open: Option<Open>, block: BlockOut<'_>, out: &mut Vec<u8>) -> u32 {
        self.write_start(out);
        self.close_open(out);
        let index = self.next_block;
        self.next_block += 1;
        write_json_event(
            out,
            Some("content_block_start"),
            &BlockStartOut { kind: "content_block_start", index, content_block: block },
        );
        self.open = open.map(|kind| (kind, index));
        index
    }

    /// Closes the open block, as an upstream's own `content_block_stop` did on a relayed
    /// stream: what comes after it (a continuation) starts a new block.
    pub fn close_block(&mut self, out: &mut Vec<u8>) {
        self.close_open(out);
    }

    fn close_open(&mut self, out: &mut Vec<u8>) {
        if let Some((_, index)) = self.open.take() {
            Self::stop_block(index, out);
        }
    }

    fn stop_block(index: u32, out: &mut Vec<u8>) {
        write_json_event(
            out,
            Some("content_block_stop"),
            &BlockStopOut { kind: "content_block_stop", index },
        );
    }

    /// Closes the open block, then `message_delta` with stop reason and usage, then
    /// `message_stop`.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        self.write_start(out);
        self.close_open(out);
        self.ended = true;
        let (reason, sequence) = match &self.stop {
            Some((reason, sequence)) => (*reason, sequence.as_deref()),
            None => (StopReason::EndTurn, None),
        };
        write_json_event(
            out,
            Some("message_delta"),
            &MessageDeltaOut {
                kind: "message_delta",
                delta: StopOut { stop_reason: stop_reason_str(reason), stop_sequence: sequence },
                usage: UsageOut::new(&self.usage),
            },
        );
        write_json_event(out, Some("message_stop"), &TypeOnly { kind: "message_stop" });
    }

    /// An `error` event, as Anthropic sends for `overloaded_error` mid-stream; the SDKs raise
    /// on it.
    pub fn fail(&mut self, kind: ErrorKind, message: &str, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        self.ended = true;
        write_json_event(
            out,
            Some("error"),
            &ErrorEventOut { kind: "error", error: ErrorOut::new(kind, message) },
        );
    }

    pub fn keep_alive(out: &mut Vec<u8>) {
        write_json_event(out, Some("ping"), &TypeOnly { kind: "ping" });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wild_block_index_is_malformed_instead_of_sizing_memory() {
        let mut decoder = StreamDecoder::default();
        let data = r#"{"type":"content_block_start","index":4000000000,"content_block":{"type":"text","text":""}}"#;
        let event = SseEvent { event: Some("content_block_start"), data, id: None };
        let result = decoder.decode(&event, &mut |_| panic!("nothing may be emitted"));
        assert!(matches!(result, Err(ProviderError::MalformedEvent { .. })));
        assert!(decoder.blocks.capacity() < 64);
    }
}
