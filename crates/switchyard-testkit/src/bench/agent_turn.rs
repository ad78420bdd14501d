//! One turn of a coding agent, as Claude Code sends it to `POST /v1/messages`: the request the
//! passthrough measurement (`passthrough.rs`) times, because it is the request passthrough was
//! built for. A few KB of system prompt with `cache_control`, 20 tools with JSON schemas, ten
//! rounds of `tool_use` / `tool_result`, an assistant `thinking` block with its signature, and the
//! top-level fields the canonical model does not know (`context_management`, `output_config`,
//! `thinking: {type: adaptive}`): about 80 KB.
//!
//! Deterministic: the text comes from a fixed-seed generator, so every run, on every machine,
//! sends the same bytes. Top-level fields are written in the order Claude Code writes them
//! (`model` first), which `serde_json` without `preserve_order` would not keep.

use std::fmt::Write as _;

use serde_json::{Value, json};

/// The tools a coding agent declares, with how many parameters each takes.
const TOOLS: [(&str, usize); 20] = [
    ("Task", 3),
    ("Bash", 4),
    ("Glob", 2),
    ("Grep", 6),
    ("ExitPlanMode", 1),
    ("Read", 3),
    ("Edit", 4),
    ("MultiEdit", 2),
    ("Write", 2),
    ("NotebookEdit", 5),
    ("WebFetch", 2),
    ("TodoWrite", 1),
    ("WebSearch", 3),
    ("BashOutput", 2),
    ("KillShell", 1),
    ("SlashCommand", 1),
    ("AskUserQuestion", 2),
    ("Skill", 1),
    ("ListMcpResources", 1),
    ("ReadMcpResource", 2),
];
/// Rounds of assistant `tool_use` then user `tool_result` after the first user message.
pub(crate) const ROUNDS: usize = 10;

/// The request for `model`, as bytes on the wire.
pub(crate) fn body(model: &str, stream: bool) -> Vec<u8> {
    let mut words = Words(0x5EED_C0DE_1234_5678);
    let fields = [
        ("model", json!(model)),
        ("messages", messages(&mut words)),
        ("system", system(&mut words)),
        ("tools", tools(&mut words)),
        // As Claude Code 2.1.197 writes it (the real fixture in switchyard-providers): a JSON
        // string naming the session, which routing reads as the request's session.
        (
            "metadata",
            json!({ "user_id": json!({
                "device_id": "3f2a9c7d41e0b2a1c4e8f0d2b6a9c3e7f1d5b8a2c6e0f4d8b2a6c0e4f8d2b6a0",
                "account_uuid": "",
                "session_id": "9b8c7a6e-5d4c-4b3a-9f8e-7d6c5b4a3f2e",
            }).to_string() }),
        ),
        ("max_tokens", json!(32_000)),
        ("thinking", json!({ "type": "adaptive" })),
        (
            "context_management",
            json!({ "edits": [{ "type": "clear_thinking_20251015", "keep": "all" }] }),
        ),
        ("output_config", json!({ "effort": "high" })),
        ("stream", json!(stream)),
    ];
    ordered(&fields)
}

/// A JSON object with its fields in the order given, as a client writes them (`serde_json`
/// without `preserve_order` would sort them).
pub(crate) fn ordered(fields: &[(&str, Value)]) -> Vec<u8> {
    let mut out = b"{".to_vec();
    for (i, (name, value)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(json!(name).to_string().as_bytes());
        out.push(b':');
        out.extend_from_slice(value.to_string().as_bytes());
    }
    out.push(b'}');
    out
}

fn system(words: &mut Words) -> Value {
    json!([
        {
            "type": "text",
            "text": "You are Claude Code, Anthropic's official CLI for Claude.",
            "cache_control": { "type": "ephemeral" },
        },
        {
            "type": "text",
            "text": words.prose(9_000),
            "cache_control": { "type": "ephemeral" },
        },
    ])
}

fn tools(words: &mut Words) -> Value {
    let types = ["string", "number", "boolean", "string", "integer", "string"];
    let tools: Vec<Value> = TOOLS
        .iter()
        .enumerate()
        .map(|(t, &(name, params))| {
            let mut properties = serde_json::Map::new();
            let mut required = Vec::new();
            for p in 0..params {
                let param = format!("{}_{p}", words.word().to_lowercase());
                let kind = types[(t + p) % types.len()];
                let mut schema = json!({ "type": kind, "description": words.prose(120) });
                if kind == "string" && p == 2 {
                    schema["enum"] = json!(["content", "files_with_matches", "count"]);
                }
                if p == 0 || p % 3 == 1 {
                    required.push(param.clone());
                }
                properties.insert(param, schema);
            }
            let mut tool = json!({
                "name": name,
                "description": words.prose(1_100 + 90 * (t % 7)),
                "input_schema": {
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": false,
                    "$schema": "http://json-schema.org/draft-07/schema#",
                },
            });
            if t == TOOLS.len() - 1 {
                tool["cache_control"] = json!({ "type": "ephemeral" });
            }
            tool
        })
        .collect();
    Value::Array(tools)
}

