//! Gemini streams (`alt=sse`): every event is a piece of a `generateContent` response.

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::error::error_report;
use super::response::{ResponseWire, UsageWire};
use super::{call_id, stop_reason};
use crate::chat::{StopReason, StreamEvent};
use crate::dialect::Dialect;
use crate::error::ProviderError;
use crate::json::{self, Str};
use crate::sse::SseEvent;
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
