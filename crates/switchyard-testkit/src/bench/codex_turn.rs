//! One turn of a coding agent, as Codex CLI sends it to `POST /v1/responses`: the request the
//! Responses measurement (`passthrough.rs`) times. Its shapes follow Codex 0.171.0's
//! recorded request (`crates/switchyard-providers/tests/fixtures/real/codex-0.171.0.request.json`)
//! and the `responses_codex_turn` golden fixture: `instructions` and a `developer` message,
//! the user's `input_text`, ten rounds of `function_call` / `function_call_output` (arguments
//! as a JSON string, as Codex writes them), a `reasoning` item with its `encrypted_content`, the
//! freeform (`custom`) tool `apply_patch` with its Lark grammar beside 20 function tools, and the
//! top-level fields a Chat upstream has no place for (`reasoning: {effort, summary}`,
//! `store: false`, `include: ["reasoning.encrypted_content"]`, `prompt_cache_key`,
//! `client_metadata`). About 80 KB, the size of `agent_turn.rs`'s Claude Code turn, so the two
//! measurements compare.
//!
//! Deterministic like `agent_turn.rs` (the same generator, another seed), with the top-level
//! fields in the order Codex writes them.

use serde_json::{Value, json};

use super::agent_turn::{ROUNDS, Words, ordered};

/// Codex's function tools, with how many parameters each takes; `apply_patch` comes besides
/// them as a freeform tool.
const TOOLS: [(&str, usize); 20] = [
    ("exec_command", 6),
    ("write_stdin", 4),
    ("shell_command", 4),
    ("update_plan", 2),
    ("request_user_input", 1),
    ("view_image", 1),
    ("list_mcp_resources", 2),
    ("list_mcp_resource_templates", 2),
    ("read_mcp_resource", 2),
    ("get_goal", 1),
    ("create_goal", 2),
    ("update_goal", 3),
    ("spawn_agent", 4),
    ("send_input", 3),
    ("wait_agent", 2),
    ("close_agent", 1),
    ("resume_agent", 2),
    ("read_file", 3),
    ("list_dir", 3),
    ("grep_files", 4),
];

/// The Lark grammar Codex declares for `apply_patch` (abridged from 0.171.0's).
const PATCH_GRAMMAR: &str = "start: begin_patch hunk+ end_patch\nbegin_patch: \"*** Begin Patch\" LF\nend_patch: \"*** End Patch\" LF?\n\nhunk: add_hunk | delete_hunk | update_hunk\nadd_hunk: \"*** Add File: \" filename LF add_line+\ndelete_hunk: \"*** Delete File: \" filename LF\nupdate_hunk: \"*** Update File: \" filename LF change_move? change?\n\nfilename: /(.+)/\nadd_line: \"+\" /(.*)/ LF -> line\n\nchange_move: \"*** Move to: \" filename LF\nchange: (change_context | change_line)+ eof_line?\nchange_context: (\"@@\" | \"@@ \" /(.+)/) LF\nchange_line: (\"+\" | \"-\" | \" \") /(.*)/ LF\neof_line: \"*** End of File\" LF\n\n%import common.LF\n";

/// The request for `model`, as bytes on the wire.
pub(crate) fn body(model: &str, stream: bool) -> Vec<u8> {
    let mut words = Words(0xC0DE_C5EE_D000_0013);
    let instructions = format!(
        "You are Codex, based on GPT-5. You are running as a coding agent in the Codex CLI on a \
         user's computer.\n\n{}",
        words.prose(9_000)
    );
    let session = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    let fields = [
        ("model", json!(model)),
        ("instructions", json!(instructions)),
        ("stream", json!(stream)),
        ("input", input(&mut words)),
        ("tools", tools(&mut words)),
        ("tool_choice", json!("auto")),
        ("parallel_tool_calls", json!(true)),
        ("reasoning", json!({ "effort": "medium", "summary": "auto" })),
        ("store", json!(false)),
        ("include", json!(["reasoning.encrypted_content"])),
        ("prompt_cache_key", json!(session)),
        (
            "client_metadata",
            json!({ "x-codex-window-id": format!("{session}:0"), "thread_id": session }),
        ),
    ];
    ordered(&fields)
}

fn message(role: &str, kind: &str, text: &str) -> Value {
    json!({ "type": "message", "role": role, "content": [{ "type": kind, "text": text }] })
}

