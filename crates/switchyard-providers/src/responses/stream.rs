//! Responses streams: `response.*` events decoded from upstreams and encoded for clients.
//!
//! A stream is complete when `response.completed` or `response.incomplete` arrived: each is
//! both the finish (its status says why) and the end. `response.failed` and `error` events are
//! the upstream giving up.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::error::{StreamErrorWire, failed_code};
use super::response::{
    ContentWire, ErrorOut, IncompleteOut, ItemOut, OutputItemWire, ResponseOut, SummaryOut,
    TextPartOut, UsageOut, UsageWire,
};
use super::{item_id, response_id, status_of, stop_reason, wrap_thinking};
use crate::chat::{StopReason, StreamEvent, Usage, freeform_input};
use crate::dialect::{ClientContext, Dialect, ResponseMeta};
use crate::error::{ErrorKind, ProviderError};
use crate::json::{self, Str};
use crate::sse::{SseEvent, write_comment, write_json_event};
use crate::stream::{Progress, StreamStatus};

#[derive(Deserialize)]
struct EventWire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    response: Option<ResponseHeadWire<'a>>,
    #[serde(default)]
    output_index: Option<usize>,
    #[serde(borrow, default)]
    item: Option<&'a RawValue>,
    #[serde(borrow, default)]
    delta: Option<Str<'a>>,
    #[serde(default)]
    summary_index: Option<u32>,
    #[serde(borrow, default)]
    code: Option<Str<'a>>,
    #[serde(borrow, default)]
    message: Option<Str<'a>>,
    #[serde(borrow, default)]
    error: Option<StreamErrorWire<'a>>,
}

/// The parts of a `response` object a stream decoder needs; its `output` is not read again.
#[derive(Deserialize)]
struct ResponseHeadWire<'a> {
    #[serde(borrow, default)]
    id: Option<Str<'a>>,
    #[serde(borrow, default)]
    model: Option<Str<'a>>,
    #[serde(borrow, default)]
    incomplete_details: Option<super::response::IncompleteWire<'a>>,
    #[serde(default)]
    usage: Option<UsageWire>,
    #[serde(borrow, default)]
    error: Option<StreamErrorWire<'a>>,
}

#[derive(Deserialize)]
struct ItemHead<'a> {
    #[serde(rename = "type", borrow)]
    kind: Str<'a>,
}

/// What an upstream output item turned into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// Not announced yet, or an item type that is not forwarded (built-in tool calls, ...).
    Unknown,
    /// `seen`: some of its content arrived as deltas.
    Message {
        seen: bool,
    },
    Reasoning {
        seen: bool,
    },
    /// The n-th tool call of the answer.
    Function {
        index: u32,
        seen: bool,
    },
    /// A freeform call, forwarded as `{"input": "..."}` arguments: open until its `"}`.
    Custom {
        index: u32,
        seen: bool,
        open: bool,
    },
}

/// How far ahead of the items seen so far a new item's index may jump.
const MAX_INDEX_GAP: usize = 16;

/// Decodes one upstream Responses stream.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    started: bool,
    slots: Vec<Slot>,
    tools: u32,
    status: StreamStatus,
}

/// A piece of a JSON string's contents, escaped (without quotes), so that pieces of a
/// freeform input joined make the JSON text of the whole input.
fn escaped(piece: &str) -> Cow<'static, str> {
    let quoted = serde_json::to_string(piece).expect("a string serialises");
    Cow::Owned(quoted[1..quoted.len() - 1].to_owned())
}

