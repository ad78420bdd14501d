//! `switchyard providers`, `status` and `link`, and the [`Api`] `doctor` uses too:
//! management API calls, made on the
//! server running on the data directory when there is one (over loopback, with the data
//! directory's management token: the server applies them as it applies the UI's), else on an
//! app started in this process on the same data directory (the same router, in process, as
//! the desktop window uses it). Either way the services, their checks and their messages are
//! the API's; this file only turns flags into calls and answers into lines.

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::{Value, json};
use switchyard::keys;
use switchyard::running::Running;
use switchyard::server::ipc::{ApiCall, ApiReply, InProcess};
use switchyard::server::{ServerState, Shared, UiSessions};
use switchyard::status::{HealthLook, Level, ProviderLook, report};
use switchyard::{App, Launch};
use switchyard_catalogue::local::{LocalAnswer, LocalServers};
use switchyard_secrets::{Secret, SecretRef};

use super::ProvidersCommand;

/// Where the calls go.
pub(super) enum Api {
    /// The server running on the data directory.
    Running { server: Running, token: Secret },
    /// An app started here on the data directory, stopped after the command.
    Here { app: Box<App>, api: InProcess },
}

impl Api {
    /// The running server when it answers, else an app of our own. `edit`: the command
    /// changes the config, which is refused on a server that runs on a `--config` file.
    pub(super) async fn open(data_dir: &Path, edit: bool) -> anyhow::Result<Self> {
        if let Some(api) = Self::find_running(data_dir).await? {
            if edit
                && let Self::Running { server, .. } = &api
                && let Some(file) = &server.config
            {
                anyhow::bail!(
                    "the server running on this data directory (pid {}, port {}) runs on --config {}: \
                     `switchyard providers` edits the config kept in the data directory; edit that file, \
                     or restart the server without --config",
                    server.pid,
                    server.port,
                    file.display()
                );
            }
            return Ok(api);
        }
        let app = App::start(Launch::new(data_dir)).await?;
        // The front door of no socket: no local key is accepted (no `/v1` call is made), and
        // `InProcess` brings a management token of its own.
        let state = ServerState::from(Shared {
            port: 0,
            ipv6: false,
            keys: keys::LocalKeys::new(None),
            management: keys::LocalKeys::new(None),
            ui_sessions: UiSessions::default(),
            proxy: std::sync::Arc::clone(app.proxy()),
            services: std::sync::Arc::clone(app.services()),
            ui: None,
            connections: None,
        });
        let api = InProcess::new(state)?;
        Ok(Self::Here { app: Box::new(app), api })
    }

    /// The server running on the data directory, when one answers; `None` when none runs (or
    /// the one the data directory names is gone). A server that refuses the data directory's
    /// management token is an error: nothing is done behind its back.
    pub(super) async fn find_running(data_dir: &Path) -> anyhow::Result<Option<Self>> {
        let Some(server) = Running::find(data_dir) else { return Ok(None) };
        let token = management_token(data_dir)?;
        let ping = ApiCall { method: "GET".into(), path: "/api/server".into(), body: None };
        match server.call(&token, &ping).await {
            Ok(reply) if reply.status == 200 => Ok(Some(Self::Running { server, token })),
            Ok(reply) => anyhow::bail!(
                "the server on port {} refused the data directory's management token ({}): {}",
                server.port,
                reply.status,
                message(&reply)
            ),
            Err(error) => {
                tracing::debug!(%error, "the server the data directory names does not answer; working on the state file");
                Ok(None)
            }
        }
    }

    pub(super) async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<ApiReply> {
        let call = ApiCall { method: method.into(), path: path.into(), body };
        match self {
            Self::Running { server, token } => server.call(token, &call).await.map_err(|e| {
                anyhow::anyhow!("the server on port {} stopped answering: {e}", server.port)
            }),
            Self::Here { api, .. } => Ok(api.call(call).await),
        }
    }

    pub(super) fn running(&self) -> Option<&Running> {
        match self {
            Self::Running { server, .. } => Some(server),
            Self::Here { .. } => None,
        }
    }

    pub(super) async fn close(self) {
        if let Self::Here { app, .. } = self {
            app.shutdown().await;
        }
    }
}

