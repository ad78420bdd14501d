//! The Switchyard desktop app: a thin Tauri shell around the same app `switchyard serve` runs.
//!
//! - On launch it starts the proxy in process ([`engine`]), listening on loopback for editors
//!   and agents.
//! - The window's UI calls the management API over IPC ([`commands::api`]) into the same
//!   router; health events reach it as the `health` window event.
//! - The tray ([`tray`]) shows aggregate health and the everyday actions; desktop
//!   notifications ([`notices`]) announce breakers opening and fallbacks.
//! - One instance only: starting it again shows the running one's window. Closing the window
//!   hides it; Quit (tray) stops the proxy gracefully, then exits.

mod commands;
pub mod engine;
pub mod headless;
pub mod notices;
pub mod status;
mod tray;
pub mod webview;

use std::sync::Arc;

use tauri::webview::NewWindowResponse;
use tauri::{AppHandle, Emitter as _, Manager as _, RunEvent, WebviewWindowBuilder, WindowEvent};
use tauri_plugin_autostart::MacosLauncher;
use tauri_plugin_notification::NotificationExt as _;
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tracing_subscriber::EnvFilter;

use crate::engine::Engine;
use crate::notices::{Notice, Notices};
use crate::webview::Destination;

/// The window the UI lives in.
const MAIN_WINDOW: &str = "main";

/// Runs the app until Quit.
pub fn run() {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("SWITCHYARD_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let app = tauri::Builder::default()
        // First, so a second launch is handed over before anything else starts.
        .plugin(tauri_plugin_single_instance::init(|app, _args, _cwd| show_window(app)))
        .plugin(tauri_plugin_notification::init())
        .plugin(tauri_plugin_autostart::init(MacosLauncher::LaunchAgent, None))
        .plugin(tauri_plugin_clipboard_manager::init())
        .invoke_handler(tauri::generate_handler![
            commands::api,
            commands::autostart_get,
            commands::autostart_set,
            commands::headless_command
        ])
        .setup(|app| {
            let data_dir = app.path().app_data_dir()?;
            let engine = match tauri::async_runtime::block_on(Engine::start(data_dir)) {
                Ok(engine) => engine,
                Err(error) => {
                    // The window never opens: the reason (a config that does not validate, a
                    // state file a newer version migrated) is said where the user looks.
                    let body = error.to_string();
                    notify(
                        app.handle(),
                        Some(Notice { title: "Switchyard cannot start".into(), body }),
                    );
                    return Err(error);
                }
            };
            let taken = engine.port_taken.is_some().then_some(engine.port);
            app.manage(engine);
            open_window(app.handle())?;
            tray::install(app.handle())?;
            if let Some(port) = taken {
                notify(app.handle(), Some(status::port_taken_notice(port)));
            }
            forward_events(app.handle());
            quit_on_signal(app.handle());
            Ok(())
        })
        .on_window_event(|window, event| {
            if let WindowEvent::CloseRequested { api, .. } = event {
                // The proxy keeps serving; the tray brings the window back.
                api.prevent_close();
                let _ = window.hide();
            }
        })
        .build(tauri::generate_context!())
        .expect("the Tauri app builds from its config");
    app.run(|_app, event| {
        // Only Quit ends the app (it exits with a code); a closed window does not.
        if let RunEvent::ExitRequested { code: None, api, .. } = event {
            api.prevent_exit();
        }
    });
}

/// Creates the window from its config (`create: false` there) with the navigation guard: it
/// loads the app's own pages only; web pages (OAuth sign-in) open in the system browser and
/// no second window is ever created (see [`webview`]).
fn open_window(app: &AppHandle) -> tauri::Result<()> {
    let config = app.config();
    let window = config
        .app
        .windows
        .iter()
        .find(|w| w.label == MAIN_WINDOW)
        .expect("tauri.conf.json declares the main window");
    let dev = if tauri::is_dev() { config.build.dev_url.clone() } else { None };
    let for_new = dev.clone();
    WebviewWindowBuilder::from_config(app, window)?
        .on_navigation(move |url| leave_for(url, dev.as_ref()))
        .on_new_window(move |url, _| {
            leave_for(&url, for_new.as_ref());
            NewWindowResponse::Deny
        })
        .build()?;
    Ok(())
}

/// Whether the window may go to `url`; a web page goes to the system browser instead.
fn leave_for(url: &tauri::Url, dev: Option<&tauri::Url>) -> bool {
    match webview::destination(url, dev) {
        Destination::Own => true,
        Destination::Browser => {
            if let Err(error) = open::that_detached(url.as_str()) {
                tracing::warn!(%error, "cannot open the system browser");
            }
            false
        }
        Destination::Refused => {
            tracing::warn!(scheme = url.scheme(), "the window refused a navigation");
            false
        }
    }
}

/// Shows, unminimises and focuses the window.
pub(crate) fn show_window(app: &AppHandle) {
    if let Some(window) = app.get_webview_window(MAIN_WINDOW) {
        let _ = window.show();
        let _ = window.unminimize();
        let _ = window.set_focus();
    }
}

/// Stops the proxy gracefully (requests in flight finish, state is written out), then exits.
pub(crate) fn quit(app: &AppHandle) {
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        app.state::<Engine>().stop().await;
        app.exit(0);
    });
}

