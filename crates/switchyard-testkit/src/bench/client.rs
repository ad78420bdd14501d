//! The load generator's requests: one call, timed from send to the last byte, or a stream,
//! timed at every chunk's arrival.
//!
//! Direct and proxied calls go through the same client code and the same connection pool
//! settings (keep-alive, `TCP_NODELAY`), so their difference is the proxy and nothing else.

use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::time::Instant;

/// Where a request goes: the mock itself, or the proxy in front of it.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    /// `…/v1/chat/completions`.
    pub(crate) url: String,
    pub(crate) key: String,
    /// Prefix that turns an upstream model into what this endpoint expects (`oa/` or nothing).
    pub(crate) model_prefix: String,
}

impl Endpoint {
    fn body(&self, model: &str, stream: bool) -> String {
        serde_json::json!({
            "model": format!("{}{model}", self.model_prefix),
            "stream": stream,
            "messages": [{"role": "user", "content": "hi"}],
        })
        .to_string()
    }

    pub(crate) fn request(
        &self,
        http: &reqwest::Client,
        model: &str,
        stream: bool,
    ) -> reqwest::RequestBuilder {
        http.post(&self.url)
            .bearer_auth(&self.key)
            .header("content-type", "application/json")
            .body(self.body(model, stream))
    }
}

/// The harness's HTTP client: keep-alive, no proxy from the environment, `TCP_NODELAY`.
pub(crate) fn http_client() -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(512)
        .build()
        .context("build the HTTP client")
}

/// One non-streamed call, send to last byte; any answer but `expect` is an error.
pub(crate) async fn call(
    http: &reqwest::Client,
    endpoint: &Endpoint,
    model: &str,
    expect: u16,
) -> anyhow::Result<Duration> {
    let started = now();
    let response = endpoint.request(http, model, false).send().await?;
    let status = response.status().as_u16();
    let body = response.bytes().await?;
    let elapsed = started.elapsed();
    if status != expect {
        bail!(
            "{} {model}: status {status}, expected {expect}: {}",
            endpoint.url,
            String::from_utf8_lossy(&body)
        );
    }
    Ok(elapsed)
}

/// One non-streamed call whatever its answer: how long it took, its status and, for an error,
/// what the proxy says of its first candidate (`breaker_open` when skipped, the outcome such as
/// `transient` when attempted) or else the error `type` (empty for a success).
pub(crate) async fn call_any(
    http: &reqwest::Client,
    endpoint: &Endpoint,
    model: &str,
) -> anyhow::Result<(Duration, u16, String)> {
    let started = now();
    let response = endpoint.request(http, model, false).send().await?;
    let status = response.status().as_u16();
    let body = response.bytes().await?;
    let elapsed = started.elapsed();
    let kind = if status == 200 {
        String::new()
    } else {
        serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| {
                [
                    "/error/switchyard/candidates/0/reason",
                    "/error/switchyard/candidates/0/outcome",
                    "/error/type",
                ]
                .iter()
                .find_map(|at| v.pointer(at).and_then(|t| t.as_str()).map(str::to_owned))
            })
            .unwrap_or_default()
    };
    Ok((elapsed, status, kind))
}

/// When each piece of a streamed body arrived.
#[derive(Clone, Debug)]
pub(crate) struct StreamTiming {
    /// Send to the first body byte.
    pub(crate) first_byte: Duration,
    /// Send to the piece that completed the first event with content in it (a Chat chunk with
    /// text or a tool call): what a client shows first. A router that holds a stream until its
    /// first real event (RESILIENCE.md §7) sends nothing before it; a bare relay sends the
    /// role-only chunk before it.
    pub(crate) first_content: Option<Duration>,
    /// Between consecutive body pieces.
    pub(crate) gaps: Vec<Duration>,
}

impl StreamTiming {
    pub(crate) fn worst_gap(&self) -> Duration {
        self.gaps.iter().copied().max().unwrap_or_default()
    }
}

/// One streamed call, timed at every piece of body that reaches the client.
pub(crate) async fn stream(
    http: &reqwest::Client,
    endpoint: &Endpoint,
    model: &str,
) -> anyhow::Result<StreamTiming> {
    let started = now();
    let mut response = endpoint.request(http, model, true).send().await?;
    if response.status() != 200 {
        let status = response.status();
        bail!(
            "{} {model}: status {status}: {}",
            endpoint.url,
            response.text().await.unwrap_or_default()
        );
    }
    let mut first_byte = None;
    let mut first_content = None;
    let mut last = started;
    let mut gaps = Vec::new();
    let mut body = Vec::new();
    while let Some(piece) = response.chunk().await? {
        let at = now();
        if piece.is_empty() {
            continue;
        }
        match first_byte {
            None => first_byte = Some(at - started),
            Some(_) => gaps.push(at - last),
        }
        last = at;
        body.extend_from_slice(&piece);
        if first_content.is_none() && has_content_event(&body) {
            first_content = Some(at - started);
        }
    }
    let first_byte = first_byte.context("a stream without a single byte")?;
    if !body.windows(6).any(|w| w == b"[DONE]") {
        bail!("{} {model}: the stream did not end with [DONE]", endpoint.url);
    }
    Ok(StreamTiming { first_byte, first_content, gaps })
}

/// Whether a whole event of `body` (Chat chunks) carries text or a tool call.
fn has_content_event(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    let mut events: Vec<&str> = text.split("\n\n").collect();
    events.pop(); // the part after the last blank line is not a whole event yet
    events.iter().filter_map(|event| event.strip_prefix("data: ")).any(|data| {
        let Ok(chunk) = serde_json::from_str::<serde_json::Value>(data) else { return false };
        let delta = &chunk["choices"][0]["delta"];
        delta["content"].as_str().is_some_and(|t| !t.is_empty())
            || delta["tool_calls"].as_array().is_some_and(|calls| !calls.is_empty())
    })
}

/// The one place the harness reads the clock: wall time is what a benchmark measures (tokio's
/// clock, unpaused here, so it is the monotonic system clock).
pub(crate) fn now() -> Instant {
    Instant::now()
}

#[cfg(test)]
mod tests {
    use super::has_content_event;

    #[test]
    fn only_a_whole_event_with_text_or_a_tool_call_is_content() {
        let role = r#"data: {"choices":[{"delta":{"role":"assistant","content":""}}]}"#;
        let text = r#"data: {"choices":[{"delta":{"content":"Hello"}}]}"#;
        let call = r#"data: {"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}"#;
        assert!(!has_content_event(format!("{role}\n\n").as_bytes()), "a role-only chunk");
        assert!(!has_content_event(format!("{role}\n\n{text}").as_bytes()), "not whole yet");
        assert!(has_content_event(format!("{role}\n\n{text}\n\n").as_bytes()));
        assert!(has_content_event(format!("{call}\n\n").as_bytes()));
        assert!(!has_content_event(b"data: [DONE]\n\n"));
    }
}