/// The data directory's management token (or `SWITCHYARD_MANAGEMENT_TOKEN`, as the server
/// reads it).
fn management_token(data_dir: &Path) -> anyhow::Result<Secret> {
    if let Ok(token) = std::env::var(keys::MANAGEMENT_ENV)
        && !token.trim().is_empty()
    {
        return Ok(Secret::new(token.trim()));
    }
    Ok(keys::token_from_file(data_dir)?)
}

/// The message of an error answer, which starts with the field it is about.
pub(super) fn message(reply: &ApiReply) -> String {
    reply.body["error"]["message"].as_str().map_or_else(|| reply.body.to_string(), str::to_owned)
}

/// An error answer as the CLI says it: the flag the field came from, then the API's words.
/// `pasted`: the key came from `--key-stdin`, to be kept in the keychain.
fn refused(reply: &ApiReply, running: Option<&Running>, pasted: bool) -> anyhow::Error {
    let text = message(reply);
    let field = reply.body["error"]["switchyard"]["field"].as_str().unwrap_or("");
    let flag = if field.ends_with("preset") {
        "PRESET: "
    } else if field.contains("models") {
        "--model: "
    } else if field.contains("secret") {
        "--key: "
    } else if field.ends_with("base_url") {
        "--base-url: "
    } else if field == "id" || field.rsplit('.').next() == Some("id") {
        "--id: "
    } else {
        ""
    };
    let mut said = format!("{flag}{text}");
    if pasted && text.contains("keychain") {
        return anyhow::anyhow!(
            "--key-stdin: {text}. Without a keychain, give the server the key another way: \
             `--key env:VARIABLE` (set in the server's own environment), `--key \
             file:/path/to/key` (a file only you can write: systemd's LoadCredential=, a Docker \
             or Kubernetes secret; docs/configuration.md), or start a Secret Service \
             (gnome-keyring, KeePassXC) and run this again"
        );
    }
    if flag == "--key: "
        && let Some(server) = running
        && text.contains("environment variable")
    {
        let _ = write!(
            said,
            " (the running server, pid {}, reads env: references from its own environment: \
             restart it with the variable set, or pass --key-stdin to keep the key in the keychain)",
            server.pid
        );
    }
    anyhow::anyhow!(said)
}

pub(super) async fn manage(data_dir: &Path, command: ProvidersCommand) -> anyhow::Result<ExitCode> {
    let edit = !matches!(command, ProvidersCommand::List | ProvidersCommand::Detect { .. });
    // Read before anything starts: the key is asked for first, and never echoed.
    let pasted = match &command {
        ProvidersCommand::Add { key_stdin: true, .. } => {
            let mut key = String::new();
            std::io::stdin()
                .read_to_string(&mut key)
                .context("--key-stdin: cannot read standard input")?;
            let key = key.trim().to_owned();
            anyhow::ensure!(
                !key.is_empty(),
                "--key-stdin: standard input was empty: pipe the key in"
            );
            Some(Secret::new(key))
        }
        _ => None,
    };
    if let ProvidersCommand::Add { key: Some(key), .. } = &command {
        anyhow::ensure!(
            SecretRef::is_reference(key),
            "--key: give where the key is, `env:VARIABLE`, `file:/path/to/key` or \
             `keychain:PROVIDER/CREDENTIAL`, or pipe the key to --key-stdin: a key written on the \
             command line stays in the shell's history"
        );
    }
    let api = Api::open(data_dir, edit).await?;
    let done = run(&api, command, pasted).await;
    api.close().await;
    done
}

