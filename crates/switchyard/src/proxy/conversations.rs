//! The conversations behind `previous_response_id` (Responses API, docs/clients.md).
//!
//! Every answer this process gives a Responses client, passthrough included and whatever the
//! client said about `store`, is kept here under its response id and the local key that asked
//! for it (another key's response is unknown to you), so a request that continues
//! it can go to any target: the credential whose upstream kept the response may take the
//! client's bytes as they are, anyone else gets the conversation expanded into `input`.
//!
//! Invariants:
//! - An entry holds the whole conversation up to and including its response, as input items
//!   (the input of the request that led to it, already expanded, then the response's output):
//!   a chain of `previous_response_id`s is expanded completely from one entry.
//! - Only answers that ended properly are kept (`response.completed`, `response.incomplete`);
//!   a broken or abandoned stream leaves nothing behind.
//! - Ids of answers this router made are its own, 128 random bits (never the upstream's: a
//!   local server's `chatcmpl-7` repeats); a passthrough answer keeps its upstream's id.
//! - Bounded by count and by bytes; the oldest entry goes first. An entry larger than the whole
//!   byte budget is not kept. Nothing survives a restart.
//! - Each distinct item is kept once, however many entries hold it: a conversation's every turn
//!   repeats all of its earlier items (Codex sends the whole conversation each time), so its
//!   entries share them, and the bytes counted are each entry's id and each distinct item once.
//!   A session of N turns holds its conversation once, not N times; an
//!   answer's items at most twice, as kept here and as the client writes them back.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;

use axum::http::StatusCode;
use bytes::Bytes;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use switchyard_core::CredentialKey;
use switchyard_providers::sse::{SseDecoder, SseItem};

use super::refusal::ApiError;

/// How many responses are kept at most.
pub(crate) const MAX_RESPONSES: usize = 1_000;
/// How many bytes of conversation are kept at most, over all responses, each distinct item
/// counted once. Every Codex turn is kept (a Responses client may continue any of them) and
/// carries the whole conversation, whose earlier items its entries share: 16 MiB is what a tray
/// app may hold for it, a long session's conversation or several.
pub(crate) const MAX_BYTES: usize = 16 * 1024 * 1024;

/// The field a continuing request names its predecessor in.
const PREVIOUS: &str = "previous_response_id";

/// The bounded store of recent Responses conversations, shared by every request.
#[derive(Debug)]
pub(crate) struct Conversations {
    max_responses: usize,
    max_bytes: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<Id, Arc<Entry>>,
    /// Ids in the order they were kept, oldest first.
    order: VecDeque<Id>,
    /// Every item the entries hold, once, with how many times they hold it.
    items: FxHashMap<Arc<str>, usize>,
    /// The entries' ids and the distinct items' bytes.
    bytes: usize,
}

impl Inner {
    /// `item` as the entries share it: the one already kept, or a new one.
    fn hold(&mut self, item: &str) -> Arc<str> {
        if let Some(held) = self.items.get_mut(item) {
            *held += 1;
            let (kept, _) = self.items.get_key_value(item).expect("just found");
            return Arc::clone(kept);
        }
        let kept: Arc<str> = Arc::from(item);
        self.bytes += kept.len();
        self.items.insert(Arc::clone(&kept), 1);
        kept
    }

    /// Lets go of one hold on `item`; the last one takes it out of the count.
    fn release(&mut self, item: &str) {
        let Some(held) = self.items.get_mut(item) else { return };
        *held -= 1;
        if *held == 0 {
            self.items.remove(item);
            self.bytes -= item.len();
        }
    }

    /// Takes entry `id` out (a request still reading it keeps its copy until it is done).
    fn remove(&mut self, id: &Id) {
        let Some(old) = self.entries.remove(id) else { return };
        self.bytes -= id.response.len();
        for item in &old.items {
            self.release(item);
        }
    }
}

/// Whose response, and which: the local key that was answered (none when the server asks for
/// no key) and the response id it was given.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Id {
    owner: Option<Arc<str>>,
    response: String,
}

