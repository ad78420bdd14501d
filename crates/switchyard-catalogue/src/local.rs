//! The model servers that may run on this machine (Ollama, LM Studio, llama.cpp's server,
//! vLLM): where each listens by default, which answer is asked of it, and what an answer means.
//! The app probes loopback (I/O, its business); everything it then decides is here.
//!
//! Invariants:
//! - An answer counts only in the shape its server documents: Ollama's `GET /api/tags`
//!   (`{"models": [{"name": ...}]}`), the others' `GET /v1/models` (an OpenAI model list,
//!   `{"data": [{"id": ...}]}`). Anything else on the port (another program, an error page, a
//!   server that wants a key) is named, never taken for a model server.
//! - llama.cpp and vLLM are told apart by what their lists say about themselves, not by the
//!   port: vLLM's entries are `"owned_by": "vllm"` with a `max_model_len`, llama.cpp's
//!   `"owned_by": "llamacpp"` with a `meta` object (its router mode: a `status` object). A
//!   list that says neither is LM Studio's only on LM Studio's port, whose lists carry no mark.
//! - Each server maps to the catalogue preset of the same id, so adding one is `preset = id`.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use ts_rs::TS;

/// A model server that may run on this machine. Its serde name is its catalogue preset's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
#[ts(export)]
pub enum LocalServer {
    #[serde(rename = "ollama")]
    Ollama,
    #[serde(rename = "lmstudio")]
    LmStudio,
    #[serde(rename = "llamacpp")]
    LlamaCpp,
    #[serde(rename = "vllm")]
    Vllm,
}

impl LocalServer {
    /// In the order they are listed and probed.
    pub const ALL: [Self; 4] = [Self::Ollama, Self::LmStudio, Self::LlamaCpp, Self::Vllm];

    /// Its catalogue preset (and its name in a port list).
    pub fn preset(self) -> &'static str {
        match self {
            Self::Ollama => "ollama",
            Self::LmStudio => "lmstudio",
            Self::LlamaCpp => "llamacpp",
            Self::Vllm => "vllm",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Ollama => "Ollama",
            Self::LmStudio => "LM Studio",
            Self::LlamaCpp => "llama.cpp",
            Self::Vllm => "vLLM",
        }
    }

    /// The port it listens on unless told otherwise (each one's documentation).
    pub fn default_port(self) -> u16 {
        match self {
            Self::Ollama => 11434,
            Self::LmStudio => 1234,
            Self::LlamaCpp => 8080,
            Self::Vllm => 8000,
        }
    }

    /// What is asked of it: a read-only model list that needs no key.
    pub fn path(self) -> &'static str {
        match self {
            Self::Ollama => "/api/tags",
            Self::LmStudio | Self::LlamaCpp | Self::Vllm => "/v1/models",
        }
    }

    pub fn from_preset(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.preset() == id)
    }

    /// The base URL a provider reaches it at on `port`: the address that answered, never
    /// `localhost`, which may resolve to `[::1]` first, where another program may listen.
    pub fn base_url(self, port: u16) -> String {
        format!("http://127.0.0.1:{port}/v1")
    }
}

impl fmt::Display for LocalServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where to look: which server's answer to ask for on which loopback port, each port once.
/// The default is every server on its default port; tests and unusual setups name others
/// (`ollama:11500,vllm:8001`), or `none`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalPorts(Vec<(LocalServer, u16)>);

impl Default for LocalPorts {
    fn default() -> Self {
        Self(LocalServer::ALL.into_iter().map(|s| (s, s.default_port())).collect())
    }
}

impl LocalPorts {
    pub const SYNTAX: &'static str =
        "comma-separated SERVER:PORT pairs (servers: ollama, lmstudio, llamacpp, vllm), or none";

