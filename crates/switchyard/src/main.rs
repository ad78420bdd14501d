//! `switchyard`: the command-line entry point.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use switchyard::config::stored;
use switchyard::config::{Config, ConfigForm, Sources};
use switchyard::keys;
use switchyard::running::Running;
use switchyard::server::{CODE_LIFETIME, WebUi};
use switchyard::services::{ImportedPair, ImportedTeam, PairState, imported_pairs, imported_team};
use switchyard::{App, Launch, STATE_FILE, default_data_dir, mark_first_use};

/// mimalloc, not the system allocator: glibc's `malloc`, `free` and `realloc` were about a
/// third of the instructions the proxy adds to a small chat request beyond a bare
/// pass-through; with mimalloc the connection's task runs 19k fewer per request (see docs/benchmarks.md). Built without transparent huge pages (`no_thp`): with them the
/// resident set after the bench's load went from 28 to 57 MB, without them to 31 MB.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "cli/doctor.rs"]
mod doctor;
#[path = "cli/providers.rs"]
mod providers;
use switchyard_core::binding::{self, Binding, Confirmed};
use switchyard_core::resilience::SkipReason;
use switchyard_core::{Clock as _, SystemClock};
use switchyard_secrets::KeychainStore;
use switchyard_store::Store;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Parser)]
#[command(
    name = "switchyard",
    version,
    about = "A local LLM router with three layers of failure isolation"
)]
struct Cli {
    /// Where the state database lives [default: the platform data directory].
    #[arg(long, global = true, env = "SWITCHYARD_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Threads of the async runtime. One runs everything on one thread: no task waits for a
    /// wake-up from another, which took about 50 µs off the added latency at one request at a
    /// time (docs/benchmarks.md). More spread heavy concurrent load over cores.
    #[arg(long, global = true, env = "SWITCHYARD_THREADS", default_value_t = 1)]
    threads: usize,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the OpenAI- and Anthropic-compatible endpoint on 127.0.0.1 until Ctrl-C / SIGTERM.
    Serve {
        /// The config file (TOML) declaring providers, credentials, combos and settings.
        #[arg(long, env = "SWITCHYARD_CONFIG")]
        config: Option<PathBuf>,
        /// The loopback port [default: the config's `server.port`, else 4141]; 0 picks a free one.
        #[arg(long)]
        port: Option<u16>,
        /// Serve the web UI built in DIR (`ui/dist`) at `http://127.0.0.1:PORT/` instead of the
        /// one compiled into this binary (development).
        #[arg(long, value_name = "DIR", env = "SWITCHYARD_UI")]
        ui: Option<PathBuf>,
    },
    /// Add, list or remove providers of the config kept in the data directory (what `serve`
    /// without `--config` runs on). With a server running on it, through that server's API, so
    /// the change applies at once; refused when that server runs on a `--config` file.
    Providers {
        #[command(subcommand)]
        command: ProvidersCommand,
    },
    /// What the tray shows: each provider's breaker, benched credentials, model lockouts and
    /// whether each combo could serve. Asks the server running on the data directory, else
    /// reads the state file. Exits with 1 when something is red (nothing could serve).
    Status,
    /// What the doctor finds wrong (a breaker that keeps re-opening, a retired model, a stale
    /// bench, a destination never confirmed, ...): each finding's id, evidence and what to do.
    /// Asks the server running on the data directory, else reads the state file. Exits with 1
    /// when there are findings.
    Doctor {
        /// Apply finding ID (as listed), only if its evidence is still what was just read.
        #[arg(long, value_name = "ID")]
        apply: Option<String>,
        /// With --apply: say what would change, change nothing.
        #[arg(long, requires = "apply")]
        dry_run: bool,
        /// With --apply of a confirmation: confirm what it lists without asking.
        #[arg(long, requires = "apply")]
        yes: bool,
    },
    /// Print a new sign-in link for the web UI of the server running on the data directory
    /// (it opens one session, once, within 5 minutes).
    Link,
    /// Manage the local API keys clients use to call `/v1`.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Export or import the config kept in the data directory (what `serve` without `--config`
    /// and the desktop app run on).
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Print the lines that point TOOL at this endpoint (environment variables, config file
    /// blocks, settings), with a key and a combo filled in.
    Connect(ConnectArgs),
}

#[derive(Debug, clap::Args)]
struct ConnectArgs {
    tool: switchyard::connect::Tool,
    /// The port clients reach [default: the stored config's `server.port`, else 4141].
    #[arg(long)]
    port: Option<u16>,
    /// The combo (or provider/model) the tool asks for [default: the stored config's first
    /// combo].
    #[arg(long)]
    model: Option<String>,
    /// A local key to fill in [default: a placeholder; see --create-key].
    #[arg(long, env = "SWITCHYARD_KEY", conflicts_with = "create_key")]
    key: Option<String>,
    /// Create a local key named after the tool, so it can be revoked alone, and fill it in.
    #[arg(long)]
    create_key: bool,
    /// Also make the change in the tool's config file, where it documents one (Codex:
    /// ~/.codex/config.toml; the old file is kept as config.toml.bak).
    #[arg(long)]
    write: bool,
    /// Keep your subscription (claude-code, codex): the tool keeps its own login, which a
    /// provider with `preset = "claude-subscription"` or `"chatgpt-subscription"` passes
    /// through, and sends the local key in `x-switchyard-key`.
    #[arg(long)]
    subscription: bool,
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the config as a config file (TOML; secrets appear as references only).
    Export,
    /// Check a config file and make it the stored config. Nothing changes if it is invalid.
    /// Every destination its requests go to and every (secret reference, destination) pair it
    /// sends is listed as `new` or `known`, and its `[team]` database when it names one; a
    /// new one leaves its credentials unusable until confirmed (`config confirm`).
    Import {
        file: PathBuf,
        /// Only check the file (and list its pairs).
        #[arg(long)]
        dry_run: bool,
        /// Replace a stored config that is read-only here (a newer Switchyard wrote it, or it
        /// does not read): what this version does not understand of it is lost.
        #[arg(long)]
        over_newer: bool,
    },
    /// List the providers whose requests would go to a destination never confirmed, and the
    /// credentials that would send a secret to a destination never confirmed for it, and
    /// confirm them after a y/N prompt. A running server reads confirmations at start; use the
    /// Providers page or the API to confirm for a running one.
    Confirm {
        /// The config file to confirm [default: the config kept in the data directory].
        #[arg(long, env = "SWITCHYARD_CONFIG")]
        config: Option<PathBuf>,
        /// Only this provider's credentials.
        #[arg(long, value_name = "ID")]
        provider: Option<String>,
        /// Confirm without asking.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Debug, Subcommand)]
enum ProvidersCommand {
    /// Add a provider from the catalogue: `switchyard providers add openrouter --key
    /// env:OPENROUTER_API_KEY` (presets: openai, anthropic, gemini, openrouter, groq, deepseek,
    /// mistral, moonshot, xai, together, fireworks, cerebras, ollama, lmstudio, llamacpp, vllm).
    Add {
        /// The catalogue preset.
        preset: String,
        /// The provider's id, used in targets (`ID/model`) [default: the preset's name].
        #[arg(long)]
        id: Option<String>,
        /// Where its key is: `env:VARIABLE` (read by the server from its own environment),
        /// `file:/path/to/key` (a file only its owner can write) or `keychain:ID/main`. Never
        /// the key itself (it would stay in the shell's history).
        #[arg(long, conflicts_with = "key_stdin", value_name = "REFERENCE")]
        key: Option<String>,
        /// Read the key from standard input and keep it in the OS keychain.
        #[arg(long)]
        key_stdin: bool,
        /// A model it serves (repeat for more) [default: any the provider serves].
        #[arg(long = "model", value_name = "MODEL")]
        models: Vec<String>,
        /// Another endpoint than the preset's (a proxy, a self-hosted server).
        #[arg(long, value_name = "URL")]
        base_url: Option<String>,
    },
    /// List the providers: id, preset, endpoint, credentials and models.
    List,
    /// Look for model servers running on this machine (Ollama on port 11434, LM Studio on 1234,
    /// llama.cpp's server on 8080, vLLM on 8000) and list what answered, with its models and
    /// the command that adds it. Loopback only, no key sent, at most 300 ms a port, all at
    /// once. Exits with 1 when none answered.
    Detect {
        /// Other ports to look at: `ollama:11500,vllm:8001` (SERVER:PORT pairs; servers
        /// ollama, lmstudio, llamacpp, vllm), or `none` [default: each server's own port].
        #[arg(long, value_name = "SERVER:PORT,...", env = "SWITCHYARD_LOCAL_PORTS")]
        ports: Option<String>,
    },
    /// Remove a provider (and the keys it kept in the keychain); refused while a combo uses it.
    Remove { id: String },
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Create a key and print it once.
    Create {
        /// A name to recognise the key by (e.g. the editor that uses it).
        #[arg(long, default_value = "default")]
        name: String,
    },
    /// List keys (never their secrets).
    List,
    /// Revoke a key by id or name (names are unique among live keys).
    Revoke { key: String },
    /// Replace the management token (the data directory's `management-token` file, owner-only)
    /// and print the new one; the old one stops working, in a running server too.
    RotateManagementToken,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // These commands start an app of their own when no server runs: its start-up lines are
    // not theirs to print (their output is the answer); only what went wrong is.
    let quiet = matches!(
        cli.command,
        Command::Providers { .. } | Command::Status | Command::Doctor { .. } | Command::Link
    );
    let level = if quiet { "warn" } else { "info" };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("SWITCHYARD_LOG").unwrap_or_else(|_| EnvFilter::new(level)),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match runtime(cli.threads) {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!("cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}

/// One thread runs everything when `threads` is 1: no task ever waits for a wake-up from
/// another thread, which is what a proxy in front of one user's tools wants. More threads
/// spread heavy concurrent load over cores.
fn runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    builder.enable_all().build()
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let data_dir = cli
        .data_dir
        .or_else(default_data_dir)
        .context("no data directory: pass --data-dir or set SWITCHYARD_DATA_DIR")?;
    match cli.command {
        Command::Serve { config, port, ui } => serve(&data_dir, config.as_deref(), port, ui).await,
        Command::Keys { command } => manage_keys(&data_dir, command).await,
        Command::Config { command } => manage_config(&data_dir, command).await,
        Command::Connect(args) => connect(&data_dir, args).await,
        Command::Providers { command } => return providers::manage(&data_dir, command).await,
        Command::Status => return providers::status(&data_dir).await,
        Command::Doctor { apply, dry_run, yes } => {
            return doctor::doctor(&data_dir, apply, dry_run, yes).await;
        }
        Command::Link => providers::link(&data_dir).await,
    }
    .map(|()| ExitCode::SUCCESS)
}

async fn serve(
    data_dir: &Path,
    config_file: Option<&Path>,
    port: Option<u16>,
    ui: Option<PathBuf>,
) -> anyhow::Result<()> {
    if let Some(dir) = &ui {
        anyhow::ensure!(
            dir.join("index.html").is_file(),
            "--ui {}: no index.html there (build the UI first: `npm --prefix ui run build`)",
            dir.display()
        );
    }
    let mut launch = Launch::new(data_dir);
    if let Some(file) = config_file {
        launch = launch.config_file(file);
    }
    let mut phases = switchyard::phases::Phases::start();
    let app = App::start(launch).await?;
    phases.done("app started");
    let port = port.unwrap_or(app.config().port);
    let listening = match app.listen(port).await {
        Ok(listening) => listening,
        Err(error) => {
            app.shutdown().await;
            return Err(error.into());
        }
    };
    let port = listening.port();
    phases.done("port bound, local keys and management token read");
    let mut state = listening.state;
    let has_ui = if let Some(dir) = ui {
        tracing::info!(ui = %dir.display(), "serving the web UI at http://127.0.0.1:{port}/");
        state = state.with_ui(dir);
        true
    } else {
        state = state.with_embedded_ui();
        WebUi::is_built_in()
    };
    // Where the CLI finds this server (`switchyard providers`, `status`, `doctor`, `link`).
    let running = Running::this_process(port, config_file).write(data_dir);
    if let Err(error) = &running {
        tracing::warn!(%error, "cannot write {}: `switchyard status` and `providers` will not find this server", switchyard::running::RUNNING_FILE);
    }
    // On stdout, so scripts and tests can wait for them: the listening line first, the link
    // to open last.
    #[expect(
        clippy::print_stdout,
        reason = "the listening line and the sign-in link are the CLI's output"
    )]
    {
        println!("listening on http://127.0.0.1:{port}/v1");
        if app.config().providers.is_empty() {
            println!(
                "no provider yet: add one in the web UI (the link below), or run `switchyard providers add openrouter --key env:OPENROUTER_API_KEY` (or any catalogue preset: openai, anthropic, groq, ollama, ...)"
            );
        }
        match (has_ui, state.sign_in_link()) {
            (true, Some(link)) => println!(
                "web UI at http://127.0.0.1:{port}/ ; this link signs you in (once, within {} minutes): {link}",
                CODE_LIFETIME.as_secs() / 60
            ),
            (true, None) => {
                println!("web UI at http://127.0.0.1:{port}/ (sign in with the management token)");
            }
            (false, _) => println!(
                "this build has no web UI: `scripts/serve` builds it (Node.js 20.19+), or pass --ui DIR; http://127.0.0.1:{port}/ says how"
            ),
        }
    }
    phases.done("running file written, start lines printed");
    tracing::info!(port, data_dir = %data_dir.display(), persistence = ?app.persistence_status(), "switchyard is serving");
    switchyard::server::serve(listening.listener, state, async {
        if let Err(error) = shutdown_signal().await {
            tracing::error!(%error, "cannot listen for shutdown signals");
        }
        tracing::info!("shutting down: finishing requests in flight");
    })
    .await?;
    drop(running);
    app.shutdown().await;
    Ok(())
}

/// `switchyard keys`: through the management API of the server running on the data directory
/// when there is one, so a key created works and a key revoked stops at once (the server's
/// own list of keys changes with the call); else on the state file.
#[expect(clippy::print_stdout, reason = "printing keys and lists is what these commands do")]
async fn manage_keys(data_dir: &Path, command: KeysCommand) -> anyhow::Result<()> {
    if !matches!(command, KeysCommand::RotateManagementToken)
        && let Some(api) = providers::Api::find_running(data_dir).await?
    {
        return keys_through(&api, command).await;
    }
    let path = data_dir.join(STATE_FILE);
    let store =
        Store::open(&path).await.with_context(|| format!("cannot open {}", path.display()))?;
    let now = SystemClock.now();
    match command {
        KeysCommand::Create { name } => {
            let new = keys::create(&store, &name, now).await?;
            println!("{}", new.key.expose());
            tracing::info!(
                id = new.record.id,
                name,
                "created; the key is printed once, store it now"
            );
        }
        KeysCommand::List => {
            for key in store.api_keys().await? {
                let state = if key.revoked_at.is_some() { "revoked" } else { "active" };
                println!("{}\t{}\t{}\t{}", key.id, key.name, key.hint, state);
            }
        }
        KeysCommand::Revoke { key } => {
            let revoked = keys::revoke(&store, &key, now).await?;
            let id = revoked.with_context(|| format!("no active key with id or name {key:?}"))?;
            println!("revoked {id}");
        }
        KeysCommand::RotateManagementToken => {
            let token = keys::rotate_management_token(data_dir)?;
            println!("{}", token.expose());
            tracing::info!(
                file = %data_dir.join(keys::MANAGEMENT_FILE).display(),
                "the management token is replaced; a running server accepts only the new one"
            );
            if std::env::var_os(keys::MANAGEMENT_ENV).is_some() {
                tracing::warn!(
                    "{} is set: a server started with it uses that token, not the file's",
                    keys::MANAGEMENT_ENV
                );
            }
        }
    }
    store.close().await;
    Ok(())
}

/// [`manage_keys`] on a running server: the same calls the Keys page makes.
#[expect(clippy::print_stdout, reason = "printing keys and lists is what these commands do")]
async fn keys_through(api: &providers::Api, command: KeysCommand) -> anyhow::Result<()> {
    let refused = |reply: &switchyard::server::ipc::ApiReply| {
        anyhow::anyhow!("the running server refused it: {}", providers::message(reply))
    };
    match command {
        KeysCommand::Create { name } => {
            let reply =
                api.call("POST", "/api/keys", Some(serde_json::json!({ "name": name }))).await?;
            if reply.status != 201 {
                return Err(refused(&reply));
            }
            println!("{}", reply.body["key"].as_str().unwrap_or_default());
            tracing::info!(
                id = reply.body["id"].as_str().unwrap_or_default(),
                name,
                "created, and the running server accepts it now; the key is printed once, store it now"
            );
        }
        KeysCommand::List => {
            let reply = api.call("GET", "/api/keys", None).await?;
            if reply.status != 200 {
                return Err(refused(&reply));
            }
            for key in reply.body.as_array().into_iter().flatten() {
                let state = if key["revoked_at"].is_null() { "active" } else { "revoked" };
                let field = |name: &str| key[name].as_str().unwrap_or_default().to_owned();
                println!("{}\t{}\t{}\t{state}", field("id"), field("name"), field("hint"));
            }
        }
        KeysCommand::Revoke { key } => {
            let path = format!("/api/keys/{}", percent_encoded(&key));
            let reply = api.call("DELETE", &path, None).await?;
            if reply.status == 404 {
                anyhow::bail!("no active key with id or name {key:?}");
            }
            if reply.status != 200 {
                return Err(refused(&reply));
            }
            println!("revoked {key}");
        }
        KeysCommand::RotateManagementToken => {
            anyhow::bail!(
                "the management token is the data directory's file: rotated in place, not through a server"
            )
        }
    }
    Ok(())
}

/// `text` as one path segment: every byte but unreserved ones percent-encoded.
fn percent_encoded(text: &str) -> String {
    use std::fmt::Write as _;
    text.bytes().fold(String::with_capacity(text.len()), |mut out, byte| {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
        out
    })
}

/// Reads or replaces the config kept in the state file. Works on the file directly, so a
/// stored config that no longer validates (a missing environment variable) can still be
/// exported and replaced.
#[expect(clippy::print_stdout, reason = "printing the config is what these commands do")]
async fn manage_config(data_dir: &Path, command: ConfigCommand) -> anyhow::Result<()> {
    let path = data_dir.join(STATE_FILE);
    match command {
        ConfigCommand::Export => {
            let store = Store::open(&path)
                .await
                .with_context(|| format!("cannot open {}", path.display()))?;
            let read = stored::read(&store).await;
            store.close().await;
            let read = read?.unwrap_or_default();
            if let Some(read_only) = &read.read_only {
                tracing::warn!(
                    set_aside = ?read_only.set_aside,
                    "{}; the export leaves out what this version set aside",
                    read_only.message
                );
            }
            print!("{}", read.form.to_toml());
        }
        ConfigCommand::Import { file, dry_run, over_newer } => {
            // Checked whole, secrets resolved, exactly as `serve --config` would.
            let config = {
                let file = file.clone();
                // The keychain answers over IPC: off the runtime's thread.
                tokio::task::spawn_blocking(move || Config::load(&file)).await??
            };
            let store = Store::open(&path)
                .await
                .with_context(|| format!("cannot open {}", path.display()))?;
            let done = import(&store, &config, dry_run, over_newer).await;
            store.close().await;
            let (pairs, team) = done?;
            let done = if dry_run { "checked" } else { "imported" };
            println!(
                "{done} {}: {} providers, {} combos",
                file.display(),
                config.providers.len(),
                config.combos.len()
            );
            for pair in &pairs {
                let state = match pair.state {
                    PairState::New => "new",
                    PairState::Known => "known",
                };
                println!(
                    "{state:<5}  {} -> {}  ({})",
                    what_is_sent(pair.reference.as_deref()),
                    pair.destination,
                    pair.credentials.join(", ")
                );
            }
            if let Some(team) = &team {
                let state = match team.state {
                    PairState::New => "new",
                    PairState::Known => "known",
                };
                println!(
                    "{state:<5}  team database {} -> from the next start, health state is shared with whatever database it names",
                    team.database_url
                );
            }
            for (key, why) in config.unavailable_secrets() {
                println!(
                    "waits  {}/{}: its secret cannot be read yet ({why}); it serves once it can",
                    key.provider, key.credential
                );
            }
            let new = pairs.iter().filter(|p| p.state == PairState::New).count();
            if new > 0 && !dry_run {
                println!(
                    "{new} new destinations or pairs: their credentials stay unusable until you run `switchyard config confirm`"
                );
            }
        }
        ConfigCommand::Confirm { config, provider, yes } => {
            let config = match config {
                Some(file) => tokio::task::spawn_blocking(move || Config::load(&file)).await??,
                None => stored_config(&path).await?,
            };
            let store = Store::open(&path)
                .await
                .with_context(|| format!("cannot open {}", path.display()))?;
            let done = confirm(&store, &config, provider.as_deref(), yes).await;
            store.close().await;
            done?;
        }
    }
    Ok(())
}

/// `switchyard connect TOOL`: the text comes from `switchyard::connect`; here only the stored
/// config and key are read, and with `--write` the one file a tool documents is edited.
#[expect(clippy::print_stdout, reason = "printing the lines to paste is what this command does")]
async fn connect(data_dir: &Path, args: ConnectArgs) -> anyhow::Result<()> {
    use switchyard::connect::{Endpoint, Login, Tool, guide, merge_codex};

    let path = data_dir.join(STATE_FILE);
    let store =
        Store::open(&path).await.with_context(|| format!("cannot open {}", path.display()))?;
    let form = stored::read(&store).await.ok().flatten().unwrap_or_default().form;
    let key = match (args.key, args.create_key) {
        (Some(key), _) => key,
        (None, true) => {
            let name = clap::ValueEnum::to_possible_value(&args.tool)
                .map_or_else(|| "tool".to_owned(), |v| v.get_name().to_owned());
            keys::create(&store, &name, SystemClock.now()).await?.key.expose().to_owned()
        }
        (None, false) => switchyard::connect::PLACEHOLDER_KEY.to_owned(),
    };
    store.close().await;
    let port = args.port.or(form.server.port).unwrap_or(switchyard::config::DEFAULT_PORT);
    let model = args
        .model
        .or_else(|| form.combos.first().map(|c| c.name.clone()))
        .unwrap_or_else(|| switchyard::connect::PLACEHOLDER_MODEL.to_owned());
    let endpoint = Endpoint { port, key, model };
    let guide = guide(args.tool, &endpoint);
    let (title, snippets, note, login) = if args.subscription {
        let Some(lines) = guide.subscription else {
            anyhow::bail!(
                "--subscription: {} has no login of its own that Switchyard passes through \
                 (claude-code and codex have); leave --subscription out",
                guide.title
            );
        };
        let title = format!("{}: keep your subscription", guide.title);
        (title, lines.snippets, lines.note, Login::Subscription)
    } else {
        (guide.title.clone(), guide.snippets, guide.note, Login::LocalKey)
    };
    println!("# {title}");
    for s in &snippets {
        println!("\n# {}\n{}", s.label, s.text.trim_end());
    }
    if let Some(note) = &note {
        println!("\n# {note}");
    }
    if !args.write {
        return Ok(());
    }
    anyhow::ensure!(
        args.tool == Tool::Codex,
        "--write: {} has no config file this command edits; paste the lines above",
        guide.title
    );
    let home = dirs::home_dir().context("--write: no home directory")?;
    let file = home.join(".codex").join("config.toml");
    let existing = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    let merged = merge_codex(&existing, &endpoint, login)
        .map_err(|problem| anyhow::anyhow!("{}: {problem}", file.display()))?;
    switchyard::connect::write_tool_config(&file, &existing, &merged)
        .map_err(|problem| anyhow::anyhow!("--write: {problem}"))?;
    println!("\n# wrote {}", file.display());
    Ok(())
}

/// Lists the bindings `config` needs against the confirmed ones, and its team section, and
/// unless `dry_run` makes it the stored config. An import counts as the first use: from then
/// on no start trusts a destination or pair it did not see confirmed (otherwise the next
/// start would confirm the imported file).
async fn import(
    store: &Store,
    config: &Config,
    dry_run: bool,
    over_newer: bool,
) -> anyhow::Result<(Vec<ImportedPair>, Option<ImportedTeam>)> {
    let confirmed: Confirmed = store.bindings().await?.into_iter().collect();
    let pairs = imported_pairs(config, &confirmed);
    let stored = stored::read(store).await?.unwrap_or_default();
    if let Some(read_only) = &stored.read_only
        && !over_newer
    {
        anyhow::bail!(
            "the stored config is kept as it is: {}; pass --over-newer to replace it anyway \
             (what this version set aside is then lost: {})",
            read_only.message,
            read_only.set_aside.join("; ")
        );
    }
    let team = imported_team(&config.form, &stored.form);
    if !dry_run {
        let now = SystemClock.now();
        mark_first_use(store, now).await?;
        stored::save(store, &config.form, now).await?;
    }
    Ok((pairs, team))
}

/// The config kept in the state file, validated with its secrets resolved.
async fn stored_config(path: &Path) -> anyhow::Result<Config> {
    let store =
        Store::open(path).await.with_context(|| format!("cannot open {}", path.display()))?;
    let read = stored::read(&store).await;
    store.close().await;
    let mut read = read?.unwrap_or_default();
    let config = stored::validate_read_only(&mut read, async |form: ConfigForm| {
        tokio::task::spawn_blocking(move || {
            let keychain = KeychainStore::new();
            let sources = Sources {
                env: &|var| std::env::var(var).ok(),
                secrets: Some(&keychain),
                defer_keychain: false,
            };
            form.validate(&sources)
        })
        .await
        .map_err(|e| switchyard::config::Problem::new("(config)", e))?
    })
    .await;
    config.map_err(|p| anyhow::anyhow!("the stored config: {p}"))
}

/// `config confirm`: lists what needs confirming and records it after the user agrees.
#[expect(clippy::print_stdout, reason = "the list is what the user confirms")]
async fn confirm(
    store: &Store,
    config: &Config,
    provider: Option<&str>,
    yes: bool,
) -> anyhow::Result<()> {
    let confirmed: Confirmed = store.bindings().await?.into_iter().collect();
    let mut pairs: Vec<Binding> = Vec::new();
    for unconfirmed in binding::unconfirmed(&config.exposures(), &confirmed) {
        if provider.is_some_and(|p| unconfirmed.key.provider.as_str() != p) {
            continue;
        }
        let key = &unconfirmed.key;
        match unconfirmed.reason() {
            SkipReason::DestinationUnconfirmed => println!("provider {} would send:", key.provider),
            _ => println!("credential {}/{} would send:", key.provider, key.credential),
        }
        for pair in unconfirmed.missing {
            let what = what_is_sent(pair.reference.as_deref());
            println!("  {what} -> {}", pair.destination);
            if !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
    }
    if pairs.is_empty() {
        println!(
            "nothing to confirm: every provider sends its requests and secrets only where confirmed"
        );
        return Ok(());
    }
    if !yes {
        print!("Send these requests and secrets to these hosts? [y/N] ");
        std::io::Write::flush(&mut std::io::stdout())?;
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            println!("nothing confirmed");
            return Ok(());
        }
    }
    store.confirm_bindings(&pairs, SystemClock.now()).await?;
    println!("confirmed {} destinations and pairs", pairs.len());
    Ok(())
}

/// A binding's reference as the CLI lists it: the reference, `your Claude login`, or
/// `requests` for where requests go.
fn what_is_sent(reference: Option<&str>) -> &str {
    match reference {
        None => "requests",
        Some(reference) => binding::login_name(reference).unwrap_or(reference),
    }
}

/// Resolves on Ctrl-C or, on unix, SIGTERM.
async fn shutdown_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await?;
    Ok(())
}
