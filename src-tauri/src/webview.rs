//! What the window may load. The webview holds the management API (over IPC), so it shows the
//! app's own pages and nothing else: a link or a redirect to anywhere else does not navigate
//! it, and a web page (an OAuth provider's sign-in above all, per RFC 8252 §8.12) opens in the
//! system browser, where the user's own session, password manager and address bar are.
//! Pure, so it is tested without a window.

use tauri::Url;

/// Where a navigation of the window goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Destination {
    /// One of the app's own pages: load it.
    Own,
    /// A web page: open it in the system browser instead.
    Browser,
    /// Anything else (`file:`, `data:`, `javascript:`, custom schemes): nowhere.
    Refused,
}

/// Where `url` goes. `dev` is the dev server's URL when the app runs against it (`tauri dev`);
/// a release build loads its pages from `tauri://localhost` only, and on Windows, where the
/// webview serves them there, from `http(s)://tauri.localhost`: never with a port (anything
/// on a port is some local server, not the app), and never `tauri.localhost` elsewhere.
pub fn destination(url: &Url, dev: Option<&Url>) -> Destination {
    destination_on(url, dev, cfg!(windows))
}

/// [`destination`] for a platform that is (`windows`) or is not Windows.
fn destination_on(url: &Url, dev: Option<&Url>, windows: bool) -> Destination {
    let portless = url.port().is_none();
    let own = match url.scheme() {
        "tauri" => url.host_str() == Some("localhost") && portless,
        "http" | "https" => {
            (windows && portless && url.host_str() == Some("tauri.localhost"))
                || dev.is_some_and(|dev| dev.origin() == url.origin())
        }
        _ => false,
    };
    if own {
        Destination::Own
    } else if matches!(url.scheme(), "http" | "https") {
        Destination::Browser
    } else {
        Destination::Refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).expect("a URL")
    }

    #[test]
    fn the_apps_own_pages_load_in_the_window() {
        for windows in [false, true] {
            for own in ["tauri://localhost/", "tauri://localhost/#/providers"] {
                assert_eq!(destination_on(&url(own), None, windows), Destination::Own, "{own}");
            }
        }
        for own in ["http://tauri.localhost/", "https://tauri.localhost/#/providers"] {
            assert_eq!(destination_on(&url(own), None, true), Destination::Own, "{own}");
        }
        let dev = url("http://localhost:5173");
        assert_eq!(
            destination(&url("http://localhost:5173/#/combos"), Some(&dev)),
            Destination::Own
        );
    }

    #[test]
    fn web_pages_go_to_the_system_browser() {
        for web in [
            "https://accounts.example.com/oauth/authorize?client_id=x",
            "http://127.0.0.1:4141/",
            "https://tauri.localhost.evil.example/",
            "http://localhost:5173/",
        ] {
            assert_eq!(destination(&url(web), None), Destination::Browser, "{web}");
        }
        // Only Windows serves the app at tauri.localhost, and never on a port.
        for windows in [false, true] {
            let on_a_port = url("http://tauri.localhost:4141/");
            assert_eq!(destination_on(&on_a_port, None, windows), Destination::Browser);
        }
        let elsewhere = url("http://tauri.localhost/");
        assert_eq!(destination_on(&elsewhere, None, false), Destination::Browser);
        // The dev server counts only while the app runs against it, and only its own origin.
        let dev = url("http://localhost:5173");
        assert_eq!(destination(&url("http://localhost:5174/"), Some(&dev)), Destination::Browser);
    }

    #[test]
    fn other_schemes_go_nowhere() {
        for other in [
            "file:///etc/passwd",
            "data:text/html,hi",
            "javascript:alert(1)",
            "tauri://evil/",
            "tauri://localhost:8080/",
        ] {
            assert_eq!(destination(&url(other), None), Destination::Refused, "{other}");
        }
    }
}