fn messages(words: &mut Words) -> Value {
    let mut messages = vec![json!({
        "role": "user",
        "content": [
            { "type": "text", "text": format!("<system-reminder>\n{}\n</system-reminder>", words.prose(1_500)) },
            { "type": "text", "text": "The fallback test in tests/load_faults.rs is flaky on CI; find out why and fix it." },
        ],
    })];
    for round in 0..ROUNDS {
        let id = format!("toolu_01{round:02}{}", words.token(20));
        let (name, _) = TOOLS[[5, 3, 1, 5, 6, 1, 5, 7, 1, 11][round]];
        let mut content = Vec::new();
        if round == 0 {
            content.push(json!({
                "type": "thinking",
                "thinking": words.prose(700),
                "signature": words.token(344),
            }));
        }
        content.push(json!({ "type": "text", "text": words.prose(160) }));
        content.push(json!({
            "type": "tool_use",
            "id": id,
            "name": name,
            "input": { "file_path": format!("/work/switchyard/crates/switchyard/src/{}.rs", words.word().to_lowercase()), "limit": 400 },
        }));
        messages.push(json!({ "role": "assistant", "content": content }));
        let output = words.code(40 + 12 * (round % 4));
        let result = if round % 3 == 2 {
            json!({ "type": "tool_result", "tool_use_id": id, "content": [{ "type": "text", "text": output }] })
        } else if round == 7 {
            json!({ "type": "tool_result", "tool_use_id": id, "content": "Error: exit code 101", "is_error": true })
        } else {
            json!({ "type": "tool_result", "tool_use_id": id, "content": output })
        };
        messages.push(json!({ "role": "user", "content": [result] }));
    }
    messages.push(json!({
        "role": "assistant",
        "content": [{ "type": "text", "text": words.prose(400) }],
    }));
    messages.push(json!({
        "role": "user",
        "content": [{
            "type": "text",
            "text": "Good. Now run the whole suite once more and commit.",
            "cache_control": { "type": "ephemeral" },
        }],
    }));
    Value::Array(messages)
}

/// A fixed-seed word generator (xorshift64*): text of a given size that reads like text. Codex's
/// turn (`codex_turn.rs`) draws its text from it too, with a seed of its own.
pub(crate) struct Words(pub(crate) u64);

const VOCABULARY: [&str; 48] = [
    "the",
    "request",
    "provider",
    "stream",
    "when",
    "a",
    "breaker",
    "opens",
    "and",
    "file",
    "test",
    "should",
    "never",
    "model",
    "answer",
    "with",
    "error",
    "retry",
    "budget",
    "client",
    "tool",
    "use",
    "of",
    "in",
    "to",
    "is",
    "Always",
    "prefer",
    "editing",
    "existing",
    "files",
    "code",
    "search",
    "before",
    "you",
    "run",
    "commands",
    "that",
    "change",
    "state",
    "IMPORTANT",
    "user",
    "task",
    "output",
    "concise",
    "path",
    "absolute",
    "result",
];

impl Words {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick(&mut self, n: usize) -> usize {
        // n is a small constant: the modulo bias is irrelevant here.
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }

    pub(crate) fn word(&mut self) -> &'static str {
        VOCABULARY[self.pick(VOCABULARY.len())]
    }

    /// Sentences of about `bytes` bytes.
    pub(crate) fn prose(&mut self, bytes: usize) -> String {
        let mut out = String::with_capacity(bytes + 16);
        let mut in_sentence = 0;
        while out.len() < bytes {
            if in_sentence > 0 {
                out.push(' ');
            }
            out.push_str(self.word());
            in_sentence += 1;
            if in_sentence > 6 + self.pick(10) {
                out.push_str(if self.pick(8) == 0 { ".\n\n" } else { ". " });
                in_sentence = 0;
            }
        }
        out
    }

    /// A file as the Read tool shows it: numbered lines of Rust-looking code.
    pub(crate) fn code(&mut self, lines: usize) -> String {
        let mut out = String::new();
        for n in 1..=lines {
            let indent = 4 * self.pick(3);
            let (a, b, c) = (self.word(), self.word(), self.word());
            let line = match self.pick(4) {
                0 => format!("let {a}_{b} = self.{c}(&request)?;"),
                1 => format!("// {}", self.prose(50)),
                2 => format!("if {a}.is_{b}() {{ return Err(Error::{c}); }}"),
                _ => format!("{a}.{b}_{c}(now, &mut state);"),
            };
            let _ = writeln!(out, "{n:>6}\u{2192}{:indent$}{line}", "");
        }
        out
    }

    /// Base64-looking characters, for ids and signatures.
    pub(crate) fn token(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        (0..len).map(|_| char::from(ALPHABET[self.pick(ALPHABET.len())])).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_turn_is_the_size_of_a_claude_code_turn_and_the_same_every_time() {
        let bytes = body("bench-agent", true);
        assert!((50_000..=100_000).contains(&bytes.len()), "{} bytes", bytes.len());
        assert_eq!(bytes, body("bench-agent", true));
        assert!(bytes.starts_with(br#"{"model":"bench-agent","messages":"#));
        let turn: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(turn["tools"].as_array().unwrap().len(), 20);
        assert_eq!(turn["messages"].as_array().unwrap().len(), 2 * ROUNDS + 3);
        assert_eq!(turn["thinking"]["type"], "adaptive");
        assert_eq!(turn["stream"], true);
        assert!(turn["system"][1]["text"].as_str().unwrap().len() >= 9_000);
    }

    #[test]
    fn every_tool_result_answers_the_tool_use_before_it() {
        let turn: Value = serde_json::from_slice(&body("m", false)).unwrap();
        let messages = turn["messages"].as_array().unwrap();
        for round in 0..ROUNDS {
            let asked = messages[1 + 2 * round]["content"]
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["type"] == "tool_use")
                .unwrap();
            let answer = &messages[2 + 2 * round]["content"][0];
            assert_eq!(answer["type"], "tool_result");
            assert_eq!(answer["tool_use_id"], asked["id"]);
            let name = asked["name"].as_str().unwrap();
            assert!(TOOLS.iter().any(|(t, _)| *t == name));
        }
    }
}
