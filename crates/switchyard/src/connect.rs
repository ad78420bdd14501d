//! "Connect your tools": the exact lines that point each tool at this
//! endpoint, with a local key and a combo filled in.
//!
//! Pure text, no I/O: `switchyard connect TOOL` prints it (and, with `--write`, applies
//! [`merge_codex`] to the one config file it edits), and the UI's Connect page can serve the
//! same [`Guide`]s through the management API. Keys never go into a file: where a tool reads
//! its key from a file, the file names an environment variable and the key is exported.
//!
//! "Keep your subscription": Claude Code and Codex also get a [`Subscription`]
//! variant, in which the tool keeps its own login in `Authorization` (passed through by a
//! provider credential of kind `client`) and sends the local key beside it in
//! `x-switchyard-key`. Its lines never set the tool's own key variables, which would replace
//! the login.

use std::path::Path;

use serde::Serialize;
use ts_rs::TS;

use crate::keys::SIDE_KEY_HEADER;

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
    /// "Keep your subscription": the lines that keep the tool's own login, for the tools that
    /// have one a `client` credential can pass through (Claude Code, Codex).
    pub subscription: Option<Subscription>,
}

/// The "Keep your subscription" lines of one tool: the tool keeps its own login and sends the
/// local key in `x-switchyard-key`; the last snippet is the suggested combo (the subscription,
/// then an API key, then another provider).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export, rename = "ConnectSubscription")]
pub struct Subscription {
    pub snippets: Vec<Snippet>,
    /// The config file `switchyard connect TOOL --subscription --write` edits, if any.
    pub writes: Option<String>,
    pub note: Option<String>,
}

/// Who signs a tool's requests: what a guide's lines, and the file `--write` edits, set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Login {
    /// The local key is the tool's key; upstream, the providers' own keys sign.
    LocalKey,
    /// The tool keeps its own login ("Keep your subscription"); the local key rides beside it.
    Subscription,
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
                snippet("~/.codex/config.toml", "toml", codex_block(endpoint, Login::LocalKey)),
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
                subscription: None,
            };
        }
    };
    let subscription = subscription(tool, endpoint);
    Guide {
        tool,
        title: tool.title().to_owned(),
        reachable: true,
        snippets,
        writes,
        note,
        subscription,
    }
}

/// The "Keep your subscription" lines of `tool`, for the tools whose own login a `client`
/// credential passes through: Claude Code (a Claude Pro/Max login, to the
/// `claude-subscription` preset) and Codex (a Plus/Pro login, to `chatgpt-subscription`).
pub fn subscription(tool: Tool, endpoint: &Endpoint) -> Option<Subscription> {
    let origin = endpoint.origin();
    match tool {
        Tool::ClaudeCode => {
            let endpoint = &subscription_endpoint(endpoint, "claude");
            let Endpoint { key, model, .. } = endpoint;
            Some(Subscription {
                snippets: vec![
                    snippet(
                        "shell",
                        "sh",
                        format!(
                            "# Claude Code keeps its own login (claude, then /login with your Claude account)\nunset ANTHROPIC_AUTH_TOKEN ANTHROPIC_API_KEY\nexport ANTHROPIC_BASE_URL={origin}\nexport ANTHROPIC_CUSTOM_HEADERS=\"{SIDE_KEY_HEADER}: {key}\"\nexport ANTHROPIC_MODEL={model}\nexport ANTHROPIC_DEFAULT_HAIKU_MODEL={model}\nclaude\n"
                        ),
                    ),
                    snippet(
                        "Switchyard config (the suggested combo)",
                        "toml",
                        suggested_combo(
                            &combo_name(model, "claude"),
                            Plan {
                                id: "claude-sub",
                                source: "claude-subscription",
                                model: "claude-sonnet-4-20250514",
                            },
                            Plan {
                                id: "anthropic",
                                source: "ANTHROPIC_API_KEY",
                                model: "claude-sonnet-4-20250514",
                            },
                            "openrouter/anthropic/claude-sonnet-4",
                        ),
                    ),
                ],
                writes: None,
                note: Some(
                    "No ANTHROPIC_AUTH_TOKEN or ANTHROPIC_API_KEY: either would replace Claude \
                     Code's own login, which goes to the subscription's provider alone. When the \
                     subscription's window runs out the combo's next target answers until the \
                     reset."
                        .to_owned(),
                ),
            })
        }
        Tool::Codex => {
            let endpoint = &subscription_endpoint(endpoint, "codex");
            let Endpoint { key, model, .. } = endpoint;
            Some(Subscription {
                snippets: vec![
                    snippet(
                        "shell",
                        "sh",
                        format!(
                            "# Codex keeps its own login (codex login: Sign in with ChatGPT)\nexport {KEY_VARIABLE}={key}\n"
                        ),
                    ),
                    snippet("~/.codex/config.toml", "toml", codex_subscription_block(endpoint)),
                    snippet(
                        "Switchyard config (the suggested combo)",
                        "toml",
                        suggested_combo(
                            &combo_name(model, "codex"),
                            Plan {
                                id: "chatgpt-sub",
                                source: "chatgpt-subscription",
                                model: "gpt-5",
                            },
                            Plan { id: "openai", source: "OPENAI_API_KEY", model: "gpt-5" },
                            "openrouter/openai/gpt-5",
                        ),
                    ),
                ],
                writes: Some("~/.codex/config.toml".to_owned()),
                note: Some(format!(
                    "No env_key: Codex sends its ChatGPT login (and account) in Authorization, \
                     and {SIDE_KEY_HEADER} from {KEY_VARIABLE} (an unset variable sends no header, \
                     and Switchyard answers 401). When the subscription's window runs out the \
                     combo's next target answers until the reset."
                )),
            })
        }
        _ => None,
    }
}