/// SIGTERM (logout, shutdown, `kill`) and SIGINT quit as the tray's Quit does: gracefully.
fn quit_on_signal(app: &AppHandle) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let app = app.clone();
        tauri::async_runtime::spawn(async move {
            let (Ok(mut term), Ok(mut int)) =
                (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
            else {
                tracing::warn!("cannot listen for SIGTERM and SIGINT");
                return;
            };
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            tracing::info!("asked to stop: finishing requests in flight");
            quit(&app);
        });
    }
    #[cfg(not(unix))]
    let _ = app;
}

/// Forwards every health event to the window (`health`) and each burst of completed requests
/// (`request`), redraws the tray once per burst of events, and turns breakers opening and
/// fallbacks into desktop notifications.
fn forward_events(app: &AppHandle) {
    let engine = app.state::<Engine>();
    let notices = Arc::new(std::sync::Mutex::new(Notices::default()));

    let mut health = engine.services.events();
    let (handle, seen) = (app.clone(), Arc::clone(&notices));
    tauri::async_runtime::spawn(async move {
        while let Some(burst) = next_burst(&mut health).await {
            let settings = handle.state::<Engine>().services.notifications();
            for event in &burst {
                let _ = handle.emit_to(MAIN_WINDOW, "health", event);
                let notice = seen.lock().expect("not poisoned").on_health(event, &settings);
                notify(&handle, notice);
            }
            tray::refresh(&handle);
        }
    });

    let mut requests = engine.proxy.request_log().subscribe();
    let handle = app.clone();
    tauri::async_runtime::spawn(async move {
        // The tooltip shows a budget's spend, which every request moves: redrawn at most this
        // often, so a busy proxy does not redraw the tray per request.
        let mut tooltip_drawn: Option<tokio::time::Instant> = None;
        // A burst the listener fell behind on is empty: its requests completed all the same,
        // so the window still hears of it.
        while let Some(burst) = next_burst(&mut requests).await {
            let settings = handle.state::<Engine>().services.notifications();
            for record in &burst {
                let notice = notices.lock().expect("not poisoned").on_request(
                    &record.model,
                    record.served_by.as_deref(),
                    record.attempts,
                    record.at,
                    &settings,
                );
                notify(&handle, notice);
            }
            // The window re-reads usage once per burst (the `event: request` of `/api/events`).
            let _ = handle.emit_to(MAIN_WINDOW, "request", burst.last().map(|r| r.at.0));
            let due = tooltip_drawn.is_none_or(|at| at.elapsed() >= TOOLTIP_EVERY);
            if due && !handle.state::<Engine>().services.budgets().is_empty() {
                tray::refresh_tooltip(&handle);
                tooltip_drawn = Some(tokio::time::Instant::now());
            }
        }
    });
}

/// The next message and whatever else already arrived, so a busy channel costs one redraw
/// (or one window event) per burst; empty when the listener fell behind; `None` once closed.
async fn next_burst<T: Clone>(rx: &mut Receiver<T>) -> Option<Vec<T>> {
    let mut burst = match rx.recv().await {
        Ok(first) => vec![first],
        Err(RecvError::Lagged(_)) => Vec::new(),
        Err(RecvError::Closed) => return None,
    };
    loop {
        match rx.try_recv() {
            Ok(next) => burst.push(next),
            Err(TryRecvError::Lagged(_)) => {}
            Err(TryRecvError::Empty | TryRecvError::Closed) => return Some(burst),
        }
    }
}

/// How often a request may redraw the tray's tooltip (for a budget's spend).
const TOOLTIP_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

fn notify(app: &AppHandle, notice: Option<Notice>) {
    let Some(notice) = notice else { return };
    if let Err(error) = app.notification().builder().title(&notice.title).body(&notice.body).show()
    {
        tracing::debug!(%error, "cannot show a desktop notification");
    }
}