#[derive(Debug)]
struct Entry {
    /// The conversation's input items, each a JSON value as written (shared with the other
    /// entries that hold it): continuing it splices them in front of the new input without
    /// parsing them again.
    items: Vec<Arc<str>>,
    /// The passthrough upstream that answered, when one did.
    served: Option<Served>,
}

/// The upstream that answered a response from the client's own bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Served {
    credential: CredentialKey,
    /// The client left `store` on: that upstream keeps the response too.
    upstream_stored: bool,
}

impl Default for Conversations {
    fn default() -> Self {
        Self::new(MAX_RESPONSES, MAX_BYTES)
    }
}

impl Conversations {
    pub(crate) fn new(max_responses: usize, max_bytes: usize) -> Self {
        Self { max_responses, max_bytes, inner: Mutex::default() }
    }

    /// How many responses are kept, and their size in bytes.
    #[cfg(test)]
    fn usage(&self) -> (usize, usize) {
        let inner = self.inner.lock();
        (inner.entries.len(), inner.bytes)
    }

    fn get(&self, id: &Id) -> Option<Arc<Entry>> {
        self.inner.lock().entries.get(id).cloned()
    }

    /// Keeps response `id`'s conversation, `items`, evicting the oldest entries while the store
    /// is over its bounds. One that could not fit alone is not kept, and evicts nothing.
    fn keep(&self, id: Id, items: &[Cow<'_, str>], served: Option<Served>) {
        let size = id.response.len() + items.iter().map(|i| i.len()).sum::<usize>();
        if size > self.max_bytes || self.max_responses == 0 {
            tracing::debug!(
                id = id.response,
                size,
                "a response too large for the conversation store"
            );
            return;
        }
        let mut inner = self.inner.lock();
        if inner.entries.contains_key(&id) {
            inner.remove(&id);
            inner.order.retain(|kept| kept != &id);
        }
        let items = items.iter().map(|item| inner.hold(item)).collect();
        inner.bytes += id.response.len();
        inner.order.push_back(id.clone());
        inner.entries.insert(id, Arc::new(Entry { items, served }));
        // The newest entry fits alone (checked above), so it is never the one evicted.
        while inner.entries.len() > self.max_responses || inner.bytes > self.max_bytes {
            let Some(oldest) = inner.order.pop_front() else { break };
            inner.remove(&oldest);
        }
    }

    /// A Responses request's place in its conversation, for the local key `owner`. `Err` is
    /// the client's 400: the previous response is unknown to this key, or the input cannot be
    /// put after it.
    pub(crate) fn turn(&self, body: &Bytes, owner: Option<&Arc<str>>) -> Result<Turn, ApiError> {
        let owner = owner.cloned();
        // A body this cannot read is refused by the request parser, with a better message.
        let Ok(head) = serde_json::from_slice::<Head<'_>>(body) else {
            return Ok(Turn { body: body.clone(), owner, sticky: None, upstream_store: true });
        };
        let upstream_store = head.store != Some(false);
        let Some(response) = head.previous_response_id else {
            return Ok(Turn { body: body.clone(), owner, sticky: None, upstream_store });
        };
        let id = Id { owner, response: response.into_owned() };
        let Some(entry) = self.get(&id) else {
            return Err(self.unknown(&id.response));
        };
        let expanded = expand(body, &entry.items, head.input).map_err(|message| {
            let mut error = ApiError::bad_request(format!("input: {message}"));
            error.param = Some("input");
            error
        })?;
        let sticky =
            entry.served.as_ref().filter(|s| s.upstream_stored).map(|s| s.credential.clone());
        Ok(Turn { body: Bytes::from(expanded), owner: id.owner, sticky, upstream_store })
    }

    fn unknown(&self, id: &str) -> ApiError {
        let mut error = ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            format!(
                "{PREVIOUS}: response \"{id}\" is unknown to this Switchyard: it was not answered \
                 through it for this local API key, has left its store of recent responses (the last {} responses, {} MiB \
                 at most), or is from before a restart. Send the whole conversation in `input` \
                 and leave out `{PREVIOUS}`",
                self.max_responses,
                self.max_bytes / (1024 * 1024),
            ),
        );
        error.param = Some(PREVIOUS);
        error.detail = Some(serde_json::json!({ "field": PREVIOUS }));
        error
    }
}

