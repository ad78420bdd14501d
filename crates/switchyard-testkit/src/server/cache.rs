//! A prompt cache per credential, as providers keep one: a prompt prefix this key was sent
//! before is read from the cache, the rest is written to it. Off until a test turns it on
//! ([`MockUpstream::cache_prompts`](super::MockUpstream::cache_prompts)), so usage figures
//! elsewhere stay the plain estimate.
//!
//! Two rules, as the providers have them:
//!
//! - **Automatic** (OpenAI Chat and Responses, Gemini): a prompt is its blocks in order (the
//!   tools, the system prompt, then each message or input item, as JSON, the order chat
//!   templates render); a prefix is cached when this credential was sent a prompt that began
//!   with the same blocks. What a request reads is its longest cached prefix, in tokens of four
//!   bytes, the way every provider counts what it read.
//! - **Anthropic's**: nothing is cached unless the request marks it. A prompt is its blocks in
//!   Anthropic's order (each tool, each system block, each content block of each message), each
//!   hashed without its `cache_control`, so a breakpoint that moves to a later turn still finds
//!   the prefix an earlier one wrote. Each breakpoint (a block with `cache_control`) writes the
//!   prefix that ends there; a request reads the longest cached prefix ending at a breakpoint or
//!   at most [`LOOKBACK`] blocks before one. Written is what lies between what was read and the
//!   last breakpoint; the rest is plain input.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash as _, Hasher as _};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use crate::dialect::Dialect;

#[derive(Debug, Default)]
pub(crate) struct PromptCache {
    on: AtomicBool,
    /// Per credential: the hashes of every prefix it has cached.
    prefixes: Mutex<HashMap<String, HashSet<u64>>>,
}

/// What one request's prompt did to the cache, in tokens: read from it, written to it as a
/// reported cache write (Anthropic's `cache_creation_input_tokens`), and plain input (what an
/// automatic cache wrote without saying so, and what lies past Anthropic's last breakpoint).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cached {
    pub read: u64,
    pub written: u64,
    pub fresh: u64,
}

impl PromptCache {
    pub(crate) fn turn_on(&self) {
        self.on.store(true, Ordering::Relaxed);
    }

    /// Reads and writes `request`'s prompt on `credential`'s cache; `None` while it is off.
    pub(crate) fn serve(
        &self,
        credential: &str,
        dialect: Dialect,
        request: &Value,
    ) -> Option<Cached> {
        if !self.on.load(Ordering::Relaxed) {
            return None;
        }
        let mut prefixes = self.prefixes.lock().expect("never poisoned");
        let cached = prefixes.entry(credential.to_owned()).or_default();
        if dialect == Dialect::Anthropic {
            return Some(anthropic(cached, request));
        }
        let blocks = blocks(dialect, request);
        let mut hasher = DefaultHasher::new();
        let mut tokens = Cached::default();
        let mut reading = true;
        for block in &blocks {
            block.hash(&mut hasher);
            let hash = hasher.finish();
            let size = u64::try_from(block.len().div_ceil(4)).unwrap_or(u64::MAX);
            if reading && cached.contains(&hash) {
                tokens.read += size;
            } else {
                reading = false;
                tokens.fresh += size;
                cached.insert(hash);
            }
        }
        Some(tokens)
    }
}

/// How far before a breakpoint Anthropic looks for a cached prefix, in blocks.
pub(crate) const LOOKBACK: usize = 20;

/// Anthropic's rule (see the module's documentation) on `cached`, a credential's prefixes.
fn anthropic(cached: &mut HashSet<u64>, request: &Value) -> Cached {
    let blocks = anthropic_blocks(request);
    // The hash of each prefix, and the tokens up to and including each block.
    let mut hasher = DefaultHasher::new();
    let (mut ends, mut sizes) =
        (Vec::with_capacity(blocks.len()), Vec::with_capacity(blocks.len()));
    let mut total = 0u64;
    for (block, _) in &blocks {
        block.hash(&mut hasher);
        ends.push(hasher.finish());
        total += u64::try_from(block.len().div_ceil(4)).unwrap_or(u64::MAX);
        sizes.push(total);
    }
    let breakpoints: Vec<usize> =
        blocks.iter().enumerate().filter(|(_, (_, marked))| *marked).map(|(at, _)| at).collect();
    let read_end = breakpoints
        .iter()
        .filter_map(|&bp| {
            (bp.saturating_sub(LOOKBACK)..=bp).rev().find(|&at| cached.contains(&ends[at]))
        })
        .max();
    let read = read_end.map_or(0, |at| sizes[at]);
    let written = breakpoints.last().map_or(0, |&last| sizes[last].saturating_sub(read));
    for &bp in &breakpoints {
        cached.insert(ends[bp]);
    }
    Cached { read, written, fresh: total - read - written }
}