fn input(words: &mut Words) -> Value {
    let mut items = vec![
        message(
            "developer",
            "input_text",
            &format!(
                "<permissions instructions>\n{}\n</permissions instructions>",
                words.prose(1_500)
            ),
        ),
        message(
            "user",
            "input_text",
            "<environment_context>\n  <cwd>/work/switchyard</cwd>\n  <shell>bash</shell>\n  \
             <current_date>2026-11-30</current_date>\n  <timezone>Etc/UTC</timezone>\n\
             </environment_context>",
        ),
        message(
            "user",
            "input_text",
            "The fallback test in tests/load_faults.rs is flaky on CI; find out why and fix it.",
        ),
    ];
    for round in 0..ROUNDS {
        if round == 0 {
            items.push(json!({
                "type": "reasoning",
                "summary": [{ "type": "summary_text", "text": format!("**Reading the test**\n\n{}", words.prose(300)) }],
                "content": null,
                "encrypted_content": format!("gAAAAAB{}", words.token(2_400)),
            }));
        }
        let call_id = format!("call_{}", words.token(24));
        let file = format!("crates/switchyard/src/{}.rs", words.word().to_lowercase());
        let arguments = if round == 4 {
            json!({ "cmd": "cargo test -p switchyard-e2e --test load_faults", "workdir": "/work/switchyard", "yield_time_ms": 10_000 })
        } else {
            json!({ "cmd": format!("sed -n '1,200p' {file}"), "workdir": "/work/switchyard" })
        };
        items.push(json!({
            "type": "function_call",
            "name": "exec_command",
            "arguments": arguments.to_string(),
            "call_id": call_id,
        }));
        let code = words.code(40 + 12 * (round % 4));
        let exit = if round == 4 { 101 } else { 0 };
        let output = format!(
            "Chunk ID: {}\nWall time: 0.{:04} seconds\nProcess exited with code {exit}\nOutput:\n{code}",
            words.token(6),
            40 + round
        );
        items.push(json!({ "type": "function_call_output", "call_id": call_id, "output": output }));
    }
    items.push(message("assistant", "output_text", &words.prose(400)));
    items.push(message(
        "user",
        "input_text",
        "Good. Now run the whole suite once more and commit.",
    ));
    Value::Array(items)
}

fn tools(words: &mut Words) -> Value {
    let types = ["string", "number", "boolean", "string", "integer", "string"];
    let mut tools: Vec<Value> = TOOLS
        .iter()
        .enumerate()
        .map(|(t, &(name, params))| {
            let mut properties = serde_json::Map::new();
            let mut required = Vec::new();
            for p in 0..params {
                let param = format!("{}_{p}", words.word().to_lowercase());
                let kind = types[(t + p) % types.len()];
                properties.insert(
                    param.clone(),
                    json!({ "type": kind, "description": words.prose(120) }),
                );
                if p == 0 {
                    required.push(param);
                }
            }
            json!({
                "type": "function",
                "name": name,
                "description": words.prose(700 + 90 * (t % 7)),
                "strict": false,
                "parameters": {
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": false,
                },
            })
        })
        .collect();
    tools.insert(
        4,
        json!({
            "type": "custom",
            "name": "apply_patch",
            "description": "The `apply_patch` tool can be used to edit files. This is a FREEFORM tool, so do not wrap the patch in JSON.",
            "format": { "type": "grammar", "syntax": "lark", "definition": PATCH_GRAMMAR },
        }),
    );
    Value::Array(tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_turn_is_the_size_of_the_claude_code_turn_and_the_same_every_time() {
        let bytes = body("bench-codex", true);
        assert!((50_000..=100_000).contains(&bytes.len()), "{} bytes", bytes.len());
        assert_eq!(bytes, body("bench-codex", true));
        assert!(bytes.starts_with(br#"{"model":"bench-codex","instructions":"#));
        let turn: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(turn["stream"], true);
        assert_eq!(turn["store"], false);
        assert_eq!(turn["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(turn["reasoning"], json!({ "effort": "medium", "summary": "auto" }));
        assert!(turn["prompt_cache_key"].is_string());
        assert!(turn["instructions"].as_str().unwrap().len() >= 9_000);
        assert_eq!(turn["input"][0]["role"], "developer");
    }

    #[test]
    fn codex_declares_a_freeform_apply_patch_beside_twenty_functions() {
        let turn: Value = serde_json::from_slice(&body("m", false)).unwrap();
        let tools = turn["tools"].as_array().unwrap();
        let kind = |t: &str| tools.iter().filter(|tool| tool["type"] == t).count();
        assert_eq!((kind("function"), kind("custom"), tools.len()), (20, 1, 21));
        let patch = tools.iter().find(|t| t["type"] == "custom").unwrap();
        assert_eq!(patch["name"], "apply_patch");
        assert_eq!(patch["format"]["syntax"], "lark");
    }

    #[test]
    fn every_function_call_output_answers_the_call_before_it() {
        let turn: Value = serde_json::from_slice(&body("m", false)).unwrap();
        let items = turn["input"].as_array().unwrap();
        let reasoning: Vec<&Value> = items.iter().filter(|i| i["type"] == "reasoning").collect();
        assert_eq!(reasoning.len(), 1);
        assert!(reasoning[0]["encrypted_content"].as_str().unwrap().len() > 2_000);
        let calls: Vec<usize> =
            (0..items.len()).filter(|&i| items[i]["type"] == "function_call").collect();
        assert_eq!(calls.len(), ROUNDS);
        for i in calls {
            let (call, output) = (&items[i], &items[i + 1]);
            assert_eq!(output["type"], "function_call_output");
            assert_eq!(output["call_id"], call["call_id"]);
            let arguments: Value =
                serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
            assert!(arguments["cmd"].is_string());
        }
    }
}