/// What of a Responses body this module reads.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow, default)]
    previous_response_id: Option<Cow<'a, str>>,
    #[serde(default)]
    store: Option<bool>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
}

/// One Responses request, placed in its conversation.
#[derive(Debug)]
pub(crate) struct Turn {
    /// The body to route: the client's own, or, when it continues a previous response, with
    /// that conversation's items before its `input` and `previous_response_id` left out.
    pub body: Bytes,
    /// The local key asking: its answers are kept for it alone.
    owner: Option<Arc<str>>,
    /// The credential whose upstream keeps the previous response: only it may be sent the
    /// client's own bytes, `previous_response_id` and all.
    pub sticky: Option<CredentialKey>,
    /// The client did not say `store: false`: an upstream given its bytes keeps the answer.
    pub upstream_store: bool,
}

impl Turn {
    /// What keeps the answer of one attempt, once it is complete. `passthrough` is the
    /// credential that was sent the client's bytes, when one was.
    pub(crate) fn pending(
        &self,
        store: &Arc<Conversations>,
        passthrough: Option<CredentialKey>,
    ) -> Pending {
        Pending {
            store: Arc::clone(store),
            owner: self.owner.clone(),
            body: self.body.clone(),
            served: passthrough
                .map(|credential| Served { credential, upstream_stored: self.upstream_store }),
        }
    }
}

/// An attempt's answer, to be kept once it is known to be complete.
#[derive(Debug)]
pub(crate) struct Pending {
    store: Arc<Conversations>,
    owner: Option<Arc<str>>,
    /// The routed body: its `input` is the whole conversation before this answer.
    body: Bytes,
    served: Option<Served>,
}

impl Pending {
    /// A whole (non-streamed) Responses answer, as the client got it.
    pub(crate) fn answered(self, body: &[u8]) {
        let Ok(response) = serde_json::from_slice::<ResponseHead<'_>>(body) else { return };
        let finished =
            response.status.as_deref().is_none_or(|s| s == "completed" || s == "incomplete");
        if finished {
            self.keep(&response.id, response.output.unwrap_or_default().iter().map(|i| i.get()));
        }
    }

    /// Watches a Responses stream on its way to the client.
    pub(crate) fn tap(self) -> Tap {
        let cap = self.store.max_bytes;
        Tap {
            pending: self,
            sse: SseDecoder::new(cap),
            items: BTreeMap::new(),
            held: 0,
            last: None,
            over_cap: false,
        }
    }

    fn keep<'i>(self, id: &str, output: impl Iterator<Item = &'i str>) {
        let Ok(head) = serde_json::from_slice::<Head<'_>>(&self.body) else { return };
        let Ok(mut items) = input_items(head.input) else { return };
        for item in output {
            items.push(without_id(item));
        }
        let id = Id { owner: self.owner, response: id.to_owned() };
        self.store.keep(id, &items, self.served);
    }
}

/// A response as its `id`, `status` and `output`.
#[derive(Deserialize)]
struct ResponseHead<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow, default)]
    status: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    output: Option<Vec<&'a RawValue>>,
}

/// A stream event as far as this module cares.
#[derive(Deserialize)]
struct EventHead<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    output_index: Option<usize>,
    #[serde(borrow, default)]
    item: Option<&'a RawValue>,
    #[serde(borrow, default)]
    response: Option<ResponseHead<'a>>,
}

/// Reads a Responses stream as the client gets it, for the items it ends with. It holds no
/// more than the store could keep: once the items (or one event) outgrow the store's byte
/// budget, they are let go and the answer will not be kept.
#[derive(Debug)]
pub(crate) struct Tap {
    pending: Pending,
    sse: SseDecoder,
    /// `response.output_item.done` items by output index: the answer, should the final event
    /// not repeat its output.
    items: BTreeMap<usize, String>,
    /// Bytes in `items`.
    held: usize,
    /// The final event's response id and output.
    last: Option<(String, Vec<String>)>,
    /// The answer outgrew the store: nothing is read or kept any more.
    over_cap: bool,
}

