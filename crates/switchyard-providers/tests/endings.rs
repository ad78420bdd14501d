//! How a stream ended, cell by cell (RESILIENCE.md §7): every upstream dialect, both paths (its
//! events relayed to a client of its own dialect, or translated for each other client) and every
//! ending the relay can meet. Each cell feeds real event bytes of that dialect through the
//! [`StreamTranslator`], stops where the relay would (end marker, error event, end of body),
//! asks the one decision, writes the client's end as the relay does, and checks both the
//! decision and what the client got: its dialect's proper end only for a complete answer.
//! Gemini clients come twice, SSE and the JSON array (`streamGenerateContent` without
//! `alt=sse`), whose truncated stream ends with the error object and no closing bracket.

use switchyard_core::ending::{Ending, Exit};
use switchyard_providers::dialect::{ClientDialect, Dialect, ResponseMeta};
use switchyard_providers::error::{ErrorKind, ProviderError};
use switchyard_providers::gemini::Method;
use switchyard_providers::sse::SseEvent;
use switchyard_providers::stream::{Progress, StreamTranslator, TRUNCATED_MESSAGE};

const META: ResponseMeta<'static> = ResponseMeta { model: "served", created: 1_700_000_000 };

/// One upstream event: its SSE `event:` name and data.
type Event = (Option<&'static str>, &'static str);

/// A dialect's events for each part of an answer.
struct Wire {
    dialect: Dialect,
    /// Events that carry no content (`message_start`, a role-only chunk, `response.created`).
    preamble: &'static [Event],
    content: &'static [Event],
    /// The finish reason (with the end marker for Responses, whose `response.completed` is
    /// both).
    finish: &'static [Event],
    /// The end marker alone, where the dialect has one apart from its finish.
    end: Option<Event>,
    error: Event,
}

const OPENAI: Wire = Wire {
    dialect: Dialect::OpenAi,
    preamble: &[(
        None,
        r#"{"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant"}}]}"#,
    )],
    content: &[(
        None,
        r#"{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"Hello"}}]}"#,
    )],
    finish: &[(
        None,
        r#"{"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
    )],
    end: Some((None, "[DONE]")),
    error: (
        None,
        r#"{"error":{"message":"overloaded","type":"server_error","code":"server_error"}}"#,
    ),
};