/// `endpoint` with the suggested combo's name (`claude`, `codex`) in place of the placeholder
/// model, so the lines ask for the combo they suggest.
fn subscription_endpoint(endpoint: &Endpoint, combo: &str) -> Endpoint {
    let model =
        if endpoint.model == PLACEHOLDER_MODEL { combo.to_owned() } else { endpoint.model.clone() };
    Endpoint { model, ..endpoint.clone() }
}

/// The combo the subscription lines ask for: the endpoint's model when it names a combo,
/// `fallback` when it names `provider/model` (a combo name has no `/`).
fn combo_name(model: &str, fallback: &str) -> String {
    if model.contains('/') { fallback.to_owned() } else { model.to_owned() }
}

/// A Switchyard config with the subscription's provider, an API key's, and the combo that
/// tries them in that order, then another provider: the subscription serves while its window
/// lasts, the key when it runs out, the third when the key cannot either.
fn suggested_combo(name: &str, subscription: Plan<'_>, key: Plan<'_>, other: &str) -> String {
    let Plan { id: sub_id, source: preset, model: sub_model } = subscription;
    let Plan { id: key_id, source: key_variable, model: key_model } = key;
    format!(
        r#"# Your subscription: the tool's own login, passed through
[[providers]]
id = "{sub_id}"
preset = "{preset}"

# An API key, for when the subscription's window runs out
[[providers]]
id = "{key_id}"
preset = "{key_id}"
credentials = [{{ id = "key-1", secret = "env:{key_variable}" }}]

# The subscription first, then the key, then another provider you have
[[combos]]
name = "{name}"
targets = [
  {{ target = "{sub_id}/{sub_model}" }},
  {{ target = "{key_id}/{key_model}" }},
  {{ target = "{other}" }},
]
"#
    )
}

/// One provider of the suggested combo: its id, what it comes from (the subscription's preset,
/// the API key's variable) and the model the combo asks it for.
#[derive(Clone, Copy)]
struct Plan<'a> {
    id: &'a str,
    source: &'a str,
    model: &'a str,
}

/// The `~/.codex/config.toml` lines: a `switchyard` model provider on the Responses API
/// (Codex refuses `"chat"`), its key read from [`KEY_VARIABLE`].
fn codex_block(endpoint: &Endpoint, login: Login) -> String {
    if login == Login::Subscription {
        return codex_subscription_block(&subscription_endpoint(endpoint, "codex"));
    }
    let base = endpoint.openai_base();
    let model = &endpoint.model;
    format!(
        "model = \"{model}\"\nmodel_provider = \"switchyard\"\n\n[model_providers.switchyard]\nname = \"Switchyard\"\nbase_url = \"{base}\"\nenv_key = \"{KEY_VARIABLE}\"\nwire_api = \"responses\"\n"
    )
}