/// An Anthropic prompt's blocks in cache order, each as its JSON text without `cache_control`,
/// and whether it carried one.
fn anthropic_blocks(request: &Value) -> Vec<(String, bool)> {
    let mut blocks = Vec::new();
    let mut push = |block: &Value| {
        let mut block = block.clone();
        let marked = block.as_object_mut().and_then(|o| o.remove("cache_control")).is_some();
        blocks.push((block.to_string(), marked));
    };
    let each = |value: Option<&Value>, push: &mut dyn FnMut(&Value)| match value {
        Some(Value::Array(items)) => items.iter().for_each(&mut *push),
        Some(Value::String(text)) => push(&Value::String(text.clone())),
        _ => {}
    };
    each(request.get("tools"), &mut push);
    each(request.get("system"), &mut push);
    for message in request.get("messages").and_then(Value::as_array).into_iter().flatten() {
        each(message.get("content"), &mut push);
    }
    blocks
}

/// A prompt's blocks in order, each as its JSON text.
fn blocks(dialect: Dialect, request: &Value) -> Vec<String> {
    let (head, items): (&[&str], &str) = match dialect {
        Dialect::Anthropic => (&["tools", "system"], "messages"),
        Dialect::OpenAi => (&["tools"], "messages"),
        Dialect::Responses => (&["tools", "instructions"], "input"),
        Dialect::Gemini => (&["tools", "systemInstruction"], "contents"),
    };
    let mut blocks: Vec<String> =
        head.iter().filter_map(|field| request.get(*field)).map(Value::to_string).collect();
    match request.get(items) {
        Some(Value::Array(items)) => blocks.extend(items.iter().map(Value::to_string)),
        Some(other) => blocks.push(other.to_string()),
        None => {}
    }
    blocks
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(text: &str, marked: bool) -> Value {
        let mut block = json!({"type": "text", "text": text});
        if marked {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
        block
    }

    /// A conversation of `turns` user/assistant messages after a large system prompt, with a
    /// breakpoint on the system prompt and on the last message when `marked`.
    fn conversation(turns: usize, marked: bool) -> Value {
        let messages: Vec<Value> = (0..turns)
            .map(|n| {
                let role = if n % 2 == 0 { "user" } else { "assistant" };
                let last = n + 1 == turns;
                json!({"role": role, "content": [text(&format!("turn {n} {}", "x".repeat(40)), marked && last)]})
            })
            .collect();
        json!({"system": [text(&"s".repeat(4000), marked)], "messages": messages})
    }

    #[test]
    fn anthropic_caches_only_what_a_breakpoint_marks_and_reads_past_a_moved_one() {
        let cache = PromptCache::default();
        cache.turn_on();
        let plain = cache.serve("k1", Dialect::Anthropic, &conversation(3, false)).unwrap();
        assert_eq!((plain.read, plain.written), (0, 0), "nothing marked, nothing cached");
        assert!(plain.fresh > 1000, "all of it plain input: {plain:?}");
        let again = cache.serve("k1", Dialect::Anthropic, &conversation(3, false)).unwrap();
        assert_eq!(again.read, 0);

        let first = cache.serve("k1", Dialect::Anthropic, &conversation(3, true)).unwrap();
        assert_eq!(first.read, 0);
        assert!(first.written > 1000, "{first:?}");
        // The next turn moves the breakpoint two blocks on: the earlier one's prefix is read,
        // `cache_control` not being part of what is hashed.
        let next = cache.serve("k1", Dialect::Anthropic, &conversation(5, true)).unwrap();
        assert_eq!(next.read, first.written);
        assert!(next.written > 0 && next.written < 100, "{next:?}");
        // Past the lookback nothing is found: 25 blocks on, only the system prompt is read.
        let far = cache.serve("k1", Dialect::Anthropic, &conversation(30, true)).unwrap();
        assert!(far.read < next.read && far.read > 900, "{far:?}");
        assert_eq!(cache.serve("k2", Dialect::Anthropic, &conversation(5, true)).unwrap().read, 0);
    }

    #[test]
    fn a_prefix_sent_on_a_key_before_is_read_and_on_another_key_written() {
        let cache = PromptCache::default();
        let first = json!({"messages": [
            {"role": "system", "content": "s".repeat(400)}, {"role": "user", "content": "a"}]});
        assert_eq!(cache.serve("k1", Dialect::OpenAi, &first), None, "off by default");
        cache.turn_on();
        let wrote = cache.serve("k1", Dialect::OpenAi, &first).unwrap();
        assert_eq!(wrote.read, 0);
        let mut next = first.clone();
        next["messages"].as_array_mut().unwrap().push(json!({"role": "assistant", "content": "b"}));
        let again = cache.serve("k1", Dialect::OpenAi, &next).unwrap();
        assert_eq!(again.read, wrote.fresh, "the whole first prompt is read back");
        assert!(again.fresh > 0 && again.fresh < again.read);
        assert_eq!(again.written, 0, "an automatic cache reports no writes");
        let elsewhere = cache.serve("k2", Dialect::OpenAi, &next).unwrap();
        assert_eq!(elsewhere.read, 0, "each key caches its own prefixes");
    }
}