impl Tap {
    /// Bytes sent to the client.
    pub(crate) fn observe(&mut self, chunk: &[u8]) {
        if self.over_cap {
            return;
        }
        self.sse.push(chunk);
        while let Some(item) = self.sse.next_item() {
            let event = match item {
                Ok(SseItem::Event(event)) => event,
                Ok(_) => continue,
                Err(_) => {
                    self.let_go();
                    return;
                }
            };
            // Deltas are most of a stream: only the events that carry whole items are read.
            let data = event.data;
            let wanted = ["response.output_item.done", "response.completed", "response.incomplete"];
            if !wanted.iter().any(|kind| data.contains(kind)) {
                continue;
            }
            let Ok(event) = serde_json::from_str::<EventHead<'_>>(data) else { continue };
            match event.kind.as_ref() {
                "response.output_item.done" => {
                    if let (Some(n), Some(item)) = (event.output_index, event.item) {
                        self.held += item.get().len();
                        if let Some(old) = self.items.insert(n, item.get().to_owned()) {
                            self.held -= old.len();
                        }
                    }
                }
                "response.completed" | "response.incomplete" => {
                    if let Some(response) = event.response {
                        let output = response.output.unwrap_or_default();
                        let output = output.iter().map(|i| i.get().to_owned()).collect();
                        self.last = Some((response.id.into_owned(), output));
                    }
                }
                _ => {}
            }
            if self.held > self.pending.store.max_bytes {
                self.let_go();
                return;
            }
        }
    }

    /// The answer is larger than the store's whole budget: it could not be kept anyway.
    fn let_go(&mut self) {
        tracing::debug!("a streamed response too large for the conversation store");
        self.over_cap = true;
        self.sse = SseDecoder::new(0);
        self.items = BTreeMap::new();
        self.held = 0;
        self.last = None;
    }

    /// The stream ended properly: keep its answer.
    pub(crate) fn complete(self) {
        if self.over_cap {
            return;
        }
        let Some((id, output)) = self.last else { return };
        let output = if output.is_empty() { self.items.into_values().collect() } else { output };
        self.pending.keep(&id, output.iter().map(String::as_str));
    }
}

/// `input`'s items, each as written: a string is one user message.
fn input_items(input: Option<&RawValue>) -> Result<Vec<Cow<'_, str>>, String> {
    let Some(input) = input.filter(|i| i.get() != "null") else { return Ok(Vec::new()) };
    let text = input.get();
    if text.starts_with('"') {
        return Ok(vec![Cow::Owned(format!(
            r#"{{"type":"message","role":"user","content":{text}}}"#
        ))]);
    }
    let items: Vec<&RawValue> = serde_json::from_str(text)
        .map_err(|_| "expected a string or an array of input items".to_owned())?;
    Ok(items.into_iter().map(|i| Cow::Borrowed(i.get())).collect())
}

/// An output item as an input item: without its `id`. An upstream told `store: false` refuses
/// ids of items it never kept, and ids this router made up mean nothing to anyone.
fn without_id(item: &str) -> Cow<'_, str> {
    match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(item) {
        Ok(mut object) => match object.remove("id") {
            Some(_) => Cow::Owned(serde_json::Value::Object(object).to_string()),
            None => Cow::Borrowed(item),
        },
        Err(_) => Cow::Borrowed(item),
    }
}

