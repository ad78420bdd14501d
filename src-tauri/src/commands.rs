//! The window's commands: thin. `api` hands the call to the management API in process; the
//! start-at-login pair and the headless command are what the window asks of the desktop rather
//! than the proxy.
//! Errors cross as the same typed `ErrorBody` the API answers with.

use serde::Serialize;
use serde_json::json;
use switchyard::server::ipc::{ApiCall, ApiReply};
use switchyard::server::{ErrorBody, ErrorInfo};
use tauri::{AppHandle, Manager as _, State};
use tauri_plugin_autostart::ManagerExt as _;

use crate::engine::Engine;
use crate::{headless, tray};

/// One management API call (`/api/...`), answered as HTTP would.
#[tauri::command]
pub(crate) async fn api(
    call: ApiCall,
    engine: State<'_, Engine>,
    app: AppHandle,
) -> Result<ApiReply, ErrorBody> {
    let changes = !call.method.eq_ignore_ascii_case("GET");
    let reply = engine.api.call(call).await;
    if changes {
        // Pause, resets and edits show in the tray at once, not at the next health event.
        tray::refresh(&app);
    }
    Ok(reply)
}

/// Whether the app starts at login.
#[tauri::command]
#[expect(clippy::needless_pass_by_value, reason = "Tauri hands command arguments over by value")]
pub(crate) fn autostart_get(app: AppHandle) -> Result<bool, ErrorBody> {
    app.autolaunch().is_enabled().map_err(|e| desktop_error("start_at_login", &e))
}

/// Turns starting at login on or off; answers the new setting.
#[tauri::command]
#[expect(clippy::needless_pass_by_value, reason = "Tauri hands command arguments over by value")]
pub(crate) fn autostart_set(app: AppHandle, enabled: bool) -> Result<bool, ErrorBody> {
    let manager = app.autolaunch();
    let changed = if enabled { manager.enable() } else { manager.disable() };
    changed.and_then(|()| manager.is_enabled()).map_err(|e| desktop_error("start_at_login", &e))
}

/// How to run this app's config without the window (General → Run headless).
#[derive(Debug, Serialize)]
pub(crate) struct Headless {
    /// The line to paste into a terminal.
    command: String,
    /// Whether the CLI is where the installers put it (not in a development build).
    cli_found: bool,
}

/// The command that serves the same config headless, with the CLI the installer shipped.
#[tauri::command]
#[expect(clippy::needless_pass_by_value, reason = "Tauri hands command arguments over by value")]
pub(crate) fn headless_command(app: AppHandle) -> Result<Headless, ErrorBody> {
    let exe = std::env::current_exe().map_err(|e| desktop_error("headless", &e))?;
    let data_dir = app.path().app_data_dir().map_err(|e| desktop_error("headless", &e))?;
    let cli = headless::cli_beside(&exe);
    Ok(Headless { command: headless::command(&cli, &data_dir), cli_found: cli.is_file() })
}

fn desktop_error(field: &str, error: &dyn std::fmt::Display) -> ErrorBody {
    ErrorBody {
        error: ErrorInfo {
            message: format!("{field}: the system refused: {error}"),
            kind: "desktop_error".to_owned(),
            code: 500,
            switchyard: Some(json!({ "field": field })),
        },
    }
}