impl StreamDecoder {
    pub fn decode<'e>(
        &mut self,
        event: &SseEvent<'e>,
        emit: &mut impl FnMut(StreamEvent<'e>),
    ) -> Result<Progress, ProviderError> {
        let wire: EventWire<'e> = json::parse(event.data.as_bytes()).map_err(|e| {
            ProviderError::MalformedEvent { dialect: Dialect::Responses, message: e.describe() }
        })?;
        let kind = wire.kind.0.clone();
        match kind.as_ref() {
            "response.created" | "response.in_progress" | "response.queued" if !self.started => {
                self.started = true;
                let (id, model) = match wire.response {
                    Some(head) => (head.id, head.model),
                    None => (None, None),
                };
                emit(StreamEvent::Start {
                    id: id.map(Str::into_cow).unwrap_or_default(),
                    model: model.map(Str::into_cow).unwrap_or_default(),
                });
            }
            "response.output_item.added" | "response.output_item.done" => {
                let added = kind == "response.output_item.added";
                self.output_item(added, wire.output_index, wire.item, emit).map_err(|message| {
                    ProviderError::MalformedEvent {
                        dialect: Dialect::Responses,
                        message: format!("`{kind}` event: {message}"),
                    }
                })?;
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                self.ensure_started(emit);
                self.mark_seen(wire.output_index);
                if let Some(delta) = wire.delta.filter(|d| !d.0.is_empty()) {
                    emit(StreamEvent::TextDelta(delta.into_cow()));
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                self.ensure_started(emit);
                self.mark_seen(wire.output_index);
                if let Some(delta) = wire.delta.filter(|d| !d.0.is_empty()) {
                    emit(StreamEvent::ThinkingDelta(delta.into_cow()));
                }
            }
            // Summary parts after the first are paragraphs of the same thinking.
            "response.reasoning_summary_part.added"
                if wire.summary_index.is_some_and(|i| i > 0) =>
            {
                emit(StreamEvent::ThinkingDelta(Cow::Borrowed("\n\n")));
            }
            "response.function_call_arguments.delta" | "response.custom_tool_call_input.delta" => {
                self.tool_delta(wire.output_index, wire.delta, emit);
            }
            "response.completed" | "response.incomplete" => {
                self.finished(kind == "response.completed", wire.response, emit);
                return Ok(Progress::End);
            }
            "response.failed" => {
                let error = wire.response.and_then(|r| r.error).unwrap_or_default();
                return Err(ProviderError::UpstreamStream {
                    dialect: Dialect::Responses,
                    error: error.report(),
                });
            }
            "error" => {
                let error = wire.error.unwrap_or(StreamErrorWire {
                    code: wire.code,
                    kind: None,
                    message: wire.message,
                });
                return Err(ProviderError::UpstreamStream {
                    dialect: Dialect::Responses,
                    error: error.report(),
                });
            }
            _ => {}
        }
        Ok(Progress::Continue)
    }

    /// `response.output_item.added` / `.done`. Errors describe what is malformed.
    fn output_item<'e>(
        &mut self,
        added: bool,
        index: Option<usize>,
        raw: Option<&'e RawValue>,
        emit: &mut impl FnMut(StreamEvent<'e>),
    ) -> Result<(), String> {
        let index = index.ok_or("no `output_index`")?;
        // Items are numbered in order; a wild index must not size a vector.
        if index > self.slots.len() + MAX_INDEX_GAP {
            return Err("output index out of order".into());
        }
        let raw = raw.ok_or("no `item`")?;
        let head: ItemHead<'_> =
            serde_json::from_str(raw.get()).map_err(|_| "an item without `type`")?;
        let known = matches!(
            head.kind.0.as_ref(),
            "message" | "reasoning" | "function_call" | "custom_tool_call"
        );
        let item: Option<OutputItemWire<'e>> =
            if known { Some(json::parse_raw(raw)?) } else { None };
        self.ensure_started(emit);
        if self.slots.len() <= index {
            self.slots.resize(index + 1, Slot::Unknown);
        }
        let Some(mut item) = item else { return Ok(()) };
        if added {
            self.slots[index] = self.item_added(item, emit);
        } else if self.slots[index] == Slot::Unknown {
            // Announced only now (a server that skips `added`): start it bare, then finish
            // it with all it carries.
            let whole = OutputItemWire {
                content: item.content.take(),
                summary: item.summary.take(),
                arguments: item.arguments.take(),
                input: item.input.take(),
                ..empty_item()
            };
            let slot = self.item_added(item, emit);
            self.slots[index] = Self::item_done(slot, whole, emit);
        } else {
            self.slots[index] = Self::item_done(self.slots[index], item, emit);
        }
        Ok(())
    }

    /// A function call's arguments or a freeform call's input, a piece at a time.
    fn tool_delta<'e>(
        &mut self,
        index: Option<usize>,
        delta: Option<Str<'e>>,
        emit: &mut impl FnMut(StreamEvent<'e>),
    ) {
        let slot = index.and_then(|i| self.slots.get_mut(i));
        let delta = delta.filter(|d| !d.0.is_empty());
        match (slot, delta) {
            (Some(Slot::Function { index, seen }), Some(delta)) => {
                *seen = true;
                emit(StreamEvent::ToolCallDelta { index: *index, arguments: delta.into_cow() });
            }
            (Some(Slot::Custom { index, seen, open: true }), Some(delta)) => {
                *seen = true;
                emit(StreamEvent::ToolCallDelta { index: *index, arguments: escaped(&delta.0) });
            }
            _ => {}
        }
    }

    /// `response.completed` / `response.incomplete`: usage, then the finish.
    fn finished<'e>(
        &mut self,
        completed: bool,
        head: Option<ResponseHeadWire<'e>>,
        emit: &mut impl FnMut(StreamEvent<'e>),
    ) {
        self.ensure_started(emit);
        self.close_custom(emit);
        let (usage, reason) = match head {
            Some(head) => (head.usage, head.incomplete_details.and_then(|d| d.reason)),
            None => (None, None),
        };
        if let Some(usage) = usage {
            emit(StreamEvent::Usage(usage.usage()));
        }
        let status = if completed { "completed" } else { "incomplete" };
        let reason = stop_reason(status, reason.as_ref().map(|r| r.0.as_ref()), self.tools > 0)
            .unwrap_or(StopReason::EndTurn);
        self.status.finish_seen = true;
        self.status.end_seen = true;
        emit(StreamEvent::Finish { reason, stop_sequence: None });
    }

    fn ensure_started<'e>(&mut self, emit: &mut impl FnMut(StreamEvent<'e>)) {
        if !self.started {
            self.started = true;
            emit(StreamEvent::Start { id: Cow::Borrowed(""), model: Cow::Borrowed("") });
        }
    }

    fn mark_seen(&mut self, index: Option<usize>) {
        if let Some(Slot::Message { seen } | Slot::Reasoning { seen }) =
            index.and_then(|i| self.slots.get_mut(i))
        {
            *seen = true;
        }
    }

    fn item_added<'e>(
        &mut self,
        item: OutputItemWire<'e>,
        emit: &mut impl FnMut(StreamEvent<'e>),
    ) -> Slot {
        match item.kind.0.as_ref() {
            "message" => Slot::Message { seen: false },
            "reasoning" => Slot::Reasoning { seen: false },
            "function_call" | "custom_tool_call" => {
                let index = self.tools;
                self.tools += 1;
                let custom = item.kind.0 == "custom_tool_call";
                emit(StreamEvent::ToolCallStart {
                    index,
                    id: item.call_id.map(Str::into_cow).unwrap_or_default(),
                    name: item.name.map(Str::into_cow).unwrap_or_default(),
                });
                if custom {
                    emit(StreamEvent::ToolCallDelta {
                        index,
                        arguments: Cow::Borrowed("{\"input\":\""),
                    });
                    let input = item.input.filter(|i| !i.0.is_empty());
                    let seen = input.is_some();
                    if let Some(input) = input {
                        emit(StreamEvent::ToolCallDelta { index, arguments: escaped(&input.0) });
                    }
                    Slot::Custom { index, seen, open: true }
                } else {
                    let arguments = item.arguments.filter(|a| !a.0.is_empty());
                    let seen = arguments.is_some();
                    if let Some(arguments) = arguments {
                        emit(StreamEvent::ToolCallDelta { index, arguments: arguments.into_cow() });
                    }
                    Slot::Function { index, seen }
                }
            }
            _ => Slot::Unknown,
        }
    }

    /// An item is done: what never came as deltas comes now, whole.
    fn item_done<'e>(
        slot: Slot,
        item: OutputItemWire<'e>,
        emit: &mut impl FnMut(StreamEvent<'e>),
    ) -> Slot {
        match slot {
            Slot::Message { seen: false } => {
                for text in
                    item.content.unwrap_or_default().into_iter().filter_map(ContentWire::into_text)
                {
                    if !text.is_empty() {
                        emit(StreamEvent::TextDelta(text));
                    }
                }
                Slot::Message { seen: true }
            }
            Slot::Reasoning { seen: false } => {
                let parts =
                    item.summary.filter(|s| !s.is_empty()).or(item.content).unwrap_or_default();
                for (n, text) in parts.into_iter().filter_map(ContentWire::into_text).enumerate() {
                    if n > 0 {
                        emit(StreamEvent::ThinkingDelta(Cow::Borrowed("\n\n")));
                    }
                    if !text.is_empty() {
                        emit(StreamEvent::ThinkingDelta(text));
                    }
                }
                Slot::Reasoning { seen: true }
            }
            Slot::Function { index, seen: false } => {
                if let Some(arguments) = item.arguments.filter(|a| !a.0.is_empty()) {
                    emit(StreamEvent::ToolCallDelta { index, arguments: arguments.into_cow() });
                }
                Slot::Function { index, seen: true }
            }
            Slot::Custom { index, seen, open: true } => {
                if !seen && let Some(input) = item.input.filter(|i| !i.0.is_empty()) {
                    emit(StreamEvent::ToolCallDelta { index, arguments: escaped(&input.0) });
                }
                emit(StreamEvent::ToolCallDelta { index, arguments: Cow::Borrowed("\"}") });
                Slot::Custom { index, seen: true, open: false }
            }
            other => other,
        }
    }

    /// Freeform calls still open when the response ends get their closing `"}`, so their
    /// arguments stay JSON.
    fn close_custom<'e>(&mut self, emit: &mut impl FnMut(StreamEvent<'e>)) {
        for slot in &mut self.slots {
            if let Slot::Custom { index, seen, open: true } = *slot {
                emit(StreamEvent::ToolCallDelta { index, arguments: Cow::Borrowed("\"}") });
                *slot = Slot::Custom { index, seen, open: false };
            }
        }
    }

    pub fn status(&self) -> StreamStatus {
        self.status
    }
}

