//! Gemini streams: every event (or array element) is a piece of a `generateContent` response.
//! Upstreams are read as SSE (`alt=sse`); clients get SSE or a JSON array ([`Method`]).

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::error::{BodyOut, ErrorOut, error_report};
use super::response::{
    CandidateOut, ContentOut, FunctionCallOut, PartOut, PromptFeedbackOut, ResponseOut,
    ResponseWire, UsageOut, UsageWire, args,
};
use super::{Method, call_id, finish_reason, stop_reason};
use crate::chat::{StopReason, StreamEvent, Usage};
use crate::dialect::{Dialect, ResponseMeta};
use crate::error::{ErrorKind, ProviderError};
use crate::json::{self, Str};
use crate::sse::{SseEvent, write_event};
use crate::stream::{Progress, StreamStatus};

/// Decodes one upstream Gemini stream. Function calls arrive whole, so each becomes a start
/// and a single arguments delta.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    /// The response id, once known: it seeds tool call ids.
    id: Option<String>,
    tools: u32,
    status: StreamStatus,
}

impl StreamDecoder {
    pub fn decode<'e>(
        &mut self,
        event: &SseEvent<'e>,
        emit: &mut impl FnMut(StreamEvent<'e>),
    ) -> Result<Progress, ProviderError> {
        let mut wire: ResponseWire<'e> = json::parse(event.data.as_bytes()).map_err(|e| {
            ProviderError::MalformedEvent { dialect: Dialect::Gemini, message: e.describe() }
        })?;
        if let Some(error) = wire.error {
            return Err(ProviderError::UpstreamStream {
                dialect: Dialect::Gemini,
                error: error_report(format!("{{\"error\":{}}}", error.get()).as_bytes()),
            });
        }
        if self.id.is_none() {
            let id = wire.response_id.take().map(Str::into_cow).unwrap_or_default();
            self.id = Some(id.clone().into_owned());
            emit(StreamEvent::Start {
                id,
                model: wire.model_version.take().map(Str::into_cow).unwrap_or_default(),
            });
        }
        // Counts first: they are cumulative, and a client stream that opens with the prompt's
        // size is more useful than one that learns it at the end.
        if let Some(usage) = wire.usage_metadata {
            emit(StreamEvent::Usage(UsageWire::usage(usage)));
        }
        if let Some(candidate) = wire.take_candidate() {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                if let Some(call) = part.function_call {
                    let index = self.tools;
                    self.tools += 1;
                    let n = usize::try_from(index).unwrap_or(usize::MAX);
                    emit(StreamEvent::ToolCallStart {
                        index,
                        id: call_id(
                            call.id.map(Str::into_cow),
                            self.id.as_deref().unwrap_or(""),
                            n,
                        ),
                        name: call.name.into_cow(),
                    });
                    emit(StreamEvent::ToolCallDelta {
                        index,
                        arguments: Cow::Borrowed(call.args.map_or("{}", RawValue::get)),
                    });
                } else if let Some(text) = part.text.filter(|t| !t.0.is_empty()) {
                    emit(if part.thought == Some(true) {
                        StreamEvent::ThinkingDelta(text.into_cow())
                    } else {
                        StreamEvent::TextDelta(text.into_cow())
                    });
                }
            }
            if let Some(reason) = candidate.finish_reason {
                self.status.finish_seen = true;
                let reason = match stop_reason(&reason.0) {
                    StopReason::EndTurn if self.tools > 0 => StopReason::ToolUse,
                    reason => reason,
                };
                emit(StreamEvent::Finish { reason, stop_sequence: None });
            }
        } else if wire.prompt_feedback.as_ref().is_some_and(|f| f.block_reason.is_some()) {
            self.status.finish_seen = true;
            emit(StreamEvent::Finish { reason: StopReason::ContentFilter, stop_sequence: None });
        }
        Ok(Progress::Continue)
    }

    pub fn status(&self) -> StreamStatus {
        self.status
    }
}

/// Encodes a canonical stream for a Gemini client: each piece of text or thought is a chunk
/// of its own as it comes; function calls, which Gemini sends whole, are held until their
/// arguments are complete (the finish) and go out in the last chunk, with the finish reason
/// and the usage. Gemini has no end marker: the finish reason is the end, and an array stream
/// closes its bracket.
///
/// Invariant (array framing): the first write opens the array with `[`, each later chunk is
/// preceded by `,\r\n`; a complete stream ends with `]`, a failed one with the error object as
/// its last element and no `]`, so no reader takes a cut answer for a whole one.
#[derive(Debug)]
pub struct StreamEncoder {
    model: String,
    /// The upstream's response id, from its first start.
    id: Option<String>,
    array: bool,
    /// Something was written: an array is open.
    opened: bool,
    /// Calls begun and not written yet: (canonical index, id, name, arguments so far).
    calls: Vec<(u32, String, String, String)>,
    finish: Option<StopReason>,
    usage: Option<Usage>,
    ended: bool,
}