/// The subscription's `~/.codex/config.toml` lines: the same provider without `env_key`, so
/// Codex signs its requests with its own login (`requires_openai_auth`), and sends the local
/// key in `x-switchyard-key` from [`KEY_VARIABLE`] (`env_http_headers`: a header whose value
/// Codex reads from a variable, so the key stays out of the file).
fn codex_subscription_block(endpoint: &Endpoint) -> String {
    let base = endpoint.openai_base();
    let model = &endpoint.model;
    format!(
        "model = \"{model}\"\nmodel_provider = \"switchyard\"\n\n[model_providers.switchyard]\nname = \"Switchyard\"\nbase_url = \"{base}\"\nwire_api = \"responses\"\nrequires_openai_auth = true\nenv_http_headers = {{ \"{SIDE_KEY_HEADER}\" = \"{KEY_VARIABLE}\" }}\n"
    )
}

/// `existing` (the text of `~/.codex/config.toml`, empty when there is none) with `model`,
/// `model_provider` and `[model_providers.switchyard]` set to this endpoint and `login`; every
/// other setting kept. Our provider's table is replaced whole, so switching between a local
/// key and a subscription leaves nothing of the other behind (a stale `env_key` would send the
/// local key in place of the login). Refuses a file that is not valid TOML rather than guess;
/// comments are not kept (the caller saves a backup first).
pub fn merge_codex(existing: &str, endpoint: &Endpoint, login: Login) -> Result<String, String> {
    let mut config: toml::Table = toml::from_str(existing)
        .map_err(|e| format!("not valid TOML, left unchanged: {}", e.message().trim()))?;
    let ours: toml::Table =
        toml::from_str(&codex_block(endpoint, login)).expect("our block is TOML");
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
        let merged = merge_codex(existing, &endpoint(), Login::LocalKey).unwrap();
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
        assert_eq!(
            merge_codex(&merged, &endpoint(), Login::LocalKey).unwrap(),
            merged,
            "idempotent"
        );
        let broken = merge_codex("model = ", &endpoint(), Login::LocalKey).unwrap_err();
        assert!(broken.contains("left unchanged"), "{broken}");
    }

    fn subscription_text(tool: Tool) -> String {
        let lines = subscription(tool, &endpoint()).expect("a subscription variant");
        lines.snippets.iter().map(|s| s.text.as_str()).collect()
    }

    #[test]
    fn only_claude_code_and_codex_have_a_subscription_variant_and_every_guide_carries_it() {
        for tool in Tool::ALL {
            let has = matches!(tool, Tool::ClaudeCode | Tool::Codex);
            assert_eq!(subscription(tool, &endpoint()).is_some(), has, "{tool:?}");
            assert_eq!(guide(tool, &endpoint()).subscription, subscription(tool, &endpoint()));
        }
    }

    #[test]
    fn claude_codes_subscription_keeps_its_login_and_sends_the_local_key_beside_it() {
        let text = subscription_text(Tool::ClaudeCode);
        for line in [
            "unset ANTHROPIC_AUTH_TOKEN ANTHROPIC_API_KEY\n",
            "export ANTHROPIC_BASE_URL=http://127.0.0.1:4242\n",
            "export ANTHROPIC_CUSTOM_HEADERS=\"x-switchyard-key: sy-test-key\"\n",
            "export ANTHROPIC_MODEL=smart\n",
        ] {
            assert!(text.contains(line), "{line} missing from {text}");
        }
        for replaces_the_login in ["export ANTHROPIC_AUTH_TOKEN", "export ANTHROPIC_API_KEY"] {
            assert!(!text.contains(replaces_the_login), "{text}");
        }
        let note = subscription(Tool::ClaudeCode, &endpoint()).unwrap().note.unwrap();
        assert!(note.contains("ANTHROPIC_AUTH_TOKEN"), "says why they are unset: {note}");
    }

    #[test]
    fn codexs_subscription_signs_with_its_chatgpt_login_and_reads_the_local_key_from_the_environment()
     {
        let lines = subscription(Tool::Codex, &endpoint()).unwrap();
        assert_eq!(lines.writes.as_deref(), Some("~/.codex/config.toml"));
        assert!(lines.snippets[0].text.contains("export SWITCHYARD_KEY=sy-test-key\n"));
        let file = &lines.snippets[1];
        assert_eq!(file.label, "~/.codex/config.toml");
        assert!(!file.text.contains("sy-test-key"), "no key in the file: {}", file.text);
        let table: toml::Table = toml::from_str(&file.text).unwrap();
        assert_eq!(table["model"].as_str(), Some("smart"));
        assert_eq!(table["model_provider"].as_str(), Some("switchyard"));
        let ours = table["model_providers"]["switchyard"].as_table().unwrap();
        assert_eq!(ours["base_url"].as_str(), Some("http://127.0.0.1:4242/v1"));
        assert_eq!(ours["wire_api"].as_str(), Some("responses"));
        assert_eq!(ours["requires_openai_auth"].as_bool(), Some(true));
        let headers = ours["env_http_headers"].as_table().unwrap();
        assert_eq!(headers["x-switchyard-key"].as_str(), Some(KEY_VARIABLE));
        for key_source in ["env_key", "http_headers", "experimental_bearer_token"] {
            assert!(!ours.contains_key(key_source), "{key_source}: Codex's login must sign");
        }
    }

    #[test]
    fn the_suggested_combos_are_configs_switchyard_accepts_with_the_subscription_first() {
        let another = "\n[[providers]]\nid = \"openrouter\"\npreset = \"openrouter\"\ncredentials = [{ id = \"k\", secret = \"env:OPENROUTER_API_KEY\" }]\n";
        for (tool, first, second) in [
            (Tool::ClaudeCode, "claude-sub/", "anthropic/"),
            (Tool::Codex, "chatgpt-sub/", "openai/"),
        ] {
            let lines = subscription(tool, &endpoint()).unwrap();
            let suggested = lines.snippets.last().unwrap();
            assert_eq!(suggested.label, "Switchyard config (the suggested combo)");
            let text = format!("{}{another}", suggested.text);
            let env = |_: &str| Some("a-key".to_owned());
            let config = crate::config::Config::parse(&text, Path::new("suggested.toml"), &env)
                .unwrap_or_else(|e| panic!("{tool:?}: {e}\n{text}"));
            let combo = config.combo("smart").expect("named after the lines' model");
            let targets: Vec<String> =
                combo.targets.iter().map(|t| format!("{}/{}", t.provider, t.model)).collect();
            assert_eq!(targets.len(), 3, "{targets:?}");
            assert!(targets[0].starts_with(first) && targets[1].starts_with(second), "{targets:?}");
            assert!(targets[2].starts_with("openrouter/"), "{targets:?}");
        }
        let none = Endpoint { model: PLACEHOLDER_MODEL.into(), ..endpoint() };
        let lines = subscription(Tool::Codex, &none).unwrap();
        let text: String = lines.snippets.iter().map(|s| s.text.as_str()).collect();
        assert!(!text.contains(PLACEHOLDER_MODEL), "without a combo, the suggested one: {text}");
        assert!(text.contains("model = \"codex\"\n") && text.contains("name = \"codex\"\n"));
        let written = merge_codex("", &none, Login::Subscription).unwrap();
        assert!(written.contains("model = \"codex\"\n"), "{written}");
        let direct = Endpoint { model: "anthropic/claude-x".into(), ..endpoint() };
        let text = subscription(Tool::ClaudeCode, &direct).unwrap().snippets[1].text.clone();
        assert!(text.contains("name = \"claude\"\n"), "a combo name has no slash: {text}");
    }

    #[test]
    fn writing_codexs_subscription_over_the_local_key_leaves_no_env_key_and_back_again() {
        let keyed =
            merge_codex("approval_policy = \"never\"\n", &endpoint(), Login::LocalKey).unwrap();
        let subscribed = merge_codex(&keyed, &endpoint(), Login::Subscription).unwrap();
        let table: toml::Table = toml::from_str(&subscribed).unwrap();
        assert_eq!(table["approval_policy"].as_str(), Some("never"));
        let ours = table["model_providers"]["switchyard"].as_table().unwrap();
        assert!(
            !ours.contains_key("env_key"),
            "a stale env_key would replace the login: {subscribed}"
        );
        assert_eq!(ours["requires_openai_auth"].as_bool(), Some(true));
        assert!(!subscribed.contains("sy-test-key"), "no key in the file: {subscribed}");
        let again = merge_codex(&subscribed, &endpoint(), Login::Subscription).unwrap();
        assert_eq!(again, subscribed, "idempotent");
        let back = merge_codex(&subscribed, &endpoint(), Login::LocalKey).unwrap();
        let ours =
            toml::from_str::<toml::Table>(&back).unwrap()["model_providers"]["switchyard"].clone();
        assert_eq!(ours.get("env_key").and_then(|v| v.as_str()), Some(KEY_VARIABLE));
        assert!(
            ours.get("requires_openai_auth").is_none() && ours.get("env_http_headers").is_none()
        );
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
