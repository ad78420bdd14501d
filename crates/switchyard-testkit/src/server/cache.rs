//! A prompt cache per credential, as providers keep one: a prompt prefix this key was sent
//! before is read from the cache, the rest is written to it. Off until a test turns it on
//! ([`MockUpstream::cache_prompts`](super::MockUpstream::cache_prompts)), so usage figures
//! elsewhere stay the plain estimate.
//!
//! The model: a prompt is its blocks in order (the tools, the system prompt, then each message
//! or input item, as JSON: Anthropic's cache order, and the order chat templates render); a
//! prefix is cached when this credential was sent a prompt that began with the same blocks.
//! What a request reads is its longest cached prefix, in tokens of four bytes, the way every
//! provider counts what it read. This is generous (as OpenAI's automatic caching is: any
//! prefix; Anthropic reads only at breakpoints within a lookback), so a figure measured on it
//! is an upper bound of what a provider would read.

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

/// What one request's prompt did to the cache, in tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cached {
    pub read: u64,
    pub written: u64,
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
        let blocks = blocks(dialect, request);
        let mut prefixes = self.prefixes.lock().expect("never poisoned");
        let cached = prefixes.entry(credential.to_owned()).or_default();
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
                tokens.written += size;
                cached.insert(hash);
            }
        }
        Some(tokens)
    }
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

    #[test]
    fn a_prefix_sent_on_a_key_before_is_read_and_on_another_key_written() {
        let cache = PromptCache::default();
        let first =
            json!({"system": "s".repeat(400), "messages": [{"role": "user", "content": "a"}]});
        assert_eq!(cache.serve("k1", Dialect::Anthropic, &first), None, "off by default");
        cache.turn_on();
        let wrote = cache.serve("k1", Dialect::Anthropic, &first).unwrap();
        assert_eq!(wrote.read, 0);
        let mut next = first.clone();
        next["messages"].as_array_mut().unwrap().push(json!({"role": "assistant", "content": "b"}));
        let again = cache.serve("k1", Dialect::Anthropic, &next).unwrap();
        assert_eq!(again.read, wrote.written, "the whole first prompt is read back");
        assert!(again.written > 0 && again.written < again.read);
        let elsewhere = cache.serve("k2", Dialect::Anthropic, &next).unwrap();
        assert_eq!(elsewhere.read, 0, "each key caches its own prefixes");
    }
}
