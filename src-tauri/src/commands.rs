//! The window's commands: thin. `api` hands the call to the management API in process; the
//! start-at-login pair is the one thing the window asks of the desktop rather than the proxy.
//! Errors cross as the same typed `ErrorBody` the API answers with.

use serde_json::json;
use switchyard::server::ipc::{ApiCall, ApiReply};
use switchyard::server::{ErrorBody, ErrorInfo};
use tauri::{AppHandle, State};
use tauri_plugin_autostart::ManagerExt as _;

use crate::engine::Engine;
use crate::tray;

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
    app.autolaunch().is_enabled().map_err(|e| desktop_error(&e))
}

/// Turns starting at login on or off; answers the new setting.
#[tauri::command]
#[expect(clippy::needless_pass_by_value, reason = "Tauri hands command arguments over by value")]
pub(crate) fn autostart_set(app: AppHandle, enabled: bool) -> Result<bool, ErrorBody> {
    let manager = app.autolaunch();
    let changed = if enabled { manager.enable() } else { manager.disable() };
    changed.and_then(|()| manager.is_enabled()).map_err(|e| desktop_error(&e))
}

fn desktop_error(error: &dyn std::fmt::Display) -> ErrorBody {
    ErrorBody {
        error: ErrorInfo {
            message: format!("start_at_login: the system refused: {error}"),
            kind: "desktop_error".to_owned(),
            code: 500,
            switchyard: Some(json!({ "field": "start_at_login" })),
        },
    }
}
