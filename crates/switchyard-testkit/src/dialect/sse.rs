//! Server-sent events framing: one complete event per call, serialised straight into the
//! buffer that goes on the wire.

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;

/// `data: {json}` and the blank line that ends the event (OpenAI).
pub(super) fn data(json: &impl Serialize) -> Bytes {
    frame(b"data: ", json, b"\n\n")
}

/// Gemini ends its events with CRLF pairs; clients must accept both.
pub(super) fn data_crlf(json: &Value) -> Bytes {
    frame(b"data: ", json, b"\r\n\r\n")
}

/// A named event (Anthropic): `event: {name}` then `data: {json}`.
pub(super) fn event(name: &str, json: &Value) -> Bytes {
    let mut head = Vec::with_capacity(name.len() + 14);
    head.extend_from_slice(b"event: ");
    head.extend_from_slice(name.as_bytes());
    head.extend_from_slice(b"\ndata: ");
    frame(&head, json, b"\n\n")
}

/// A comment line: ignored by every SSE parser, it only keeps the connection warm.
pub(super) fn comment(text: &str) -> Bytes {
    Bytes::from(format!(": {text}\n\n"))
}

fn frame(head: &[u8], json: &impl Serialize, tail: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(head.len() + 128 + tail.len());
    out.extend_from_slice(head);
    serde_json::to_writer(&mut out, json).expect("a JSON value always serialises");
    out.extend_from_slice(tail);
    Bytes::from(out)
}