    /// Parses `ollama:11434,lmstudio:1234` (or `none`). A port named twice is refused: one
    /// port gives one answer.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let spec = spec.trim();
        if spec.eq_ignore_ascii_case("none") {
            return Ok(Self(Vec::new()));
        }
        let mut pairs: Vec<(LocalServer, u16)> = Vec::new();
        for item in spec.split(',').map(str::trim) {
            let (server, port) = item
                .split_once(':')
                .ok_or_else(|| format!("\"{item}\" is not SERVER:PORT; give {}", Self::SYNTAX))?;
            let server = LocalServer::from_preset(server.trim()).ok_or_else(|| {
                format!(
                    "\"{}\" is not a local server: ollama, lmstudio, llamacpp or vllm",
                    server.trim()
                )
            })?;
            let port = match port.trim().parse::<u16>() {
                Ok(port) if port > 0 => port,
                _ => return Err(format!("\"{}\" is not a port (1 to 65535)", port.trim())),
            };
            if pairs.iter().any(|(_, p)| *p == port) {
                return Err(format!("port {port} is named twice"));
            }
            pairs.push((server, port));
        }
        Ok(Self(pairs))
    }

    pub fn pairs(&self) -> &[(LocalServer, u16)] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for LocalPorts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        for (i, (server, port)) in self.0.iter().enumerate() {
            let comma = if i == 0 { "" } else { "," };
            write!(f, "{comma}{}:{port}", server.preset())?;
        }
        Ok(())
    }
}

/// What one loopback probe found, as `GET /api/local-servers` and `switchyard providers
/// detect` report it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct LocalProbe {
    /// The server whose answer was asked for on this port (its default port's owner).
    pub probed: LocalServer,
    pub port: u16,
    /// From the connection attempt to the whole answer, or to giving up.
    #[ts(type = "number")]
    pub elapsed_ms: u64,
    pub answer: LocalAnswer,
}

/// How a port answered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum LocalAnswer {
    /// A model server answered in its own shape.
    Found(FoundServer),
    /// Nothing listens there.
    Refused,
    /// It accepted the connection but gave no whole answer within the limit.
    TimedOut,
    /// Something answered that is not a model list of a server we know, or the connection
    /// failed otherwise; `detail` says which.
    Unrecognised { detail: String },
}

/// A model server that answered, and how to reach it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct FoundServer {
    /// What its answer says it is (a vLLM on llama.cpp's port is a vLLM).
    pub server: LocalServer,
    /// Its catalogue preset.
    pub preset: String,
    /// What a provider's `base_url` is to reach it.
    pub base_url: String,
    /// The models it lists, in its order.
    pub models: Vec<String>,
    /// Configured providers that already point at this port.
    pub providers: Vec<String>,
}

/// Every probe of one look, in the order of the ports asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct LocalServers {
    pub probes: Vec<LocalProbe>,
    /// The whole look: the probes run at once, so about the slowest one.
    #[ts(type = "number")]
    pub elapsed_ms: u64,
}

impl LocalServers {
    pub fn found(&self) -> impl Iterator<Item = (&LocalProbe, &FoundServer)> {
        self.probes.iter().filter_map(|p| match &p.answer {
            LocalAnswer::Found(found) => Some((p, found)),
            _ => None,
        })
    }
}

/// What an answer on `port`, asked of `probed` (its [`LocalServer::path`]), says: the server
/// and its models, or why it is none of them.
pub fn recognise(
    probed: LocalServer,
    port: u16,
    status: u16,
    body: &[u8],
) -> Result<FoundServer, String> {
    if !(200..300).contains(&status) {
        let hint = if matches!(status, 401 | 403) { " (it wants a key)" } else { "" };
        return Err(format!("answered HTTP {status} to GET {}{hint}", probed.path()));
    }
    let json: Value = serde_json::from_slice(body)
        .map_err(|_| format!("answered GET {} with something other than JSON", probed.path()))?;
    let (server, models) = match probed {
        LocalServer::Ollama => (LocalServer::Ollama, ollama_tags(&json)?),
        LocalServer::LmStudio | LocalServer::LlamaCpp | LocalServer::Vllm => {
            let (entries, models) = openai_list(&json)?;
            let server = says_which(&json, entries).or_else(|| {
                // LM Studio's lists carry no mark of their own: on its port, an unmarked list
                // is its; elsewhere an unmarked list is some other OpenAI-compatible server.
                (probed == LocalServer::LmStudio).then_some(LocalServer::LmStudio)
            });
            let server = server.ok_or_else(|| {
                format!(
                    "an OpenAI model list that says neither llama.cpp nor vLLM (not {})",
                    probed.name()
                )
            })?;
            (server, models)
        }
    };
    Ok(FoundServer {
        server,
        preset: server.preset().to_owned(),
        base_url: server.base_url(port),
        models,
        providers: Vec::new(),
    })
}

