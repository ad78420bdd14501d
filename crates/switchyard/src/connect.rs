//! "Connect your tools" (issue 17, point 4): the exact lines that point each tool at this
//! endpoint, with a local key and a combo filled in.
//!
//! Pure text, no I/O: `switchyard connect TOOL` prints it (and, with `--write`, applies
//! [`merge_codex`] to the one config file it edits), and the UI's Connect page can serve the
//! same [`Guide`]s through the management API. Keys never go into a file: where a tool reads
//! its key from a file, the file names an environment variable and the key is exported.

use std::path::Path;

use serde::Serialize;
use ts_rs::TS;

/// The environment variable the snippets export the local key in, for tools that read it from
/// one of their choosing.
pub const KEY_VARIABLE: &str = "SWITCHYARD_KEY";

/// Filled in where no key was given: plainly not a key, so nothing pasted works by accident.
pub const PLACEHOLDER_KEY: &str = "sy-YOUR-LOCAL-KEY";

/// Filled in where no model was given and no combo is configured.
pub const PLACEHOLDER_MODEL: &str = "YOUR-COMBO";

/// A tool (or SDK) the Connect page knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, TS, clap::ValueEnum)]
#[ts(export, rename = "ConnectTool")]
#[serde(rename_all = "kebab-case")]
pub enum Tool {
    ClaudeCode,
    Codex,
    GeminiCli,
    Aider,
    Continue,
    Cline,
    Opencode,
    Zed,
    OpenaiPython,
    OpenaiTs,
    AnthropicPython,
    AnthropicTs,
    Cursor,
}

impl Tool {
    pub const ALL: [Self; 13] = [
        Self::ClaudeCode,
        Self::Codex,
        Self::GeminiCli,
        Self::Aider,
        Self::Continue,
        Self::Cline,
        Self::Opencode,
        Self::Zed,
        Self::OpenaiPython,
        Self::OpenaiTs,
        Self::AnthropicPython,
        Self::AnthropicTs,
        Self::Cursor,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Self::ClaudeCode => "Claude Code",
            Self::Codex => "Codex CLI",
            Self::GeminiCli => "Gemini CLI",
            Self::Aider => "aider",
            Self::Continue => "Continue",
            Self::Cline => "Cline / Roo Code",
            Self::Opencode => "opencode",
            Self::Zed => "Zed",
            Self::OpenaiPython => "OpenAI SDK (Python)",
            Self::OpenaiTs => "OpenAI SDK (TypeScript)",
            Self::AnthropicPython => "Anthropic SDK (Python)",
            Self::AnthropicTs => "Anthropic SDK (TypeScript)",
            Self::Cursor => "Cursor",
        }
    }
}

/// What a guide is filled in with.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The loopback port the server listens on.
    pub port: u16,
    /// A local API key (`sy-...`), or a placeholder.
    pub key: String,
    /// A combo, or `provider/model`.
    pub model: String,
}

