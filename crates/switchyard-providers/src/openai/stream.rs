//! OpenAI streams: `chat.completion.chunk` events decoded from upstreams and encoded for
//! clients.

use std::borrow::Cow;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::error::{ErrorOut, error_report};
use super::response::{FunctionCallWire, UsageOut, UsageWire, skim_usage};
use super::{finish_reason, stop_reason};
use crate::chat::{StopReason, StreamEvent, Usage};
use crate::dialect::{Dialect, ResponseMeta};
use crate::error::{ErrorKind, ProviderError};
use crate::json::{self, Str};
use crate::skim::{Seen, Skim};
use crate::sse::{SseEvent, write_comment, write_json_event};
use crate::stream::{Progress, StreamStatus};

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct ChunkWire<'a> {
    #[serde(borrow, default)]
    id: Option<Str<'a>>,
    #[serde(borrow, default)]
    model: Option<Str<'a>>,
    #[serde(borrow, default)]
    choices: Vec<ChoiceWire<'a>>,
    #[serde(default)]
    usage: Option<UsageWire>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct ChoiceWire<'a> {
    #[serde(default)]
    index: u32,
    #[serde(borrow, default)]
    delta: Option<DeltaWire<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Str<'a>>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct DeltaWire<'a> {
    #[serde(borrow, default)]
    content: Option<Str<'a>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Str<'a>>,
    #[serde(borrow, default)]
    reasoning: Option<Str<'a>>,
    #[serde(borrow, default)]
    refusal: Option<Str<'a>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallDeltaWire<'a>>>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct ToolCallDeltaWire<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow, default)]
    id: Option<Str<'a>>,
    #[serde(borrow, default)]
    function: Option<FunctionCallWire<'a>>,
}

/// A chunk as [`ChunkWire`]'s serde reading would give it, read by [`Skim`];
/// `None` for anything it leaves to serde. Tool calls, usage and errors, rare and nested, are
/// read by serde from their own text.
fn skim_chunk(data: &str) -> Option<ChunkWire<'_>> {
    let mut chunk =
        ChunkWire { id: None, model: None, choices: Vec::new(), usage: None, error: None };
    let mut seen = Seen::default();
    let mut s = Skim::new(data);
    s.object(|s, key| {
        match key {
            "id" => seen.once(0, || s.optional_string(&mut chunk.id))?,
            "model" => seen.once(1, || s.optional_string(&mut chunk.model))?,
            "choices" => {
                seen.first(2)?;
                s.array(|s| {
                    chunk.choices.push(skim_choice(s)?);
                    Some(())
                })?;
            }
            "usage" => seen.once(3, || s.nullable(&mut chunk.usage, skim_usage))?,
            "error" => {
                seen.first(4)?;
                chunk.error = serde_json::from_str(s.raw()?).ok()?;
            }
            _ => s.skip()?,
        }
        Some(())
    })?;
    s.end()?;
    Some(chunk)
}

fn skim_choice<'e>(s: &mut Skim<'e>) -> Option<ChoiceWire<'e>> {
    let mut choice = ChoiceWire { index: 0, delta: None, finish_reason: None };
    let mut seen = Seen::default();
    s.object(|s, key| {
        match key {
            "index" => {
                seen.first(0)?;
                choice.index = s.unsigned()?;
            }
            "delta" => {
                seen.first(1)?;
                s.nullable(&mut choice.delta, skim_delta)?;
            }
            "finish_reason" => seen.once(2, || s.optional_string(&mut choice.finish_reason))?,
            _ => s.skip()?,
        }
        Some(())
    })?;
    Some(choice)
}

fn skim_delta<'e>(s: &mut Skim<'e>) -> Option<DeltaWire<'e>> {
    let mut delta = DeltaWire {
        content: None,
        reasoning_content: None,
        reasoning: None,
        refusal: None,
        tool_calls: None,
    };
    let mut seen = Seen::default();
    s.object(|s, key| {
        match key {
            "content" => seen.once(0, || s.optional_string(&mut delta.content))?,
            "reasoning_content" => {
                seen.once(1, || s.optional_string(&mut delta.reasoning_content))?;
            }
            "reasoning" => seen.once(2, || s.optional_string(&mut delta.reasoning))?,
            "refusal" => seen.once(3, || s.optional_string(&mut delta.refusal))?,
            "tool_calls" => {
                seen.first(4)?;
                delta.tool_calls = serde_json::from_str(s.raw()?).ok()?;
            }
            _ => s.skip()?,
        }
        Some(())
    })?;
    Some(delta)
}

/// A tool call seen in this stream: the upstream's index and id, in order of appearance.
#[derive(Debug)]
struct ToolSlot {
    upstream_index: u32,
    id: Option<String>,
}