/// `body` with `history` before the items of its `input`, and without `previous_response_id`.
/// Every other member is written as the client wrote it.
fn expand(body: &[u8], history: &[Arc<str>], input: Option<&RawValue>) -> Result<Vec<u8>, String> {
    let members: Members<'_> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let new = input_items(input)?;
    let items = history.iter().map(|i| &**i).chain(new.iter().map(|i| &**i));
    let size = history.iter().map(|i| i.len() + 1).sum::<usize>()
        + new.iter().map(|i| i.len() + 1).sum::<usize>();
    let mut conversation = String::with_capacity(size + 2);
    conversation.push('[');
    for (n, item) in items.enumerate() {
        if n > 0 {
            conversation.push(',');
        }
        conversation.push_str(item);
    }
    conversation.push(']');
    let mut out = Vec::with_capacity(body.len() + conversation.len());
    out.push(b'{');
    let mut first = true;
    let mut member = |out: &mut Vec<u8>, key: &str, value: &str| {
        if !first {
            out.push(b',');
        }
        first = false;
        serde_json::to_writer(&mut *out, key).expect("writing to memory cannot fail");
        out.push(b':');
        out.extend_from_slice(value.as_bytes());
    };
    let mut placed = false;
    for (key, value) in &members.0 {
        match key.as_ref() {
            PREVIOUS => {}
            "input" => {
                member(&mut out, key, &conversation);
                placed = true;
            }
            _ => member(&mut out, key, value.get()),
        }
    }
    if !placed {
        member(&mut out, "input", &conversation);
    }
    out.push(b'}');
    Ok(out)
}