impl Endpoint {
    /// `http://127.0.0.1:PORT`, without `/v1` (Anthropic clients add it themselves).
    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:PORT/v1`, what OpenAI clients take as their base URL.
    pub fn openai_base(&self) -> String {
        format!("{}/v1", self.origin())
    }
}

/// One block to paste.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export, rename = "ConnectSnippet")]
pub struct Snippet {
    /// Where it goes: "shell", "~/.codex/config.toml", "Settings → API Provider", ...
    pub label: String,
    /// For highlighting: `sh`, `toml`, `yaml`, `json`, `python`, `ts` or `text`.
    pub language: String,
    pub text: String,
}

/// The lines for one tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export, rename = "ConnectGuide")]
pub struct Guide {
    pub tool: Tool,
    pub title: String,
    /// `false` when the tool cannot reach a loopback endpoint at all (its servers, not this
    /// machine, call the base URL): then `snippets` is empty and `note` says why.
    pub reachable: bool,
    pub snippets: Vec<Snippet>,
    /// The config file `switchyard connect TOOL --write` edits, when the tool documents one
    /// and the edit is safe to make by program.
    pub writes: Option<String>,
    pub note: Option<String>,
}

fn snippet(label: &str, language: &str, text: String) -> Snippet {
    Snippet { label: label.to_owned(), language: language.to_owned(), text }
}

/// The lines that connect `tool` to `endpoint`.
#[expect(clippy::too_many_lines, reason = "one arm per tool, each its own documented lines")]
pub fn guide(tool: Tool, endpoint: &Endpoint) -> Guide {
    let Endpoint { key, model, .. } = endpoint;
    let origin = endpoint.origin();
    let base = endpoint.openai_base();
    let export_key = format!("export {KEY_VARIABLE}={key}");
    let (snippets, writes, note) = match tool {
        Tool::ClaudeCode => (
            vec![snippet(
                "shell",
                "sh",
                format!(
                    "export ANTHROPIC_BASE_URL={origin}\nexport ANTHROPIC_AUTH_TOKEN={key}\nexport ANTHROPIC_MODEL={model}\nexport ANTHROPIC_DEFAULT_HAIKU_MODEL={model}\nclaude\n"
                ),
            )],
            None,
            Some(
                "No /v1 in ANTHROPIC_BASE_URL: Claude Code adds it. Or route Claude Code's own \
                 model names with aliases (docs/clients.md)."
                    .to_owned(),
            ),
        ),
        Tool::Codex => (
            vec![
                snippet("shell", "sh", format!("{export_key}\n")),
                snippet("~/.codex/config.toml", "toml", codex_block(endpoint)),
            ],
            Some("~/.codex/config.toml".to_owned()),
            Some(
                "Codex speaks only the Responses API; Switchyard translates it for any target."
                    .to_owned(),
            ),
        ),
        Tool::GeminiCli => (
            vec![
                snippet(
                    "shell",
                    "sh",
                    format!(
                        "export GOOGLE_GEMINI_BASE_URL={origin}\nexport GEMINI_API_KEY={key}\n# scripts (gemini -p) only: no prompt to trust the folder\nexport GEMINI_CLI_TRUST_WORKSPACE=true\ngemini -m {model}\n"
                    ),
                ),
                snippet(
                    "~/.gemini/settings.json",
                    "json",
                    "{\n  \"security\": { \"auth\": { \"selectedType\": \"gemini-api-key\" } }\n}\n"
                        .to_owned(),
                ),
                snippet(
                    "Switchyard config (Gemini CLI's own model names)",
                    "toml",
                    format!("[[aliases]]\nmatch = \"gemini-*\"\nto = \"{model}\"\n"),
                ),
            ],
            None,
            Some(
                "No /v1beta in GOOGLE_GEMINI_BASE_URL: Gemini CLI adds it. Without -m it asks for \
                 its own model names (its router's classifier too): the alias sends them all to \
                 the combo."
                    .to_owned(),
            ),
        ),
        Tool::Aider => (
            vec![snippet(
                "shell",
                "sh",
                format!(
                    "export OPENAI_API_BASE={base}\nexport OPENAI_API_KEY={key}\naider --model openai/{model}\n"
                ),
            )],
            None,
            Some("The `openai/` prefix tells aider to use the OpenAI-compatible API.".to_owned()),
        ),
        Tool::Continue => (
            vec![snippet(
                "~/.continue/config.yaml",
                "yaml",
                format!(
                    "name: Switchyard\nversion: 0.0.1\nschema: v1\nmodels:\n  - name: Switchyard {model}\n    provider: openai\n    model: {model}\n    apiBase: {base}\n    apiKey: {key}\n"
                ),
            )],
            None,
            None,
        ),
        Tool::Cline => (
            vec![snippet(
                "Settings → API Provider",
                "text",
                format!(
                    "API Provider: OpenAI Compatible\nBase URL: {base}\nAPI Key: {key}\nModel ID: {model}\n"
                ),
            )],
            None,
            None,
        ),
        Tool::Opencode => (
            vec![
                snippet("shell", "sh", format!("{export_key}\n")),
                snippet(
                    "~/.config/opencode/opencode.json",
                    "json",
                    format!(
                        r#"{{
  "$schema": "https://opencode.ai/config.json",
  "provider": {{
    "switchyard": {{
      "npm": "@ai-sdk/openai-compatible",
      "name": "Switchyard",
      "options": {{ "baseURL": "{base}", "apiKey": "{{env:{KEY_VARIABLE}}}" }},
      "models": {{ "{model}": {{ "name": "{model}" }} }}
    }}
  }},
  "model": "switchyard/{model}"
}}
"#
                    ),
                ),
            ],
            None,
            None,
        ),
        Tool::Zed => (
            vec![snippet(
                "settings.json (zed: open settings)",
                "json",
                format!(
                    r#""language_models": {{
  "openai_compatible": {{
    "Switchyard": {{
      "api_url": "{base}",
      "available_models": [{{ "name": "{model}", "max_tokens": 128000 }}]
    }}
  }}
}}
"#
                ),
            )],
            None,
            Some(format!(
                "Then enter the key ({key}) for the Switchyard provider in the Agent Panel's settings."
            )),
        ),
        Tool::OpenaiPython => (
            vec![snippet(
                "python",
                "python",
                format!(
                    "from openai import OpenAI\n\nclient = OpenAI(base_url=\"{base}\", api_key=\"{key}\")\nreply = client.chat.completions.create(\n    model=\"{model}\", messages=[{{\"role\": \"user\", \"content\": \"Hello\"}}]\n)\n"
                ),
            )],
            None,
            None,
        ),
        Tool::OpenaiTs => (
            vec![snippet(
                "typescript",
                "ts",
                format!(
                    "import OpenAI from 'openai';\n\nconst client = new OpenAI({{ baseURL: '{base}', apiKey: '{key}' }});\nconst reply = await client.chat.completions.create({{\n  model: '{model}',\n  messages: [{{ role: 'user', content: 'Hello' }}],\n}});\n"
                ),
            )],
            None,
            None,
        ),
        Tool::AnthropicPython => (
            vec![snippet(
                "python",
                "python",
                format!(
                    "from anthropic import Anthropic\n\nclient = Anthropic(base_url=\"{origin}\", api_key=\"{key}\")\nreply = client.messages.create(\n    model=\"{model}\", max_tokens=1024, messages=[{{\"role\": \"user\", \"content\": \"Hello\"}}]\n)\n"
                ),
            )],
            None,
            Some("No /v1 in base_url: the SDK adds it.".to_owned()),
        ),
        Tool::AnthropicTs => (
            vec![snippet(
                "typescript",
                "ts",
                format!(
                    "import Anthropic from '@anthropic-ai/sdk';\n\nconst client = new Anthropic({{ baseURL: '{origin}', apiKey: '{key}' }});\nconst reply = await client.messages.create({{\n  model: '{model}',\n  max_tokens: 1024,\n  messages: [{{ role: 'user', content: 'Hello' }}],\n}});\n"
                ),
            )],
            None,
            Some("No /v1 in baseURL: the SDK adds it.".to_owned()),
        ),
        Tool::Cursor => {
            return Guide {
                tool,
                title: tool.title().to_owned(),
                reachable: false,
                snippets: Vec::new(),
                writes: None,
                note: Some(format!(
                    "Cursor sends chat requests from its own servers, not from this machine, so \
                     they cannot reach {origin}, which listens on this machine's loopback only. \
                     Switchyard does not offer lines that cannot work, and exposing the endpoint \
                     to the internet (a tunnel) would hand your provider keys to anyone who finds it."
                )),
            };
        }
    };
    Guide { tool, title: tool.title().to_owned(), reachable: true, snippets, writes, note }
}

/// The `~/.codex/config.toml` lines: a `switchyard` model provider on the Responses API
/// (Codex refuses `"chat"`), its key read from [`KEY_VARIABLE`].
fn codex_block(endpoint: &Endpoint) -> String {
    let base = endpoint.openai_base();
    let model = &endpoint.model;
    format!(
        "model = \"{model}\"\nmodel_provider = \"switchyard\"\n\n[model_providers.switchyard]\nname = \"Switchyard\"\nbase_url = \"{base}\"\nenv_key = \"{KEY_VARIABLE}\"\nwire_api = \"responses\"\n"
    )
}

/// `existing` (the text of `~/.codex/config.toml`, empty when there is none) with `model`,
/// `model_provider` and `[model_providers.switchyard]` set to this endpoint; every other
/// setting kept. Refuses a file that is not valid TOML rather than guess; comments are not
/// kept (the caller saves a backup first).
pub fn merge_codex(existing: &str, endpoint: &Endpoint) -> Result<String, String> {
    let mut config: toml::Table = toml::from_str(existing)
        .map_err(|e| format!("not valid TOML, left unchanged: {}", e.message().trim()))?;
    let ours: toml::Table = toml::from_str(&codex_block(endpoint)).expect("our block is TOML");
    for (key, value) in ours {
        match (config.get_mut(&key), value) {
            (Some(toml::Value::Table(theirs)), toml::Value::Table(mine)) => theirs.extend(mine),
            (_, value) => {
                config.insert(key, value);
            }
        }
    }
    Ok(toml::to_string_pretty(&config).expect("a table serializes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> Endpoint {
        Endpoint { port: 4242, key: "sy-test-key".into(), model: "smart".into() }
    }

    #[test]
    fn every_tool_gets_lines_with_the_endpoint_key_and_model_filled_in() {
        for tool in Tool::ALL {
            let guide = guide(tool, &endpoint());
            if tool == Tool::Cursor {
                continue;
            }
            assert!(guide.reachable, "{tool:?}");
            let text: String = guide.snippets.iter().map(|s| s.text.as_str()).collect();
            assert!(text.contains("http://127.0.0.1:4242"), "{tool:?}: {text}");
            assert!(text.contains("smart"), "{tool:?}: {text}");
            let key_shown = text.contains("sy-test-key")
                || guide.note.as_deref().is_some_and(|n| n.contains("sy-test-key"));
            assert!(key_shown, "{tool:?}: the key is filled in");
        }
    }

    #[test]
    fn anthropic_clients_get_the_origin_and_openai_clients_the_v1_base() {
        let text = |tool| guide(tool, &endpoint()).snippets[0].text.clone();
        assert!(text(Tool::ClaudeCode).contains("ANTHROPIC_BASE_URL=http://127.0.0.1:4242\n"));
        let gemini: String =
            guide(Tool::GeminiCli, &endpoint()).snippets.iter().map(|s| s.text.as_str()).collect();
        for line in [
            "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:4242\n",
            "GEMINI_API_KEY=",
            "GEMINI_CLI_TRUST_WORKSPACE=true",
            "\"selectedType\": \"gemini-api-key\"",
            "match = \"gemini-*\"",
        ] {
            assert!(gemini.contains(line), "{line} missing from {gemini}");
        }
        assert!(text(Tool::AnthropicPython).contains("base_url=\"http://127.0.0.1:4242\""));
        assert!(text(Tool::OpenaiPython).contains("base_url=\"http://127.0.0.1:4242/v1\""));
        assert!(text(Tool::Aider).contains("OPENAI_API_BASE=http://127.0.0.1:4242/v1"));
    }

    #[test]
    fn cursor_is_told_it_cannot_reach_loopback_instead_of_given_lines() {
        let guide = guide(Tool::Cursor, &endpoint());
        assert!(!guide.reachable);
        assert!(guide.snippets.is_empty());
        assert!(guide.note.unwrap().contains("cannot reach"));
    }

    #[test]
    fn the_codex_file_gets_our_provider_and_keeps_everything_else_without_the_key() {
        let existing = "approval_policy = \"never\"\nmodel = \"gpt-5\"\n\n[model_providers.other]\nname = \"Other\"\nbase_url = \"https://x.example/v1\"\n";
        let merged = merge_codex(existing, &endpoint()).unwrap();
        let table: toml::Table = toml::from_str(&merged).unwrap();
        assert_eq!(table["approval_policy"].as_str(), Some("never"));
        assert_eq!(table["model"].as_str(), Some("smart"));
        assert_eq!(table["model_provider"].as_str(), Some("switchyard"));
        let providers = table["model_providers"].as_table().unwrap();
        assert!(providers.contains_key("other"), "{merged}");
        let ours = providers["switchyard"].as_table().unwrap();
        assert_eq!(ours["base_url"].as_str(), Some("http://127.0.0.1:4242/v1"));
        assert_eq!(ours["wire_api"].as_str(), Some("responses"));
        assert_eq!(ours["env_key"].as_str(), Some(KEY_VARIABLE));
        assert!(!merged.contains("sy-test-key"), "no key in the file: {merged}");
        assert_eq!(merge_codex(&merged, &endpoint()).unwrap(), merged, "idempotent");
        assert!(merge_codex("model = ", &endpoint()).unwrap_err().contains("left unchanged"));
    }
}

/// Writes a tool's config file `file` (Codex's `~/.codex/config.toml`) as `connect --write`
/// does: the old text, if any, is kept beside it as `<name>.bak`, both written atomically (a
/// crash leaves the old file or the new one) with the original file's mode (a new file is
/// owner-only: Codex configs hold MCP tokens). A symlink at the file, its backup or its
/// directory is refused rather than followed: a link planted there would make us write
/// wherever it points. A missing directory is created owner-only.
pub fn write_tool_config(file: &Path, existing: &str, merged: &str) -> Result<(), String> {
    let dir = file.parent().ok_or_else(|| format!("{} has no directory", file.display()))?;
    let backup = file.with_extension("toml.bak");
    for path in [dir, file, backup.as_path()] {
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(format!(
                "{} is a symbolic link; not following it (edit the file it points to by hand)",
                path.display()
            ));
        }
    }
    if !dir.exists() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    if !existing.is_empty() {
        crate::config::editor::write_atomically_like(&backup, existing, file)?;
    }
    crate::config::editor::write_atomically(file, merged)
}

#[cfg(all(test, unix))]
mod write_tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_tool_config_and_its_directory_are_owner_only() {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join(".codex").join("config.toml");
        write_tool_config(&file, "", "model = \"x\"\n").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "model = \"x\"\n");
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(file.parent().unwrap()), 0o700);
        assert!(!file.with_extension("toml.bak").exists(), "nothing to back up");
    }

    #[test]
    fn the_backup_and_the_new_file_keep_the_original_mode() {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join("config.toml");
        std::fs::write(&file, "old").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_tool_config(&file, "old", "new").unwrap();
        let backup = file.with_extension("toml.bak");
        assert_eq!(std::fs::read_to_string(&backup).unwrap(), "old");
        assert_eq!((mode(&file), mode(&backup)), (0o640, 0o640));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
    }

    #[test]
    fn a_symlink_at_the_file_its_backup_or_its_directory_is_refused_and_nothing_written() {
        let home = tempfile::tempdir().unwrap();
        let elsewhere = home.path().join("elsewhere");
        std::fs::write(&elsewhere, "precious").unwrap();
        let dir = home.path().join(".codex");
        std::fs::create_dir(&dir).unwrap();
        let file = dir.join("config.toml");
        std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
        let error = write_tool_config(&file, "precious", "new").unwrap_err();
        assert!(error.contains("symbolic link"), "{error}");
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(&elsewhere, file.with_extension("toml.bak")).unwrap();
        assert!(write_tool_config(&file, "old", "new").is_err(), "the backup is a link");
        assert!(!file.exists());
        let linked_home = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(&dir, linked_home.path().join(".codex")).unwrap();
        let through = linked_home.path().join(".codex").join("config.toml");
        assert!(write_tool_config(&through, "", "new").is_err(), "the directory is a link");
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "precious");
    }
}