/// Decodes one upstream Chat Completions stream.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    started: bool,
    tools: Vec<ToolSlot>,
    status: StreamStatus,
    /// Where the chunk just decoded wrote its `model`, quotes included, in the event's data:
    /// a relay rewrites it there instead of parsing the chunk again. `None` when the
    /// chunk named none, wrote it with escapes, or could not be read.
    model_at: Option<Range<usize>>,
}

impl StreamDecoder {
    /// `[DONE]` ends the stream; a chunk with `error` is the upstream giving up; chunks with no
    /// choices and no usage (Azure's prompt-filter results) emit nothing.
    pub fn decode<'e>(
        &mut self,
        event: &SseEvent<'e>,
        emit: &mut impl FnMut(StreamEvent<'e>),
    ) -> Result<Progress, ProviderError> {
        self.model_at = None;
        let data = event.data.trim_ascii();
        if data == "[DONE]" {
            self.status.end_seen = true;
            return Ok(Progress::End);
        }
        let chunk = match skim_chunk(data) {
            Some(chunk) => chunk,
            None => json::parse(data.as_bytes()).map_err(|e| ProviderError::MalformedEvent {
                dialect: Dialect::OpenAi,
                message: e.describe(),
            })?,
        };
        self.model_at = match chunk.model.as_ref().map(|m| &m.0) {
            Some(Cow::Borrowed(model)) => {
                crate::passthrough::quoted_in(event.data.as_bytes(), model)
            }
            _ => None,
        };
        if let Some(error) = chunk.error {
            return Err(ProviderError::UpstreamStream {
                dialect: Dialect::OpenAi,
                error: error_report(format!("{{\"error\":{}}}", error.get()).as_bytes()),
            });
        }
        let choice = chunk.choices.into_iter().find(|c| c.index == 0);
        if choice.is_none() && chunk.usage.is_none() {
            return Ok(Progress::Continue);
        }
        if !self.started {
            self.started = true;
            emit(StreamEvent::Start {
                id: chunk.id.map(Str::into_cow).unwrap_or_default(),
                model: chunk.model.map(Str::into_cow).unwrap_or_default(),
            });
        }
        if let Some(choice) = choice {
            if let Some(delta) = choice.delta {
                self.delta(delta, emit);
            }
            // OpenRouter reports a mid-stream failure as `finish_reason: "error"`: the model
            // did not finish (RESILIENCE.md §7).
            if let Some(reason) = choice.finish_reason.as_ref().filter(|r| r.0 == "error") {
                return Err(ProviderError::UpstreamStream {
                    dialect: Dialect::OpenAi,
                    error: crate::error::UpstreamError {
                        code: Some(reason.0.to_string()),
                        message: "the upstream reported an error mid-stream (finish_reason: error)"
                            .into(),
                        ..Default::default()
                    },
                });
            }
            if let Some(reason) = choice.finish_reason {
                let reason = match stop_reason(&reason.0) {
                    StopReason::EndTurn if !self.tools.is_empty() => StopReason::ToolUse,
                    reason => reason,
                };
                self.status.finish_seen = true;
                emit(StreamEvent::Finish { reason, stop_sequence: None });
            }
        }
        if let Some(usage) = chunk.usage {
            emit(StreamEvent::Usage(usage.usage()));
        }
        Ok(Progress::Continue)
    }

    fn delta<'e>(&mut self, delta: DeltaWire<'e>, emit: &mut impl FnMut(StreamEvent<'e>)) {
        if let Some(thinking) = delta.reasoning_content.or(delta.reasoning)
            && !thinking.0.is_empty()
        {
            emit(StreamEvent::ThinkingDelta(thinking.into_cow()));
        }
        for text in [delta.content, delta.refusal].into_iter().flatten() {
            if !text.0.is_empty() {
                emit(StreamEvent::TextDelta(text.into_cow()));
            }
        }
        for call in delta.tool_calls.unwrap_or_default() {
            let upstream_index =
                call.index.or_else(|| self.tools.last().map(|t| t.upstream_index)).unwrap_or(0);
            let id = call.id.filter(|id| !id.0.is_empty());
            let existing = self.tools.iter().rposition(|slot| {
                slot.upstream_index == upstream_index
                    && match (&id, &slot.id) {
                        (Some(id), Some(known)) => id.0 == known.as_str(),
                        _ => true,
                    }
            });
            let (name, arguments) = match call.function {
                Some(f) => (f.name, f.arguments),
                None => (None, None),
            };
            let index = if let Some(index) = existing {
                index
            } else {
                let index = self.tools.len();
                self.tools.push(ToolSlot {
                    upstream_index,
                    id: id.as_ref().map(|id| id.0.clone().into_owned()),
                });
                emit(StreamEvent::ToolCallStart {
                    index: u32::try_from(index).unwrap_or(u32::MAX),
                    id: id.map_or_else(|| Cow::Owned(format!("call_{index}")), Str::into_cow),
                    name: name.map(Str::into_cow).unwrap_or_default(),
                });
                index
            };
            if let Some(arguments) = arguments.filter(|a| !a.0.is_empty()) {
                emit(StreamEvent::ToolCallDelta {
                    index: u32::try_from(index).unwrap_or(u32::MAX),
                    arguments: arguments.into_cow(),
                });
            }
        }
    }