fn empty_item<'a>() -> OutputItemWire<'a> {
    OutputItemWire {
        kind: Str::default(),
        content: None,
        summary: None,
        call_id: None,
        name: None,
        arguments: None,
        input: None,
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding for a client.

/// Every event of the protocol: `type`, `sequence_number`, and the fields its type has.
#[derive(Serialize)]
struct EventOut<'r> {
    #[serde(rename = "type")]
    kind: &'static str,
    sequence_number: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    response: Option<ResponseOut<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    item_id: Option<&'r str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content_index: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary_index: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    item: Option<&'r ItemOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    part: Option<PartOut<'r>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<&'r str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'r str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'r str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'r str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input: Option<&'r str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    logprobs: Option<[(); 0]>,
}

impl EventOut<'_> {
    fn new(kind: &'static str) -> Self {
        Self {
            kind,
            sequence_number: 0,
            response: None,
            item_id: None,
            output_index: None,
            content_index: None,
            summary_index: None,
            item: None,
            part: None,
            delta: None,
            text: None,
            name: None,
            arguments: None,
            input: None,
            logprobs: None,
        }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum PartOut<'r> {
    Text(&'r TextPartOut),
    Summary(&'r SummaryOut),
}

/// Writes `event` with the next sequence number.
fn write(out: &mut Vec<u8>, sequence: &mut u64, mut event: EventOut<'_>) {
    event.sequence_number = *sequence;
    *sequence += 1;
    write_json_event(out, Some(event.kind), &event);
}

/// Encodes canonical events as a Responses stream for a client: `response.created` and
/// `response.in_progress` first, then each output item `added`, its parts and deltas, `done`,
/// and `response.completed` (or `response.incomplete` when the output limit was hit) with the
/// whole response and its usage. A break gets `response.failed`, never `completed`.
///
/// Text and reasoning items close when something else starts; tool calls stay open until the
/// answer finishes, since another dialect may interleave the arguments of parallel calls. A
/// freeform tool's input is held until its call closes: it arrives as the JSON text
/// `{"input": "..."}`, and only the whole of it says what the input is.
#[derive(Debug)]
pub struct StreamEncoder {
    id: String,
    model: String,
    created: u64,
    context: ClientContext,
    sequence: u64,
    started: bool,
    items: Vec<ItemOut>,
    open_text: Option<usize>,
    open_reasoning: Option<usize>,
    /// Anthropic's signature for the open reasoning item's text.
    signature: Option<String>,
    /// Item of each canonical tool call, and whether it is still open.
    tools: Vec<Option<(usize, bool)>>,
    usage: Usage,
    stop: Option<StopReason>,
    ended: bool,
    /// On a relayed stream: the upstream's item ids by output index and its next sequence
    /// number, adopted when a continuation takes the stream over (RESILIENCE.md §10).
    followed: Option<Box<(Vec<Option<String>>, u64)>>,
}

/// What [`StreamEncoder::follow`] reads of a relayed event.
#[derive(Deserialize)]
struct Followed<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    sequence_number: Option<u64>,
    output_index: Option<usize>,
    #[serde(borrow)]
    item: Option<FollowedItem<'a>>,
}

#[derive(Deserialize)]
struct FollowedItem<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
}

impl StreamEncoder {
    /// Notes a relayed upstream event's numbering: its sequence number and, for an item
    /// added, the item's id.
    pub fn follow(&mut self, data: &str) {
        let Ok(seen) = serde_json::from_str::<Followed<'_>>(data) else { return };
        let (ids, next) = &mut **self.followed.get_or_insert_with(Box::default);
        if let Some(n) = seen.sequence_number {
            *next = (*next).max(n + 1);
        }
        let id = seen.item.and_then(|item| item.id);
        if let (true, Some(i), Some(id)) =
            (seen.kind == "response.output_item.added", seen.output_index, id)
        {
            if ids.len() <= i {
                ids.resize(i + 1, None);
            }
            ids[i] = Some(id.into_owned());
        }
    }

    /// A continuation takes the relayed stream over: what it writes goes on with the
    /// upstream's sequence numbers and names the items the client knows by their ids.
    pub fn adopt_followed(&mut self) {
        let Some(followed) = self.followed.take() else { return };
        let (ids, next) = *followed;
        self.sequence = self.sequence.max(next);
        for (item, id) in self.items.iter_mut().zip(ids) {
            if let Some(id) = id {
                item.set_id(id);
            }
        }
    }

    pub fn new(meta: &ResponseMeta<'_>, context: ClientContext) -> Self {
        Self {
            id: String::new(),
            model: meta.model.to_owned(),
            created: meta.created,
            context,
            sequence: 0,
            started: false,
            items: Vec::new(),
            open_text: None,
            open_reasoning: None,
            signature: None,
            tools: Vec::new(),
            usage: Usage::default(),
            stop: None,
            ended: false,
            followed: None,
        }
    }

    pub fn encode(&mut self, event: &StreamEvent<'_>, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        match event {
            StreamEvent::Start { .. } => {
                self.ensure_started(out);
            }
            StreamEvent::Usage(usage) => self.usage = *usage,
            StreamEvent::TextDelta(text) => self.text_delta(text, out),
            StreamEvent::ThinkingDelta(text) => self.thinking_delta(text, out),
            StreamEvent::ThinkingSignature(signature) => {
                self.thinking_delta("", out);
                self.signature.get_or_insert_with(String::new).push_str(signature);
            }
            StreamEvent::RedactedThinking(data) => {
                self.ensure_started(out);
                self.close_text(out);
                self.close_reasoning(out);
                let n = self.items.len();
                self.items.push(ItemOut::Reasoning {
                    id: item_id("rs", &self.id, n),
                    summary: Vec::new(),
                    encrypted_content: Some(format!("{}{data}", super::REDACTED_PREFIX)),
                });
                self.item_event("response.output_item.added", n, out);
                self.item_event("response.output_item.done", n, out);
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                self.ensure_started(out);
                self.close_text(out);
                self.close_reasoning(out);
                let n = self.items.len();
                let item_id_prefix = if self.context.is_freeform(name) { "ctc" } else { "fc" };
                let item_id = item_id(item_id_prefix, &self.id, n);
                let (namespace, declared) = self.context.declared(name);
                let (namespace, declared) = (namespace.map(str::to_owned), declared.to_owned());
                self.items.push(if self.context.is_freeform(name) {
                    ItemOut::CustomToolCall {
                        id: item_id,
                        call_id: id.clone().into_owned(),
                        name: declared,
                        namespace,
                        input: String::new(),
                    }
                } else {
                    ItemOut::FunctionCall {
                        id: item_id,
                        call_id: id.clone().into_owned(),
                        name: declared,
                        namespace,
                        arguments: String::new(),
                        status: "in_progress",
                    }
                });
                let tool = usize::try_from(*index).unwrap_or(usize::MAX);
                if tool < self.tools.len() + 1024 {
                    if self.tools.len() <= tool {
                        self.tools.resize(tool + 1, None);
                    }
                    self.tools[tool] = Some((n, true));
                }
                self.item_event("response.output_item.added", n, out);
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                let tool = usize::try_from(*index).ok().and_then(|t| self.tools.get(t).copied());
                let Some(Some((n, true))) = tool else { return };
                match &mut self.items[n] {
                    ItemOut::FunctionCall { id, arguments: all, .. } => {
                        all.push_str(arguments);
                        let mut event = EventOut::new("response.function_call_arguments.delta");
                        event.item_id = Some(id.as_str());
                        event.output_index = Some(n);
                        event.delta = Some(arguments.as_ref());
                        write(out, &mut self.sequence, event);
                    }
                    // Held until the call closes; see the type's documentation.
                    ItemOut::CustomToolCall { input, .. } => input.push_str(arguments),
                    _ => {}
                }
            }
            StreamEvent::Finish { reason, .. } => {
                self.ensure_started(out);
                self.close_all(out);
                self.stop = Some(*reason);
            }
        }
    }

    /// `response.created` and `response.in_progress`, once, before anything else: the SDK's
    /// stream helper refuses any event before `response.created`.
    fn ensure_started(&mut self, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        self.id = response_id();
        for kind in ["response.created", "response.in_progress"] {
            let meta = ResponseMeta { model: &self.model, created: self.created };
            let mut event = EventOut::new(kind);
            event.response = Some(ResponseOut::new(&self.id, &meta, &[]));
            write(out, &mut self.sequence, event);
        }
    }

    fn item_event(&mut self, kind: &'static str, n: usize, out: &mut Vec<u8>) {
        let mut event = EventOut::new(kind);
        event.output_index = Some(n);
        event.item = Some(&self.items[n]);
        write(out, &mut self.sequence, event);
    }

    fn text_delta(&mut self, text: &str, out: &mut Vec<u8>) {
        self.ensure_started(out);
        self.close_reasoning(out);
        let n = if let Some(n) = self.open_text {
            n
        } else {
            let n = self.items.len();
            self.items.push(ItemOut::Message {
                id: item_id("msg", &self.id, n),
                status: "in_progress",
                role: "assistant",
                content: Vec::new(),
            });
            self.item_event("response.output_item.added", n, out);
            if let ItemOut::Message { id, content, .. } = &mut self.items[n] {
                content.push(TextPartOut::new(String::new()));
                let mut event = EventOut::new("response.content_part.added");
                event.item_id = Some(id.as_str());
                event.output_index = Some(n);
                event.content_index = Some(0);
                event.part = Some(PartOut::Text(&content[0]));
                write(out, &mut self.sequence, event);
            }
            self.open_text = Some(n);
            n
        };
        if let ItemOut::Message { id, content, .. } = &mut self.items[n] {
            content[0].text.push_str(text);
            let mut event = EventOut::new("response.output_text.delta");
            event.item_id = Some(id.as_str());
            event.output_index = Some(n);
            event.content_index = Some(0);
            event.delta = Some(text);
            event.logprobs = Some([]);
            write(out, &mut self.sequence, event);
        }
    }

    fn close_text(&mut self, out: &mut Vec<u8>) {
        let Some(n) = self.open_text.take() else { return };
        if let ItemOut::Message { id, content, status, .. } = &mut self.items[n] {
            *status = "completed";
            let part = &content[0];
            let mut event = EventOut::new("response.output_text.done");
            event.item_id = Some(id.as_str());
            event.output_index = Some(n);
            event.content_index = Some(0);
            event.text = Some(part.text.as_str());
            event.logprobs = Some([]);
            write(out, &mut self.sequence, event);
            let mut event = EventOut::new("response.content_part.done");
            event.item_id = Some(id.as_str());
            event.output_index = Some(n);
            event.content_index = Some(0);
            event.part = Some(PartOut::Text(part));
            write(out, &mut self.sequence, event);
        }
        self.item_event("response.output_item.done", n, out);
    }

    fn thinking_delta(&mut self, text: &str, out: &mut Vec<u8>) {
        self.ensure_started(out);
        self.close_text(out);
        let n = if let Some(n) = self.open_reasoning {
            n
        } else {
            let n = self.items.len();
            self.items.push(ItemOut::Reasoning {
                id: item_id("rs", &self.id, n),
                summary: Vec::new(),
                encrypted_content: None,
            });
            self.item_event("response.output_item.added", n, out);
            if let ItemOut::Reasoning { id, summary, .. } = &mut self.items[n] {
                summary.push(SummaryOut::new(String::new()));
                let mut event = EventOut::new("response.reasoning_summary_part.added");
                event.item_id = Some(id.as_str());
                event.output_index = Some(n);
                event.summary_index = Some(0);
                event.part = Some(PartOut::Summary(&summary[0]));
                write(out, &mut self.sequence, event);
            }
            self.open_reasoning = Some(n);
            self.signature = None;
            n
        };
        if text.is_empty() {
            return;
        }
        if let ItemOut::Reasoning { id, summary, .. } = &mut self.items[n] {
            summary[0].text.push_str(text);
            let mut event = EventOut::new("response.reasoning_summary_text.delta");
            event.item_id = Some(id.as_str());
            event.output_index = Some(n);
            event.summary_index = Some(0);
            event.delta = Some(text);
            write(out, &mut self.sequence, event);
        }
    }

    fn close_reasoning(&mut self, out: &mut Vec<u8>) {
        let Some(n) = self.open_reasoning.take() else { return };
        let signature = self.signature.take();
        if let ItemOut::Reasoning { id, summary, encrypted_content } = &mut self.items[n] {
            let part = &summary[0];
            if let Some(signature) = signature.filter(|s| !s.is_empty()) {
                *encrypted_content = Some(wrap_thinking(&part.text, &signature));
            }
            let mut event = EventOut::new("response.reasoning_summary_text.done");
            event.item_id = Some(id.as_str());
            event.output_index = Some(n);
            event.summary_index = Some(0);
            event.text = Some(part.text.as_str());
            write(out, &mut self.sequence, event);
            let mut event = EventOut::new("response.reasoning_summary_part.done");
            event.item_id = Some(id.as_str());
            event.output_index = Some(n);
            event.summary_index = Some(0);
            event.part = Some(PartOut::Summary(part));
            write(out, &mut self.sequence, event);
        }
        self.item_event("response.output_item.done", n, out);
    }

    fn close_tools(&mut self, out: &mut Vec<u8>) {
        for tool in 0..self.tools.len() {
            let Some((n, true)) = self.tools[tool] else { continue };
            self.tools[tool] = Some((n, false));
            match &mut self.items[n] {
                ItemOut::FunctionCall { id, name, arguments, status, .. } => {
                    *status = "completed";
                    let mut event = EventOut::new("response.function_call_arguments.done");
                    event.item_id = Some(id.as_str());
                    event.output_index = Some(n);
                    event.name = Some(name.as_str());
                    event.arguments = Some(arguments.as_str());
                    write(out, &mut self.sequence, event);
                }
                ItemOut::CustomToolCall { id, input, .. } => {
                    *input = freeform_input(input).into_owned();
                    if !input.is_empty() {
                        let mut event = EventOut::new("response.custom_tool_call_input.delta");
                        event.item_id = Some(id.as_str());
                        event.output_index = Some(n);
                        event.delta = Some(input.as_str());
                        write(out, &mut self.sequence, event);
                    }
                    let mut event = EventOut::new("response.custom_tool_call_input.done");
                    event.item_id = Some(id.as_str());
                    event.output_index = Some(n);
                    event.input = Some(input.as_str());
                    write(out, &mut self.sequence, event);
                }
                _ => {}
            }
            self.item_event("response.output_item.done", n, out);
        }
    }

    fn close_all(&mut self, out: &mut Vec<u8>) {
        self.close_text(out);
        self.close_reasoning(out);
        self.close_tools(out);
    }

    /// Closes what is open, then `response.completed`, or `response.incomplete` when the
    /// answer stopped at the output limit or a filter.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        self.ensure_started(out);
        self.close_all(out);
        self.ended = true;
        let (status, reason) = status_of(self.stop);
        let meta = ResponseMeta { model: &self.model, created: self.created };
        let mut response = ResponseOut::new(&self.id, &meta, &self.items);
        response.status = status;
        response.incomplete_details = reason.map(|reason| IncompleteOut { reason });
        response.usage = Some(UsageOut::new(&self.usage));
        let kind = if status == "completed" { "response.completed" } else { "response.incomplete" };
        let mut event = EventOut::new(kind);
        event.response = Some(response);
        write(out, &mut self.sequence, event);
    }

    /// `response.failed` with the error, and nothing after it: Codex reads
    /// `response.error.code` to decide whether to retry, and the SDKs never see `completed`.
    pub fn fail(&mut self, kind: ErrorKind, message: &str, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        self.ensure_started(out);
        self.ended = true;
        let meta = ResponseMeta { model: &self.model, created: self.created };
        let mut response = ResponseOut::new(&self.id, &meta, &self.items);
        response.status = "failed";
        response.error = Some(ErrorOut { code: failed_code(kind), message });
        response.usage = Some(UsageOut::new(&self.usage));
        let mut event = EventOut::new("response.failed");
        event.response = Some(response);
        write(out, &mut self.sequence, event);
    }

    pub fn keep_alive(out: &mut Vec<u8>) {
        write_comment(out, "keep-alive");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const META: ResponseMeta<'static> = ResponseMeta { model: "served", created: 5 };

    fn events(out: &[u8]) -> Vec<serde_json::Value> {
        String::from_utf8(out.to_vec())
            .unwrap()
            .split("\n\n")
            .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    #[test]
    fn sequence_numbers_rise_by_one_from_zero_and_the_stream_opens_with_created() {
        let mut encoder = StreamEncoder::new(&META, ClientContext::default());
        let mut out = Vec::new();
        encoder.encode(&StreamEvent::Start { id: "x".into(), model: "m".into() }, &mut out);
        encoder.encode(&StreamEvent::TextDelta("hi".into()), &mut out);
        encoder.encode(
            &StreamEvent::Finish { reason: StopReason::EndTurn, stop_sequence: None },
            &mut out,
        );
        encoder.finish(&mut out);
        let events = events(&out);
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed"
            ]
        );
        for (n, event) in events.iter().enumerate() {
            assert_eq!(event["sequence_number"], n);
        }
        assert_eq!(events[8]["response"]["output"][0]["content"][0]["text"], "hi");
    }

    #[test]
    fn a_break_after_the_first_byte_is_response_failed_and_never_completed() {
        let mut encoder = StreamEncoder::new(&META, ClientContext::default());
        let mut out = Vec::new();
        encoder.encode(&StreamEvent::TextDelta("par".into()), &mut out);
        encoder.fail(ErrorKind::Timeout, "stalled", &mut out);
        encoder.finish(&mut out);
        let events = events(&out);
        let last = events.last().unwrap();
        assert_eq!(last["type"], "response.failed");
        assert_eq!(last["response"]["status"], "failed");
        assert_eq!(last["response"]["error"]["code"], "server_error");
        assert!(events.iter().all(|e| e["type"] != "response.completed"));
    }

    #[test]
    fn the_output_limit_ends_the_stream_with_response_incomplete() {
        let mut encoder = StreamEncoder::new(&META, ClientContext::default());
        let mut out = Vec::new();
        encoder.encode(&StreamEvent::TextDelta("a".into()), &mut out);
        encoder.encode(
            &StreamEvent::Finish { reason: StopReason::MaxTokens, stop_sequence: None },
            &mut out,
        );
        encoder.finish(&mut out);
        let last = events(&out).pop().unwrap();
        assert_eq!(last["type"], "response.incomplete");
        assert_eq!(last["response"]["incomplete_details"]["reason"], "max_output_tokens");
    }

    #[test]
    fn a_custom_tool_call_streamed_by_an_upstream_decodes_to_input_arguments() {
        let mut decoder = StreamDecoder::default();
        let mut arguments = String::new();
        let events = [
            r#"{"type":"response.created","response":{"id":"resp_1","model":"gpt"}}"#,
            r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"custom_tool_call","id":"ctc","call_id":"c","name":"apply_patch","input":""}}"#,
            r#"{"type":"response.custom_tool_call_input.delta","output_index":0,"item_id":"ctc","delta":"a\"b\n"}"#,
            r#"{"type":"response.custom_tool_call_input.delta","output_index":0,"item_id":"ctc","delta":"c"}"#,
            r#"{"type":"response.output_item.done","output_index":0,"item":{"type":"custom_tool_call","id":"ctc","call_id":"c","name":"apply_patch","input":"a\"b\nc"}}"#,
            r#"{"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":{"input_tokens":1,"output_tokens":2}}}"#,
        ];
        let mut finish = None;
        for data in events {
            let event = SseEvent { event: None, data, id: None };
            decoder
                .decode(&event, &mut |e| match e {
                    StreamEvent::ToolCallDelta { arguments: a, .. } => arguments.push_str(&a),
                    StreamEvent::Finish { reason, .. } => finish = Some(reason),
                    _ => {}
                })
                .unwrap();
        }
        assert_eq!(arguments, r#"{"input":"a\"b\nc"}"#);
        assert_eq!(finish, Some(StopReason::ToolUse));
        assert!(decoder.status().finish_seen);
    }

    #[test]
    fn a_failed_response_is_an_upstream_error_with_its_code() {
        let mut decoder = StreamDecoder::default();
        let data = r#"{"type":"response.failed","response":{"id":"r","status":"failed","error":{"code":"rate_limit_exceeded","message":"slow down"}}}"#;
        let error =
            decoder.decode(&SseEvent { event: None, data, id: None }, &mut |_| {}).unwrap_err();
        let ProviderError::UpstreamStream { error, .. } = error else { panic!("{error}") };
        assert_eq!(error.code.as_deref(), Some("rate_limit_exceeded"));
        assert_eq!(crate::stream::error_status(&error), 429);
    }
}