const ANTHROPIC: Wire = Wire {
    dialect: Dialect::Anthropic,
    preamble: &[(
        Some("message_start"),
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}"#,
    )],
    content: &[
        (
            Some("content_block_start"),
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        (
            Some("content_block_delta"),
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#,
        ),
        (Some("content_block_stop"), r#"{"type":"content_block_stop","index":0}"#),
    ],
    finish: &[(
        Some("message_delta"),
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}"#,
    )],
    end: Some((Some("message_stop"), r#"{"type":"message_stop"}"#)),
    error: (
        Some("error"),
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    ),
};

const RESPONSES: Wire = Wire {
    dialect: Dialect::Responses,
    preamble: &[(
        Some("response.created"),
        r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","model":"m","output":[],"status":"in_progress"}}"#,
    )],
    content: &[(
        Some("response.output_text.delta"),
        r#"{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello"}"#,
    )],
    finish: &[(
        Some("response.completed"),
        r#"{"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","object":"response","model":"m","status":"completed","output":[]}}"#,
    )],
    end: None,
    error: (
        Some("response.failed"),
        r#"{"type":"response.failed","sequence_number":3,"response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"overloaded"}}}"#,
    ),
};

const GEMINI: Wire = Wire {
    dialect: Dialect::Gemini,
    preamble: &[],
    content: &[(
        None,
        r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello"}]},"index":0}],"modelVersion":"g"}"#,
    )],
    finish: &[(
        None,
        r#"{"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1}}"#,
    )],
    end: None,
    error: (None, r#"{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}"#),
};

/// What the upstream sends in one cell, and the exit the relay meets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    /// Content, the finish reason, the end marker.
    Whole,
    /// Content and the finish reason, then the body ends (no end marker).
    FinishThenEof,
    /// Content, the finish reason, then an error event.
    ErrorAfterFinish,
    /// Content, then the end marker with no finish reason.
    EndMarkerAfterContent,
    /// The end marker before any content.
    EndMarkerFirst,
    /// Content, then the body ends.
    EofAfterContent,
    /// Content, then an error event.
    ErrorAfterContent,
    /// An error event before any content.
    ErrorFirst,
}

impl Case {
    const ALL: [Self; 8] = [
        Self::Whole,
        Self::FinishThenEof,
        Self::ErrorAfterFinish,
        Self::EndMarkerAfterContent,
        Self::EndMarkerFirst,
        Self::EofAfterContent,
        Self::ErrorAfterContent,
        Self::ErrorFirst,
    ];

    /// The events sent, or `None` when the dialect cannot send this case (an end marker apart
    /// from the finish where it has none).
    fn events(self, wire: &Wire) -> Option<Vec<Event>> {
        let mut events = wire.preamble.to_vec();
        let content = wire.content.iter().copied();
        let finish = wire.finish.iter().copied();
        match self {
            Self::Whole => events.extend(content.chain(finish).chain(wire.end)),
            Self::FinishThenEof => events.extend(content.chain(finish)),
            Self::ErrorAfterFinish => events.extend(content.chain(finish).chain([wire.error])),
            Self::EndMarkerAfterContent => events.extend(content.chain([wire.end?])),
            Self::EndMarkerFirst => events.push(wire.end?),
            Self::EofAfterContent => events.extend(content),
            Self::ErrorAfterContent => events.extend(content.chain([wire.error])),
            Self::ErrorFirst => events.push(wire.error),
        }
        Some(events)
    }

    fn expected(self) -> Ending {
        match self {
            Self::Whole | Self::FinishThenEof | Self::ErrorAfterFinish => Ending::Complete,
            Self::EndMarkerAfterContent | Self::EofAfterContent | Self::ErrorAfterContent => {
                Ending::Truncated
            }
            Self::EndMarkerFirst | Self::ErrorFirst => Ending::Unanswered,
        }
    }
}

/// Feeds `events` as the relay reads them: it stops at the end marker or an error event.
fn run(mut translator: StreamTranslator, events: &[Event]) -> (Ending, String) {
    let mut out = Vec::new();
    let mut exit = Exit::Eof;
    for &(event, data) in events {
        let sse = SseEvent { event, data, id: None };
        match translator.translate(&sse, &mut out) {
            Ok(t) if t.progress == Progress::End => {
                exit = Exit::EndMarker;
                break;
            }
            Ok(_) => {}
            Err(ProviderError::UpstreamStream { .. }) => {
                exit = Exit::ErrorEvent;
                break;
            }
            Err(error) => panic!("{error}"),
        }
    }
    let ending = translator.ending(exit);
    match ending {
        Ending::Complete => translator.finish(&mut out),
        Ending::Truncated | Ending::Unanswered => {
            translator.fail(ErrorKind::Internal, TRUNCATED_MESSAGE, &mut out);
        }
        Ending::ClientGone => {}
    }
    (ending, String::from_utf8(out).expect("UTF-8"))
}

/// The client's proper end, as its stream's last event.
fn ends_properly(client: ClientDialect, text: &str) -> bool {
    match client {
        ClientDialect::OpenAi => text.ends_with("data: [DONE]\n\n"),
        ClientDialect::Anthropic => {
            text.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
        }
        ClientDialect::Responses => {
            text.rsplit("event: ").next().is_some_and(|last| last.starts_with("response.completed"))
        }
        // No end marker: the last chunk carries the finish reason.
        ClientDialect::Gemini(Method::StreamSse) => text
            .trim_end()
            .rsplit("data: ")
            .next()
            .is_some_and(|last| last.contains("\"finishReason\"")),
        ClientDialect::Gemini(_) => {
            let chunks: Vec<serde_json::Value> = serde_json::from_str(text).expect("a whole array");
            chunks.last().is_some_and(|last| last["candidates"][0]["finishReason"].is_string())
        }
    }
}

/// Whether any of the dialects' end markers (or Gemini's finish, or the array's closing
/// bracket) reached the client; for a Gemini array, also that the error object is its last
/// element.
fn has_an_end_marker(client: ClientDialect, text: &str) -> bool {
    let marker = text.contains("[DONE]")
        || text.contains("message_stop")
        || text.contains("response.completed")
        || text.contains("finishReason");
    if client == ClientDialect::Gemini(Method::StreamArray) {
        let last = text.rsplit(",\r\n").next().unwrap_or(text).trim_start_matches('[');
        let error =
            serde_json::from_str::<serde_json::Value>(last).is_ok_and(|e| e["error"].is_object());
        return marker || text.ends_with(']') || !error;
    }
    marker
}

#[test]
fn every_dialect_path_and_ending_is_decided_once_and_the_client_sees_only_that() {
    let clients = [
        ClientDialect::OpenAi,
        ClientDialect::Anthropic,
        ClientDialect::Responses,
        ClientDialect::Gemini(Method::StreamSse),
        ClientDialect::Gemini(Method::StreamArray),
    ];
    let mut cells = 0;
    for wire in [OPENAI, ANTHROPIC, RESPONSES, GEMINI] {
        for client in clients {
            let relayed = client.dialect() == wire.dialect;
            for case in Case::ALL {
                let Some(events) = case.events(&wire) else { continue };
                let translator = if relayed {
                    StreamTranslator::relay(client, &META)
                } else {
                    StreamTranslator::new(wire.dialect, client, &META, true)
                };
                let path = if relayed { "relayed" } else { "translated" };
                let cell = format!("{} → {client:?} ({path}), {case:?}", wire.dialect);
                let (ending, text) = run(translator, &events);
                assert_eq!(ending, case.expected(), "{cell}: {text}");
                match ending {
                    Ending::Complete => {
                        assert!(ends_properly(client, &text), "{cell}: no proper end: {text}");
                        assert!(text.contains("Hello"), "{cell}: {text}");
                    }
                    _ => {
                        assert!(!has_an_end_marker(client, &text), "{cell}: an end marker: {text}");
                    }
                }
                cells += 1;
            }
        }
    }
    // 4 dialects with all 8 cases (OpenAI and Anthropic; Responses and Gemini lack the two
    // end-marker-alone cases) times 5 clients.
    assert_eq!(cells, 5 * (8 + 8 + 6 + 6), "every cell ran");
}

#[test]
fn a_relayed_end_marker_after_content_without_a_finish_reason_never_reaches_the_client() {
    let events = Case::EndMarkerAfterContent.events(&OPENAI).unwrap();
    let (ending, text) = run(StreamTranslator::relay(ClientDialect::OpenAi, &META), &events);
    assert_eq!(ending, Ending::Truncated);
    assert!(text.contains("\"content\":\"Hello\""), "{text}");
    assert!(!text.contains("[DONE]"), "{text}");
    let last = text.trim_end().rsplit("data: ").next().unwrap();
    assert!(last.contains("\"error\""), "ends with the terminal error: {text}");
}

#[test]
fn a_trusted_end_marker_completes_an_answer_without_a_finish_reason() {
    use switchyard_core::ending::Trust;
    let events = Case::EndMarkerAfterContent.events(&OPENAI).unwrap();
    let trusted = StreamTranslator::relay(ClientDialect::OpenAi, &META).trusting(Trust::EndMarker);
    let (ending, text) = run(trusted, &events);
    assert_eq!(ending, Ending::Complete);
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    // Trusting the marker does not make an answer with nothing in it one.
    let events = Case::EofAfterContent.events(&OPENAI).unwrap();
    let trusted = StreamTranslator::relay(ClientDialect::OpenAi, &META).trusting(Trust::EndMarker);
    assert_eq!(run(trusted, &events).0, Ending::Truncated);
}

#[test]
fn a_truncated_gemini_array_ends_with_the_error_object_and_no_closing_bracket() {
    let client = ClientDialect::Gemini(Method::StreamArray);
    for (translator, wire) in [
        (StreamTranslator::relay(client, &META), &GEMINI),
        (StreamTranslator::new(Dialect::OpenAi, client, &META, true), &OPENAI),
    ] {
        let events = Case::EofAfterContent.events(wire).unwrap();
        let (ending, text) = run(translator, &events);
        assert_eq!(ending, Ending::Truncated);
        assert!(text.starts_with('[') && !text.ends_with(']'), "{text}");
        let last = text.rsplit(",\r\n").next().unwrap();
        let error: serde_json::Value = serde_json::from_str(last).unwrap();
        assert_eq!(error["error"]["status"], "INTERNAL", "{text}");
        assert!(serde_json::from_str::<serde_json::Value>(&text).is_err(), "never a whole array");
    }
}