/// Ollama's `{"models": [{"name": ...}]}`; an empty list is a server with nothing pulled.
fn ollama_tags(json: &Value) -> Result<Vec<String>, String> {
    let entries = json
        .get("models")
        .and_then(Value::as_array)
        .ok_or("answered GET /api/tags without Ollama's \"models\" list")?;
    let names = entries.iter().map(|m| m.get("name").and_then(Value::as_str));
    collect_ids(names).ok_or_else(|| "a \"models\" entry has no \"name\"".to_owned())
}

/// An OpenAI list, `{"data": [{"id": ...}]}`, with its entries.
fn openai_list(json: &Value) -> Result<(&[Value], Vec<String>), String> {
    let entries = json
        .get("data")
        .and_then(Value::as_array)
        .ok_or("answered GET /v1/models without an OpenAI model list (\"data\")")?;
    if json.get("object").is_some_and(|o| o != "list") {
        return Err("answered GET /v1/models with an object that is not a \"list\"".to_owned());
    }
    let ids = entries.iter().map(|m| m.get("id").and_then(Value::as_str));
    let models = collect_ids(ids).ok_or("a \"data\" entry has no \"id\"")?;
    Ok((entries, models))
}

/// Which server a list says it came from, by its entries' own fields.
fn says_which(json: &Value, entries: &[Value]) -> Option<LocalServer> {
    let owned_by = |e: &Value, who: &str| e.get("owned_by").and_then(Value::as_str) == Some(who);
    let object = |e: &Value, field: &str| e.get(field).is_some_and(Value::is_object);
    if entries.iter().any(|e| owned_by(e, "vllm") || e.get("max_model_len").is_some()) {
        return Some(LocalServer::Vllm);
    }
    let llamacpp =
        entries.iter().any(|e| owned_by(e, "llamacpp") || object(e, "meta") || object(e, "status"));
    // Its single-model list also carries an Ollama-style `models` beside `data`.
    let both = json.get("models").is_some_and(Value::is_array) && !entries.is_empty();
    (llamacpp || both).then_some(LocalServer::LlamaCpp)
}

/// The ids in order, each once; `None` when one is missing or empty.
fn collect_ids<'a>(ids: impl Iterator<Item = Option<&'a str>>) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for id in ids {
        let id = id.filter(|id| !id.trim().is_empty())?;
        if !out.iter().any(|seen| seen == id) {
            out.push(id.to_owned());
        }
    }
    Some(out)
}

/// Whether a provider's `base_url` reaches loopback `port` (`localhost`, `127.0.0.1` or
/// `[::1]`, over plain HTTP): the provider a found server already is.
pub fn reaches_loopback_port(base_url: &str, port: u16) -> bool {
    let Some(rest) = base_url.trim().strip_prefix("http://") else { return false };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let (host, at) = match authority.rsplit_once(':') {
        Some((host, at)) if !at.contains(']') => (host, at.parse::<u16>().ok()),
        _ => (authority, Some(80)),
    };
    let loopback =
        matches!(host.to_ascii_lowercase().as_str(), "localhost" | "127.0.0.1" | "[::1]");
    loopback && at == Some(port)
}

#[cfg(test)]
mod tests;