    /// See [`StreamDecoder::model_at`](crate::stream::StreamDecoder::model_at).
    pub(crate) fn model_at(&self) -> Option<Range<usize>> {
        self.model_at.clone()
    }

    pub fn status(&self) -> StreamStatus {
        self.status
    }
}

#[derive(Serialize)]
struct ChunkOut<'r> {
    id: &'r str,
    object: &'static str,
    created: u64,
    model: &'r str,
    choices: &'r [ChoiceOut<'r>],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<UsageOut>,
}

#[derive(Serialize)]
struct ChoiceOut<'r> {
    index: u32,
    delta: DeltaOut<'r>,
    finish_reason: Option<&'static str>,
}

#[derive(Default, Serialize)]
struct DeltaOut<'r> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'r str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'r str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<[ToolCallDeltaOut<'r>; 1]>,
}

#[derive(Serialize)]
struct ToolCallDeltaOut<'r> {
    index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'r str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    function: FunctionDeltaOut<'r>,
}

#[derive(Serialize)]
struct FunctionDeltaOut<'r> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'r str>,
    arguments: &'r str,
}

#[derive(Serialize)]
struct ErrorEventOut<'r> {
    error: ErrorOut<'r>,
}

/// Encodes canonical events as a Chat Completions stream for a client.
#[derive(Debug)]
pub struct StreamEncoder {
    id: String,
    model: String,
    created: u64,
    include_usage: bool,
    started: bool,
    usage: Option<Usage>,
    ended: bool,
}

impl StreamEncoder {
    /// `include_usage`: the client asked for the final usage chunk (`stream_options`).
    pub fn new(meta: &ResponseMeta<'_>, include_usage: bool) -> Self {
        Self {
            id: String::new(),
            model: meta.model.to_owned(),
            created: meta.created,
            include_usage,
            started: false,
            usage: None,
            ended: false,
        }
    }

