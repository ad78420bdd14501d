//! The web UI's files at `/`: the UI compiled into this binary (what `switchyard serve` serves
//! with no flag), or a built UI on disk (`serve --ui DIR`, for development).
//!
//! Invariants:
//! - No path the API owns is ever a file: every `/v1*` path (`/v1`, `/v1/...`, `/v1beta...`)
//!   and `/api`, `/api/...` and `/metrics` keep their own rule at the front door (`guard`), and
//!   this module refuses them again on its own, so no file (and no file name in a built UI)
//!   can stand in for an API route.
//! - The files hold no secret and need no key; they are answered to `GET` and `HEAD` only.
//! - A binary built without the UI (no Node at build time: `build.rs` found no `ui/dist`)
//!   answers `/` with a short page saying how to get it; everything else works as ever.

use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use include_dir::{Dir, include_dir};
use tower::ServiceExt as _;

/// The built UI as `build.rs` found it: `ui/dist`, or an empty directory.
static EMBEDDED: Dir<'static> = include_dir!("$SWITCHYARD_UI_EMBEDDED");

/// Where the UI's files come from.
#[derive(Clone, Debug)]
pub enum WebUi {
    /// Compiled in (`switchyard serve`): the built UI, or the page saying how to get it.
    Embedded(&'static Dir<'static>),
    /// A built UI on disk (`serve --ui DIR`).
    Directory(Arc<Path>),
}

impl WebUi {
    /// The UI compiled into this binary.
    pub fn embedded() -> Self {
        Self::Embedded(&EMBEDDED)
    }

    /// Whether this binary was built with the UI in it (else `/` says how to get it).
    pub fn is_built_in() -> bool {
        EMBEDDED.get_file("index.html").is_some()
    }
}

/// Whether `path` belongs to the API: every `/v1*` path, `/api` and below, `/metrics`.
pub(super) fn is_api_path(path: &str) -> bool {
    path.starts_with("/v1") || path == "/api" || path.starts_with("/api/") || path == "/metrics"
}

/// The page `/` answers when the binary holds no UI.
const NO_UI_PAGE: &str = "<!doctype html>
<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Switchyard: no web UI in this build</title></head>
<body>
<h1>Switchyard is running, but this build has no web UI</h1>
<p>The proxy works: point your tools at <code>/v1</code> on this address. The management UI is
compiled in only when it was built first (it needs Node.js 20.19 or later):</p>
<pre>scripts/serve                                   # builds the UI, then the proxy, and serves both
# or by hand:
npm ci --prefix ui &amp;&amp; npm --prefix ui run build
cargo run --release -p switchyard -- serve</pre>
<p>Or serve a built UI from disk: <code>switchyard serve --ui ui/dist</code>. Providers can be
added without it: <code>switchyard providers add openrouter --key env:OPENROUTER_API_KEY</code>.</p>
</body></html>
";

/// Answers a request for one of the UI's files.
pub(super) async fn serve(ui: &WebUi, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    if is_api_path(&path) {
        return StatusCode::NOT_FOUND.into_response();
    }
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        return (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "GET, HEAD")]).into_response();
    }
    match ui {
        WebUi::Directory(dir) => {
            let files =
                tower_http::services::ServeDir::new(&**dir).append_index_html_on_directories(true);
            match files.oneshot(request).await {
                Ok(response) => response.map(Body::new),
                Err(infallible) => match infallible {},
            }
        }
        WebUi::Embedded(dir) => embedded(dir, &path, request.method() == Method::HEAD),
    }
}