impl StreamEncoder {
    pub fn new(meta: &ResponseMeta<'_>, method: Method) -> Self {
        Self {
            model: meta.model.to_owned(),
            id: None,
            array: method == Method::StreamArray,
            opened: false,
            calls: Vec::new(),
            finish: None,
            usage: None,
            ended: false,
        }
    }

    pub fn encode(&mut self, event: &StreamEvent<'_>, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        match event {
            // A continuation's second start keeps the first id (one answer).
            StreamEvent::Start { id, .. } => {
                self.id.get_or_insert_with(|| id.clone().into_owned());
            }
            StreamEvent::TextDelta(text) if !text.is_empty() => {
                self.parts(vec![PartOut::Text { text, thought: false }], None, out);
            }
            StreamEvent::ThinkingDelta(text) if !text.is_empty() => {
                self.parts(vec![PartOut::Text { text, thought: true }], None, out);
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                self.calls.push((
                    *index,
                    id.clone().into_owned(),
                    name.clone().into_owned(),
                    String::new(),
                ));
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                if let Some(call) = self.calls.iter_mut().find(|c| c.0 == *index) {
                    call.3.push_str(arguments);
                }
            }
            StreamEvent::Finish { reason, .. } => self.finish = Some(*reason),
            StreamEvent::Usage(usage) => self.usage = Some(*usage),
            // Another vendor's signatures and encrypted thinking mean nothing to Gemini.
            StreamEvent::TextDelta(_)
            | StreamEvent::ThinkingDelta(_)
            | StreamEvent::ThinkingSignature(_)
            | StreamEvent::RedactedThinking(_) => {}
        }
    }

    /// One chunk of `parts`; the last one carries `finish` and the usage.
    fn parts(&mut self, parts: Vec<PartOut<'_>>, finish: Option<StopReason>, out: &mut Vec<u8>) {
        let blocked = finish == Some(StopReason::ContentFilter) && parts.is_empty() && !self.opened;
        let chunk = ResponseOut {
            candidates: if blocked {
                Vec::new()
            } else {
                vec![CandidateOut {
                    content: ContentOut { parts, role: "model" },
                    finish_reason: finish.map(finish_reason),
                    index: 0,
                }]
            },
            prompt_feedback: blocked.then_some(PromptFeedbackOut { block_reason: "SAFETY" }),
            usage_metadata: finish.map(|_| UsageOut::new(&self.usage.unwrap_or_default())),
            model_version: &self.model,
            response_id: self.id.as_deref().unwrap_or_default(),
        };
        let json = serde_json::to_string(&chunk).expect("serialising to memory cannot fail");
        self.element(&json, out);
    }

    /// One chunk in this stream's framing.
    fn element(&mut self, json: &str, out: &mut Vec<u8>) {
        if self.array {
            out.extend_from_slice(if self.opened { b",\r\n" } else { b"[" });
            out.extend_from_slice(json.as_bytes());
        } else {
            write_event(out, None, json);
        }
        self.opened = true;
    }

    /// A chunk the upstream wrote in Gemini's own words (a relayed stream), in this framing.
    pub fn relay(&mut self, data: &str, out: &mut Vec<u8>) {
        if !self.ended {
            self.element(data, out);
        }
    }

    /// The last chunk (the calls, the finish reason, the usage) and, for an array, its `]`.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        let calls = std::mem::take(&mut self.calls);
        let parts = calls
            .iter()
            .map(|(_, id, name, arguments)| PartOut::FunctionCall {
                function_call: FunctionCallOut { id, name, args: args(arguments) },
            })
            .collect();
        let reason = match self.finish.unwrap_or(StopReason::EndTurn) {
            StopReason::EndTurn if !calls.is_empty() => StopReason::ToolUse,
            reason => reason,
        };
        self.parts(parts, Some(reason), out);
        self.close(out);
    }

    /// A relayed stream that is complete: only the array's `]` is missing.
    pub fn close(&mut self, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        self.ended = true;
        if self.array {
            if !self.opened {
                out.push(b'[');
            }
            out.push(b']');
        }
    }

    /// The error object as the last element (array) or event (SSE); nothing follows it.
    pub fn fail(&mut self, kind: ErrorKind, message: &str, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        let json = serde_json::to_string(&BodyOut { error: ErrorOut::new(kind, message) })
            .expect("serialising to memory cannot fail");
        self.element(&json, out);
        self.ended = true;
    }

    /// A blank line, in either framing: whitespace between array elements, and for SSE not a
    /// comment, since the Google SDKs' reader (`@google/genai`'s `responseLineRE`,
    /// `^\s*data: `) matches only at the start of its buffer and would stall behind one.
    pub fn keep_alive(out: &mut Vec<u8>) {
        out.push(b'\n');
    }
}
