//! The tray icon: a coloured dot for aggregate health, a tooltip with counts, and a menu with
//! one status line per provider, the doctor's count when it found something, and the everyday
//! actions. It is redrawn from the event stream
//! (see `lib.rs`), never on a timer, and at once after the window changes something.

use switchyard_core::resilience::registry::ResetScope;
use tauri::image::Image;
use tauri::menu::{Menu, MenuItem, PredefinedMenuItem};
use tauri::tray::TrayIconBuilder;
use tauri::{AppHandle, Manager as _, Wry};
use tauri_plugin_clipboard_manager::ClipboardExt as _;

use crate::engine::Engine;
use crate::status::{Level, TrayView, port_taken, tray_view, with_budgets, with_findings};

const TRAY: &str = "switchyard";
const ICON_SIZE: u32 = 32;

/// Creates the tray icon.
pub(crate) fn install(app: &AppHandle) -> tauri::Result<()> {
    let view = current(app);
    TrayIconBuilder::with_id(TRAY)
        .icon(dot(view.level))
        .tooltip(&view.tooltip)
        .menu(&menu(app, &view)?)
        .show_menu_on_left_click(true)
        .on_menu_event(|app, event| on_menu(app, event.id().as_ref()))
        .build(app)?;
    Ok(())
}

/// Redraws the tray from the current health.
pub(crate) fn refresh(app: &AppHandle) {
    let Some(tray) = app.tray_by_id(TRAY) else { return };
    let view = current(app);
    let redrawn = tray
        .set_icon(Some(dot(view.level)))
        .and_then(|()| tray.set_tooltip(Some(&view.tooltip)))
        .and_then(|()| menu(app, &view))
        .and_then(|menu| tray.set_menu(Some(menu)));
    if let Err(error) = redrawn {
        tracing::warn!(%error, "cannot redraw the tray");
    }
}

fn current(app: &AppHandle) -> TrayView {
    let engine = app.state::<Engine>();
    let providers: Vec<String> =
        engine.proxy.config().providers.iter().map(|p| p.id.to_string()).collect();
    let view =
        with_budgets(tray_view(&engine.services.health(), &providers), &engine.services.budgets());
    let view = with_findings(view, &engine.services.doctor());
    if engine.port_taken.is_some() { port_taken(view, engine.port) } else { view }
}

/// Redraws only the tooltip (a budget's spend moves with every request; the menu does not).
pub(crate) fn refresh_tooltip(app: &AppHandle) {
    let Some(tray) = app.tray_by_id(TRAY) else { return };
    if let Err(error) = tray.set_tooltip(Some(&current(app).tooltip)) {
        tracing::warn!(%error, "cannot redraw the tray's tooltip");
    }
}

fn menu(app: &AppHandle, view: &TrayView) -> tauri::Result<Menu<Wry>> {
    let menu = Menu::new(app)?;
    if view.lines.is_empty() {
        menu.append(&MenuItem::with_id(app, "status", "No providers yet", false, None::<&str>)?)?;
    }
    for (i, line) in view.lines.iter().enumerate() {
        menu.append(&MenuItem::with_id(app, format!("status-{i}"), line, false, None::<&str>)?)?;
    }
    // Enabled: it opens the window, whose Overview lists the findings and applies them.
    if let Some(doctor) = &view.doctor {
        menu.append(&MenuItem::with_id(app, "doctor", doctor, true, None::<&str>)?)?;
    }
    menu.append(&PredefinedMenuItem::separator(app)?)?;
    menu.append(&MenuItem::with_id(app, "open", "Open Switchyard", true, None::<&str>)?)?;
    menu.append(&MenuItem::with_id(app, "copy", "Copy endpoint URL", true, None::<&str>)?)?;
    let pause = if view.paused { "Resume routing" } else { "Pause routing" };
    menu.append(&MenuItem::with_id(app, "pause", pause, true, None::<&str>)?)?;
    menu.append(&MenuItem::with_id(app, "reset", "Reset all breakers", true, None::<&str>)?)?;
    menu.append(&PredefinedMenuItem::separator(app)?)?;
    menu.append(&MenuItem::with_id(app, "quit", "Quit", true, None::<&str>)?)?;
    Ok(menu)
}

fn on_menu(app: &AppHandle, id: &str) {
    let engine = app.state::<Engine>();
    match id {
        "open" | "doctor" => crate::show_window(app),
        "copy" => {
            if let Err(error) = app.clipboard().write_text(engine.endpoint()) {
                tracing::warn!(%error, "cannot copy the endpoint URL");
            }
        }
        "pause" => {
            engine.proxy.set_paused(!engine.proxy.is_paused());
            refresh(app);
        }
        "reset" => {
            let counts = engine.services.reset(&ResetScope::All);
            tracing::info!(?counts, "reset from the tray");
            refresh(app);
        }
        "quit" => crate::quit(app),
        _ => {}
    }
}

/// A filled dot of the level's colour on a transparent square.
fn dot(level: Level) -> Image<'static> {
    let [r, g, b] = level.rgb();
    let size = ICON_SIZE;
    let centre = f64::from(size - 1) / 2.0;
    let radius = f64::from(size) / 2.0 - 2.0;
    let mut rgba = Vec::with_capacity((size * size * 4) as usize);
    for y in 0..size {
        for x in 0..size {
            let d = (f64::from(x) - centre).hypot(f64::from(y) - centre);
            // One pixel of anti-aliasing at the rim.
            let alpha = ((radius - d + 0.5).clamp(0.0, 1.0) * 255.0).round();
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "clamped to 0..=255"
            )]
            rgba.extend_from_slice(&[r, g, b, alpha as u8]);
        }
    }
    Image::new_owned(rgba, size, size)
}