#[expect(
    clippy::print_stdout,
    reason = "printing what changed and the lists is what these commands do"
)]
async fn run(
    api: &Api,
    command: ProvidersCommand,
    pasted: Option<Secret>,
) -> anyhow::Result<ExitCode> {
    match command {
        ProvidersCommand::Add { preset, id, key, key_stdin: _, models, base_url } => {
            let id = id.unwrap_or_else(|| preset.clone());
            let mut form = json!({ "id": id, "preset": preset });
            if !models.is_empty() {
                form["models"] = json!(models);
            }
            if let Some(url) = base_url {
                form["base_url"] = json!(url);
            }
            // `confirm`: the user named this preset (and endpoint) here; its requests may go
            // there. A secret is confirmed by its own credential, below.
            let created = api.call("POST", "/api/providers?confirm=true", Some(form)).await?;
            if created.status != 201 {
                return Err(refused(&created, api.running(), false));
            }
            let credential = match (key, pasted) {
                (Some(reference), _) => {
                    Some(json!({ "id": "main", "secret_ref": reference, "confirm": true }))
                }
                (None, Some(secret)) => {
                    Some(json!({ "id": "main", "secret": secret.expose(), "confirm": true }))
                }
                (None, None) => None,
            };
            if let Some(credential) = credential {
                let pasted = credential["secret"].is_string();
                let path = format!("/api/providers/{id}/credentials");
                let added = api.call("POST", &path, Some(credential)).await?;
                if added.status != 201 {
                    // All or nothing: a provider without the key it was added with is not
                    // what was asked for.
                    let _ = api.call("DELETE", &format!("/api/providers/{id}"), None).await;
                    return Err(refused(&added, api.running(), pasted));
                }
            }
            let view = api.call("GET", &format!("/api/providers/{id}"), None).await?;
            let url = view.body["effective_base_url"].as_str().unwrap_or("?");
            println!("added provider {id} ({preset}) -> {url}");
            for c in view.body["credentials"].as_array().into_iter().flatten() {
                if let Some(why) = c["secret"]["unavailable"].as_str() {
                    println!(
                        "warning: credential {} cannot read its secret yet ({why}): it serves \
                         once it can, read again every few seconds (`switchyard status`)",
                        c["id"].as_str().unwrap_or("?")
                    );
                }
            }
            let listed = models_of(&view.body);
            let example = listed.first().map_or("MODEL", String::as_str);
            println!("route to it with model \"{id}/{example}\", or put it in a combo");
            match api.running() {
                Some(server) => println!("the server on port {} uses it now", server.port),
                None => println!("saved in the data directory: `switchyard serve` runs on it"),
            }
        }
        ProvidersCommand::List => {
            let list = api.call("GET", "/api/providers", None).await?;
            let providers = list.body.as_array().cloned().unwrap_or_default();
            if providers.is_empty() {
                println!("no provider yet: `switchyard providers add PRESET --key env:VAR`");
            }
            for p in &providers {
                let credentials: Vec<String> = p["credentials"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        let id = c["id"].as_str().unwrap_or("?");
                        match c["secret"]["reference"].as_str() {
                            Some(reference) => format!("{id} ({reference})"),
                            None => id.to_owned(),
                        }
                    })
                    .collect();
                let models = models_of(p);
                println!(
                    "{}\t{}\t{}\tcredentials: {}\tmodels: {}",
                    p["id"].as_str().unwrap_or("?"),
                    p["preset"].as_str().unwrap_or("-"),
                    p["effective_base_url"].as_str().unwrap_or("?"),
                    if credentials.is_empty() { "none".to_owned() } else { credentials.join(", ") },
                    if models.is_empty() { "any".to_owned() } else { models.join(", ") },
                );
            }
        }
        ProvidersCommand::Detect { ports } => return detect(api, ports.as_deref()).await,
        ProvidersCommand::Remove { id } => {
            let removed = api.call("DELETE", &format!("/api/providers/{id}"), None).await?;
            if !(200..300).contains(&removed.status) {
                return Err(refused(&removed, api.running(), false));
            }
            println!("removed provider {id}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `switchyard providers detect`: what answered on this machine's loopback ports, each with
/// its models and the command that adds it; exit code 1 when nothing did.
#[expect(clippy::print_stdout, reason = "the list of what answered is what this command prints")]
async fn detect(api: &Api, ports: Option<&str>) -> anyhow::Result<ExitCode> {
    let path = match ports.filter(|p| !p.trim().is_empty()) {
        Some(ports) => {
            let encoded: String = url::form_urlencoded::byte_serialize(ports.as_bytes()).collect();
            format!("/api/local-servers?ports={encoded}")
        }
        None => "/api/local-servers".to_owned(),
    };
    let reply = api.call("GET", &path, None).await?;
    if reply.status != 200 {
        let text = message(&reply);
        let text = text.strip_prefix("ports: ").map_or(text.clone(), |t| format!("--ports: {t}"));
        anyhow::bail!(text);
    }
    let look: LocalServers = serde_json::from_value(reply.body).context("the detection answer")?;
    for line in detect_report(&look) {
        println!("{line}");
    }
    Ok(if look.found().next().is_some() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The lines `detect` prints: each port in the order probed, what answered with its models
/// and how to add it, then one line that sums up.
fn detect_report(look: &LocalServers) -> Vec<String> {
    let mut lines = Vec::new();
    for probe in &look.probes {
        let (name, port, ms) = (probe.probed.name(), probe.port, probe.elapsed_ms);
        match &probe.answer {
            LocalAnswer::Found(found) => {
                let models = match found.models.len() {
                    0 => "no models yet".to_owned(),
                    1 => "1 model".to_owned(),
                    n => format!("{n} models"),
                };
                lines.push(format!(
                    "found {} on port {port} ({ms} ms): {}, {models}",
                    found.server.name(),
                    found.base_url
                ));
                lines.extend(found.models.iter().map(|m| format!("  {m}")));
                if found.providers.is_empty() {
                    lines.push(format!(
                        "  add it: switchyard providers add {} --base-url {}",
                        found.preset, found.base_url
                    ));
                } else {
                    lines.push(format!("  configured as {}", found.providers.join(", ")));
                }
            }
            LocalAnswer::Refused => {
                lines.push(format!("{name}, port {port}: nothing listens ({ms} ms)"));
            }
            LocalAnswer::TimedOut => lines.push(format!(
                "{name}, port {port}: accepted, no answer within {} ms",
                switchyard::services::PROBE_LIMIT.as_millis()
            )),
            LocalAnswer::Unrecognised { detail } => {
                lines.push(format!("{name}, port {port}: not a model server: {detail} ({ms} ms)"));
            }
        }
    }
    let ports: Vec<String> = look.probes.iter().map(|p| p.port.to_string()).collect();
    let found = look.found().count();
    lines.push(if look.probes.is_empty() {
        "no port to look at: the ports given are `none`".to_owned()
    } else if found == 0 {
        format!(
            "no model server answered on this machine (ports {}; {} ms): start Ollama, LM Studio, \
             llama.cpp's server or vLLM, or add one by hand with `switchyard providers add`",
            ports.join(", "),
            look.elapsed_ms
        )
    } else {
        format!("{found} found on ports {} in {} ms", ports.join(", "), look.elapsed_ms)
    });
    lines
}

fn models_of(provider: &Value) -> Vec<String> {
    provider["models"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m.as_str().or_else(|| m["id"].as_str()).map(str::to_owned))
        .collect()
}

/// `switchyard status`: exit code 1 when something is red.
#[expect(clippy::print_stdout, reason = "the report is what this command prints")]
pub(super) async fn status(data_dir: &Path) -> anyhow::Result<ExitCode> {
    let api = Api::open(data_dir, false).await?;
    let looked = async {
        let health = api.call("GET", "/api/monitoring/health", None).await?;
        anyhow::ensure!(health.status == 200, "GET /api/monitoring/health: {}", message(&health));
        let providers = api.call("GET", "/api/providers", None).await?;
        anyhow::ensure!(providers.status == 200, "GET /api/providers: {}", message(&providers));
        let health: HealthLook = serde_json::from_value(health.body).context("the health page")?;
        let providers: Vec<ProviderLook> =
            serde_json::from_value(providers.body).context("the provider list")?;
        Ok(report(&health, &providers))
    }
    .await;
    let source = match api.running() {
        Some(server) => format!("the server on port {} (pid {})", server.port, server.pid),
        None => "the state file (no server is running on this data directory)".to_owned(),
    };
    api.close().await;
    let report = looked?;
    println!("{}: {}", report.level.word(), source);
    for line in &report.lines {
        println!("  {line}");
    }
    Ok(if report.level == Level::Red { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// `switchyard link`: a new sign-in link from the running server.
#[expect(clippy::print_stdout, reason = "the link is what this command prints")]
pub(super) async fn link(data_dir: &Path) -> anyhow::Result<()> {
    let server = Running::find(data_dir).context(
        "no server is running on this data directory: `switchyard serve` prints a link when it starts",
    )?;
    let token = management_token(data_dir)?;
    let call = ApiCall { method: "POST".into(), path: "/api/session/code".into(), body: None };
    let reply = server
        .call(&token, &call)
        .await
        .map_err(|e| anyhow::anyhow!("the server on port {}: {e}", server.port))?;
    anyhow::ensure!(reply.status == 201, "the server refused: {}", message(&reply));
    println!("{}", reply.body["link"].as_str().unwrap_or_default());
    Ok(())
}