fn embedded(dir: &Dir<'static>, path: &str, head: bool) -> Response {
    let name = path.trim_start_matches('/');
    let name = if name.is_empty() || name.ends_with('/') {
        format!("{name}index.html")
    } else {
        name.to_owned()
    };
    let Some(file) = dir.get_file(&name) else {
        if name == "index.html" {
            return page(NO_UI_PAGE.as_bytes(), "text/html; charset=utf-8", "no-cache", head);
        }
        return StatusCode::NOT_FOUND.into_response();
    };
    let mime = mime_guess::from_path(&name).first_or_octet_stream();
    let mime = if mime.type_() == mime_guess::mime::TEXT || mime.subtype() == "javascript" {
        format!("{mime}; charset=utf-8")
    } else {
        mime.to_string()
    };
    // Vite names every asset by its content's hash: those never change under their name. The
    // page itself does, with each build.
    let cache = if name.starts_with("assets/") {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    page(file.contents(), &mime, cache, head)
}

fn page(body: &'static [u8], mime: &str, cache: &'static str, head: bool) -> Response {
    let mut response = if head { Body::empty() } else { Body::from(body) }.into_response();
    let headers = response.headers_mut();
    if let Ok(mime) = HeaderValue::from_str(mime) {
        headers.insert(header::CONTENT_TYPE, mime);
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use include_dir::{DirEntry, File};

    static BUILT: Dir<'static> = Dir::new(
        "",
        &[
            DirEntry::File(File::new("index.html", b"<!doctype html><title>Switchyard</title>")),
            DirEntry::Dir(Dir::new(
                "assets",
                &[DirEntry::File(File::new("assets/index-abc123.js", b"console.log(1)"))],
            )),
        ],
    );
    static NONE: Dir<'static> = Dir::new("", &[]);

    async fn get(dir: &'static Dir<'static>, method: Method, path: &str) -> Response {
        let request = Request::builder().method(method).uri(path).body(Body::empty()).unwrap();
        serve(&WebUi::Embedded(dir), request).await
    }

    async fn text(response: Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn the_embedded_ui_answers_its_page_and_its_hashed_assets() {
        let index = get(&BUILT, Method::GET, "/").await;
        assert_eq!(index.status(), StatusCode::OK);
        assert_eq!(index.headers()[header::CONTENT_TYPE], "text/html; charset=utf-8");
        assert_eq!(index.headers()[header::CACHE_CONTROL], "no-cache");
        assert!(text(index).await.contains("<title>Switchyard</title>"));
        let asset = get(&BUILT, Method::GET, "/assets/index-abc123.js").await;
        assert_eq!(asset.status(), StatusCode::OK);
        assert_eq!(asset.headers()[header::CONTENT_TYPE], "text/javascript; charset=utf-8");
        assert!(asset.headers()[header::CACHE_CONTROL].to_str().unwrap().contains("immutable"));
        let head = get(&BUILT, Method::HEAD, "/index.html").await;
        assert_eq!(head.status(), StatusCode::OK);
        assert!(text(head).await.is_empty());
        assert_eq!(get(&BUILT, Method::GET, "/nothing.js").await.status(), StatusCode::NOT_FOUND);
        assert_eq!(get(&BUILT, Method::POST, "/").await.status(), StatusCode::METHOD_NOT_ALLOWED);
    }

    #[tokio::test]
    async fn a_build_without_the_ui_says_how_to_get_it_at_the_root_only() {
        let root = get(&NONE, Method::GET, "/").await;
        assert_eq!(root.status(), StatusCode::OK);
        let page = text(root).await;
        assert!(page.contains("npm --prefix ui run build"), "{page}");
        assert!(page.contains("scripts/serve"), "{page}");
        assert_eq!(get(&NONE, Method::GET, "/assets/x.js").await.status(), StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn no_api_path_is_ever_a_file() {
        for path in
            ["/v1", "/v1/", "/v1x", "/v1/index.html", "/v1beta", "/api", "/api/", "/metrics"]
        {
            assert!(is_api_path(path), "{path}");
            assert_eq!(
                get(&BUILT, Method::GET, path).await.status(),
                StatusCode::NOT_FOUND,
                "{path}"
            );
        }
        for path in ["/", "/index.html", "/assets/index-abc123.js", "/apix", "/metrics.txt"] {
            assert!(!is_api_path(path), "{path}");
        }
    }
}