    pub fn encode(&mut self, event: &StreamEvent<'_>, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        if let StreamEvent::Start { id, .. } = event {
            if !self.started {
                (**id).clone_into(&mut self.id);
                self.started = true;
                self.chunk(
                    out,
                    DeltaOut { role: Some("assistant"), content: Some(""), ..DeltaOut::default() },
                    None,
                );
            }
            return;
        }
        if !self.started {
            self.started = true;
            self.chunk(
                out,
                DeltaOut { role: Some("assistant"), content: Some(""), ..DeltaOut::default() },
                None,
            );
        }
        match event {
            StreamEvent::Start { .. }
            | StreamEvent::ThinkingSignature(_)
            | StreamEvent::RedactedThinking(_) => {}
            StreamEvent::TextDelta(text) => {
                self.chunk(out, DeltaOut { content: Some(text), ..DeltaOut::default() }, None);
            }
            StreamEvent::ThinkingDelta(text) => {
                self.chunk(
                    out,
                    DeltaOut { reasoning_content: Some(text), ..DeltaOut::default() },
                    None,
                );
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                let call = ToolCallDeltaOut {
                    index: *index,
                    id: Some(id),
                    kind: Some("function"),
                    function: FunctionDeltaOut { name: Some(name), arguments: "" },
                };
                self.chunk(out, DeltaOut { tool_calls: Some([call]), ..DeltaOut::default() }, None);
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                let call = ToolCallDeltaOut {
                    index: *index,
                    id: None,
                    kind: None,
                    function: FunctionDeltaOut { name: None, arguments },
                };
                self.chunk(out, DeltaOut { tool_calls: Some([call]), ..DeltaOut::default() }, None);
            }
            StreamEvent::Finish { reason, .. } => {
                self.chunk(out, DeltaOut::default(), Some(finish_reason(*reason)));
            }
            StreamEvent::Usage(usage) => self.usage = Some(*usage),
        }
    }

    fn chunk(&self, out: &mut Vec<u8>, delta: DeltaOut<'_>, finish_reason: Option<&'static str>) {
        let choices = [ChoiceOut { index: 0, delta, finish_reason }];
        let chunk = ChunkOut {
            id: &self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: &self.model,
            choices: &choices,
            usage: None,
        };
        write_json_event(out, None, &chunk);
    }

    /// The usage chunk (when asked for) and `[DONE]`.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        self.ended = true;
        if self.include_usage {
            let chunk = ChunkOut {
                id: &self.id,
                object: "chat.completion.chunk",
                created: self.created,
                model: &self.model,
                choices: &[],
                usage: Some(UsageOut::new(&self.usage.unwrap_or_default())),
            };
            write_json_event(out, None, &chunk);
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
    }

    /// A `data: {"error": ...}` chunk and no `[DONE]`: OpenAI's SDKs raise on it, so the
    /// client cannot mistake the partial answer for a whole one.
    pub fn fail(&mut self, kind: ErrorKind, message: &str, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        self.ended = true;
        write_json_event(out, None, &ErrorEventOut { error: ErrorOut::new(kind, message) });
    }

    pub fn keep_alive(out: &mut Vec<u8>) {
        write_comment(out, "keep-alive");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunks as OpenAI, OpenRouter, DeepSeek, Azure and the mock write them.
    const CHUNKS: &[&str] = &[
        r#"{"choices":[{"delta":{"content":"","refusal":null,"role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],"created":1700000000,"id":"chatcmpl-mock-0","model":"gpt-4o-mini","object":"chat.completion.chunk","system_fingerprint":"fp_mock"}"#,
        r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"line\nbreak \"quoted\" \u00e9"},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"c1","model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}"#,
        r#"{"id":"c1","model":"gpt-4o","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":8},"completion_tokens_details":{"reasoning_tokens":1}}}"#,
        r#"{"id":"c2","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"Let me think"},"finish_reason":null}]}"#,
        r#"{"id":"gen-1","provider":"OpenAI","model":"openai/gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"hm","reasoning_details":[{"type":"reasoning.text","text":"hm"}]},"finish_reason":null,"native_finish_reason":null}]}"#,
        r#"{"id":"c3","model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}"#,
        r#"{"id":"c3","model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls"}]}"#,
        r#"{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}"#,
        r#"{"error":{"message":"overloaded","type":"server_error","code":529}}"#,
        r#"{"id":"c4","model":"gpt-4o","choices":[{"index":1,"delta":{"content":"second"},"finish_reason":null},{"index":0,"delta":{"refusal":"no"},"finish_reason":"error"}]}"#,
        "{ \"id\" : \"c5\" ,\n \"choices\" : [ { \"index\" : 0 , \"delta\" : { \"content\" : \"spaced\" } } ] , \"x\" : [ 1.5e-3 , -0 , true , false , { } ] }",
    ];

    #[test]
    fn the_skim_reads_every_usual_chunk_and_reads_it_as_serde_does() {
        for chunk in CHUNKS {
            let read = crate::skim::agrees_with_serde(chunk, skim_chunk(chunk));
            assert!(read, "left to serde: {chunk}");
        }
    }

    /// Mutated chunks (bytes deleted, inserted, replaced): wherever the skim answers, serde
    /// reads the same; where serde refuses, the skim does too, so the error stays serde's.
    #[test]
    fn on_mutated_chunks_the_skim_agrees_with_serde_or_leaves_them_to_it() {
        let mut answered = 0;
        crate::skim::mutations(CHUNKS, 3000, |text| {
            answered += usize::from(crate::skim::agrees_with_serde(text, skim_chunk(text)));
        });
        // The mutations leave many chunks readable: the agreement above is not vacuous.
        assert!(answered > 3000, "only {answered} mutated chunks were read by the skim");
    }

    #[test]
    fn duplicate_fields_and_odd_forms_are_left_to_serde_which_refuses_or_reads_them() {
        let duplicate = r#"{"model":"a","model":"b","choices":[]}"#;
        assert!(skim_chunk(duplicate).is_none());
        assert!(serde_json::from_str::<ChunkWire<'_>>(duplicate).is_err());
        // serde reads a struct from an array too.
        let array = r#"["id","m",[],null,null]"#;
        assert!(skim_chunk(array).is_none());
        assert!(serde_json::from_str::<ChunkWire<'_>>(array).is_ok());
        let escaped_key = r#"{"mod\u0065l":"m","choices":[]}"#;
        assert!(skim_chunk(escaped_key).is_none());
        let read = serde_json::from_str::<ChunkWire<'_>>(escaped_key).unwrap();
        assert_eq!(read.model.map(Str::into_cow).as_deref(), Some("m"));
    }
}
