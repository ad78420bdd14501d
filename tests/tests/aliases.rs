//! Model-name aliases end to end: a tool that sends its own model names (Claude Code's
//! `claude-haiku-4-5-20251001`) is routed by `[[aliases]]` and `default_route` without being
//! told otherwise, and the response names the target that served.

use reqwest::Method;
use serde_json::json;
use switchyard_e2e::harness::{Harness, ask, header, json_parts};

/// Claude Code's names: haiku to a fast combo, everything else `claude-*` to a smart one, and
/// one combo whose name a glob also matches.
const CLAUDE: &str = r#"
[[combos]]
name = "fast"
targets = [{ target = "an/claude-fast-mock" }]

[[combos]]
name = "smart"
targets = [{ target = "oa/gpt-4o" }]

[[combos]]
name = "claude-sonnet-4-5"
targets = [{ target = "oa/gpt-4o-mini" }]

[[aliases]]
match = "claude-*"
to = "smart"

[[aliases]]
match = "claude-*haiku*"
to = "fast"
"#;

#[tokio::test]
async fn a_claude_code_model_name_routes_through_its_alias_and_the_response_names_the_target() {
    let h = Harness::start(CLAUDE).await;
    let response = h.anthropic("claude-haiku-4-5-20251001", false).send().await.unwrap();
    let (status, headers, body) = json_parts(response).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-switchyard-target"), "an/claude-fast-mock");
    assert_eq!(body["model"], "an/claude-fast-mock", "{body}");
    assert_eq!(h.mock.attempts_for("claude-fast-mock").len(), 1);
    assert_eq!(h.mock.total_attempts(), 1);
}

#[tokio::test]
async fn the_longer_glob_beats_the_shorter_whatever_the_order_written() {
    let h = Harness::start(CLAUDE).await;
    // `claude-*haiku*` is written second and still wins for a haiku name.
    let (status, headers, body) = ask(&h, "claude-3-5-haiku-20241022").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-switchyard-target"), "an/claude-fast-mock");
    // Only `claude-*` matches an opus name.
    let (status, headers, body) = ask(&h, "claude-opus-4-1-20250805").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-switchyard-target"), "oa/gpt-4o");
    assert_eq!(body["model"], "oa/gpt-4o");
}

#[tokio::test]
async fn an_exact_combo_name_beats_an_alias_that_matches_it() {
    let h = Harness::start(CLAUDE).await;
    let (status, headers, body) = ask(&h, "claude-sonnet-4-5").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-switchyard-target"), "oa/gpt-4o-mini", "the combo, not smart");
    // A longer name is no longer the combo's, so the alias takes it.
    let (_, headers, _) = ask(&h, "claude-sonnet-4-5-20250929").await;
    assert_eq!(header(&headers, "x-switchyard-target"), "oa/gpt-4o");
}

#[tokio::test]
async fn a_name_nothing_matches_goes_to_the_default_route_once_one_is_set() {
    let h = Harness::start(CLAUDE).await;
    let (status, _, body) = ask(&h, "gpt-5-codex").await;
    assert_eq!(status, 404, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("default_route"), "{message}");
    assert!(message.contains("claude-*haiku*"), "the 404 lists the aliases: {message}");

    let (_, mut aliases) = h.api_get("/api/aliases").await;
    aliases["default_route"] = json!("an/claude-default-mock");
    let (status, body) = h.api(Method::PUT, "/api/aliases", &aliases).await;
    assert_eq!(status, 200, "{body}");

    let (status, headers, body) = ask(&h, "gpt-5-codex").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-switchyard-target"), "an/claude-default-mock");
    assert_eq!(body["model"], "an/claude-default-mock");
    // An alias still comes before the default route.
    let (_, headers, _) = ask(&h, "claude-haiku-4-5-20251001").await;
    assert_eq!(header(&headers, "x-switchyard-target"), "an/claude-fast-mock");
}