/// A JSON object's members in the order written, values as they were written.
struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    members.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn body(value: &Value) -> Bytes {
        Bytes::from(serde_json::to_vec(value).unwrap())
    }

    fn answer(id: &str, text: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({"id": id, "object": "response", "status": "completed",
            "output": [{"id": "msg_1", "type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": text}]}]}))
        .unwrap()
    }

    /// Answers `request` with `text` as response `id`, translated (no passthrough).
    fn answered(store: &Arc<Conversations>, request: &Value, id: &str, text: &str) -> Turn {
        let turn = store.turn(&body(request), None).unwrap();
        turn.pending(store, None).answered(&answer(id, text));
        turn
    }

    fn unowned(response: &str) -> Id {
        Id { owner: None, response: response.to_owned() }
    }

    fn input_of(turn: &Turn) -> Value {
        serde_json::from_slice::<Value>(&turn.body).unwrap()["input"].clone()
    }

    #[test]
    fn a_chain_of_responses_expands_to_the_whole_conversation() {
        let store = Arc::new(Conversations::default());
        answered(&store, &json!({"model": "m", "input": "one"}), "resp_1", "first");
        answered(
            &store,
            &json!({"model": "m", "previous_response_id": "resp_1", "input": "two"}),
            "resp_2",
            "second",
        );
        let third = store
            .turn(
                &body(&json!({"model": "m", "instructions": "be brief",
                "previous_response_id": "resp_2",
                "input": [{"role": "user", "content": "three"}]})),
                None,
            )
            .unwrap();
        let expanded: Value = serde_json::from_slice(&third.body).unwrap();
        assert_eq!(expanded.get(PREVIOUS), None);
        assert_eq!(expanded["instructions"], "be brief", "other members are kept");
        let said = |text: &str| json!({"type": "message", "role": "user", "content": text});
        let answered = |text: &str| {
            json!({"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": text}]})
        };
        assert_eq!(
            expanded["input"],
            json!([said("one"), answered("first"), said("two"), answered("second"),
                {"role": "user", "content": "three"}]),
            "every turn, in order, output ids left out"
        );
        assert_eq!(third.sticky, None, "translated answers stick to no credential");
    }

    #[test]
    fn an_unknown_id_is_refused_naming_the_field_and_the_fix() {
        let store = Conversations::default();
        let error = store
            .turn(&body(&json!({"model": "m", "previous_response_id": "resp_x"})), None)
            .unwrap_err();
        assert_eq!(error.status, StatusCode::BAD_REQUEST);
        assert_eq!(error.param, Some(PREVIOUS));
        assert!(error.message.starts_with("previous_response_id: response \"resp_x\" is unknown"));
        assert!(
            error.message.contains("Send the whole conversation in `input`"),
            "{}",
            error.message
        );
    }

    #[test]
    fn a_response_is_known_only_to_the_local_key_it_answered() {
        let store = Arc::new(Conversations::default());
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("key-a"), Arc::from("key-b"));
        let turn = store.turn(&body(&json!({"model": "m", "input": "secret"})), Some(&a)).unwrap();
        turn.pending(&store, None).answered(&answer("resp_1", "kept for a"));
        let next = json!({"model": "m", "previous_response_id": "resp_1", "input": "more"});
        let continued = store.turn(&body(&next), Some(&a)).unwrap();
        assert_eq!(input_of(&continued)[0]["content"], "secret");
        for other in [Some(&b), None] {
            let error = store.turn(&body(&next), other).unwrap_err();
            assert_eq!(error.param, Some(PREVIOUS), "{other:?}");
        }
        // b answered under the same id keeps its own conversation; a's is untouched.
        let turn = store.turn(&body(&json!({"model": "m", "input": "b's"})), Some(&b)).unwrap();
        turn.pending(&store, None).answered(&answer("resp_1", "kept for b"));
        assert_eq!(input_of(&store.turn(&body(&next), Some(&a)).unwrap())[0]["content"], "secret");
        assert_eq!(input_of(&store.turn(&body(&next), Some(&b)).unwrap())[0]["content"], "b's");
    }

    #[test]
    fn the_oldest_response_leaves_first_when_the_count_is_reached() {
        let store = Arc::new(Conversations::new(2, MAX_BYTES));
        for n in 1..=3 {
            answered(&store, &json!({"model": "m", "input": "q"}), &format!("resp_{n}"), "a");
        }
        assert_eq!(store.usage().0, 2);
        assert!(store.get(&unowned("resp_1")).is_none());
        assert!(store.get(&unowned("resp_2")).is_some() && store.get(&unowned("resp_3")).is_some());
    }

    #[test]
    fn the_oldest_responses_leave_first_when_the_bytes_are_reached_and_a_huge_one_is_not_kept() {
        let store = Arc::new(Conversations::new(100, 400));
        for (n, letter) in ["x", "y", "z"].into_iter().enumerate() {
            let (text, id) = (letter.repeat(100), format!("resp_{}", n + 1));
            answered(&store, &json!({"model": "m", "input": text}), &id, letter);
        }
        let (count, bytes) = store.usage();
        assert!(bytes <= 400, "{bytes}");
        assert_eq!(count, 1, "each entry is over 200 bytes");
        assert!(store.get(&unowned("resp_3")).is_some(), "the newest stays");
        answered(&store, &json!({"model": "m", "input": "w".repeat(500)}), "resp_big", "a");
        assert!(store.get(&unowned("resp_big")).is_none());
        assert!(
            store.get(&unowned("resp_3")).is_some(),
            "nothing is evicted for an entry that cannot fit"
        );
    }

    #[test]
    fn a_conversation_resent_whole_each_turn_is_kept_once() {
        // As Codex sends it with `store: false`: every turn is the whole conversation so far.
        let store = Arc::new(Conversations::default());
        let said = |n: usize| json!({"type": "message", "role": "user", "content": format!("{n} {}", "x".repeat(1000))});
        let answer = |n: usize| {
            json!({"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": format!("answer {n}")}]})
        };
        let mut conversation = Vec::new();
        for n in 1..=20 {
            conversation.push(said(n));
            let request = json!({"model": "m", "store": false, "input": conversation});
            answered(&store, &request, &format!("resp_{n}"), &format!("answer {n}"));
            conversation.push(answer(n));
        }
        let (count, bytes) = store.usage();
        assert_eq!(count, 20, "every turn is kept");
        let once: usize = conversation.iter().map(|item| item.to_string().len()).sum::<usize>()
            + (1..=20).map(|n| format!("resp_{n}").len()).sum::<usize>();
        assert_eq!(bytes, once, "each item counted once, not once per turn that repeats it");
        let first_turn_items = store.get(&unowned("resp_1")).unwrap().items.clone();
        let last_turn_items = store.get(&unowned("resp_20")).unwrap().items.clone();
        assert!(Arc::ptr_eq(&first_turn_items[0], &last_turn_items[0]), "held once in memory");

        // Each turn still expands to its own conversation, and evicting old turns frees
        // only what no newer turn holds.
        let next = store
            .turn(
                &body(&json!({"model": "m", "previous_response_id": "resp_20", "input": "more"})),
                None,
            )
            .unwrap();
        let mut expected = conversation.clone();
        expected.push(json!({"type": "message", "role": "user", "content": "more"}));
        assert_eq!(input_of(&next), Value::Array(expected));
        let small = Conversations::new(1, MAX_BYTES);
        let small = Arc::new(small);
        answered(&small, &json!({"model": "m", "input": [said(1)]}), "resp_a", "a");
        answered(&small, &json!({"model": "m", "input": [said(1), said(2)]}), "resp_b", "b");
        let kept = small.get(&unowned("resp_b")).unwrap();
        let held: usize = kept.items.iter().map(|i| i.len()).sum();
        assert_eq!(small.usage(), (1, held + "resp_b".len()), "resp_a's own answer left with it");
    }

    #[test]
    fn a_stream_larger_than_the_store_is_let_go_as_it_arrives() {
        let store = Arc::new(Conversations::new(100, 4096));
        let turn = store.turn(&body(&json!({"model": "m", "input": "q"})), None).unwrap();
        let mut tap = turn.pending(&store, None).tap();
        let done = |n: usize| {
            let item = json!({"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "x".repeat(1000)}]});
            let event =
                json!({"type": "response.output_item.done", "output_index": n, "item": item});
            format!("data: {event}\n\n")
        };
        for n in 0..3 {
            tap.observe(done(n).as_bytes());
        }
        assert!(!tap.over_cap && tap.held > 3000, "three items fit");
        for n in 3..50 {
            tap.observe(done(n).as_bytes());
            assert!(tap.held <= 4096 && tap.items.len() <= 4, "{n}: {}", tap.held);
        }
        assert!(tap.over_cap);
        let end =
            json!({"type": "response.completed", "response": {"id": "resp_big", "output": []}});
        tap.observe(format!("data: {end}\n\n").as_bytes());
        tap.complete();
        assert!(store.get(&unowned("resp_big")).is_none());

        // One event larger than the budget is let go too, without being buffered whole.
        let mut tap = turn.pending(&store, None).tap();
        tap.observe(b"data: {\"type\":\"response.completed\",\"response\":{\"output\":[\"");
        for _ in 0..10 {
            tap.observe("y".repeat(1000).as_bytes());
        }
        assert!(tap.over_cap);
    }

    #[test]
    fn a_passthrough_answer_sticks_to_its_credential_unless_the_upstream_was_told_not_to_store() {
        let store = Arc::new(Conversations::default());
        let key = CredentialKey { provider: "rs".into(), credential: "rs-2".into() };
        for (store_flag, id, sticky) in
            [(json!(null), "resp_a", Some(key.clone())), (json!(false), "resp_b", None)]
        {
            let turn = store
                .turn(&body(&json!({"model": "m", "input": "q", "store": store_flag})), None)
                .unwrap();
            turn.pending(&store, Some(key.clone())).answered(&answer(id, "a"));
            let next = store
                .turn(&body(&json!({"model": "m", "input": "r", "previous_response_id": id})), None)
                .unwrap();
            assert_eq!(next.sticky, sticky, "{id}");
        }
    }

    #[test]
    fn a_stream_is_kept_from_its_final_event_and_only_when_it_completes() {
        let store = Arc::new(Conversations::default());
        let turn = store.turn(&body(&json!({"model": "m", "input": "q"})), None).unwrap();
        let events = concat!(
            "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_s\",\"output\":[]}}\n\n",
            "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,",
            "\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\",\"arguments\":\"{}\"}}\n\n",
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_s\",\"status\":\"completed\",\"output\":[]}}\n\n",
        );
        let mut broken = turn.pending(&store, None).tap();
        broken.observe(&events.as_bytes()[..120]);
        drop(broken);
        assert!(store.get(&unowned("resp_s")).is_none(), "a broken stream leaves nothing");
        let mut tap = turn.pending(&store, None).tap();
        for chunk in events.as_bytes().chunks(7) {
            tap.observe(chunk);
        }
        tap.complete();
        let next = store
            .turn(
                &body(&json!({"model": "m", "previous_response_id": "resp_s",
                "input": [{"type": "function_call_output", "call_id": "c", "output": "1"}]})),
                None,
            )
            .unwrap();
        assert_eq!(
            input_of(&next),
            json!([{"type": "message", "role": "user", "content": "q"},
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c", "output": "1"}])
        );
    }
}
