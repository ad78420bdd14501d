//! The Requests page's history survives a restart, and pages past what memory holds come from
//! the state file.

use serde_json::Value;
use switchyard_e2e::harness::{FALLBACK, Harness, Setup};

/// The `model` of each listed request, newest first.
fn models(list: &Value) -> Vec<String> {
    list.as_array().unwrap().iter().map(|r| r["model"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn five_requests_are_listed_with_their_traces_after_a_restart_and_older_pages_come_from_the_file()
 {
    let data = tempfile::tempdir().unwrap();
    let h = Harness::start_in_with(
        switchyard_testkit::MockUpstream::start().await,
        data.path(),
        Setup::new(FALLBACK),
    )
    .await;
    let asked = ["smart", "oa/gpt-4o", "smart", "an/claude-fallback", "oa/gpt-4o-mini"];
    for model in asked {
        let response = h.openai(model, false).send().await.unwrap();
        assert_eq!(response.status(), 200, "{model}");
    }
    h.logged(5).await;
    let (_, before) = h.api_get("/api/requests").await;
    let mock = h.stop().await;

    // A ring of two: the newest two come from memory, the rest from the file.
    let setup = Setup::new(FALLBACK).reuse_config().request_ring(2);
    let h = Harness::start_in_with(mock, data.path(), setup).await;
    let (status, after) = h.api_get("/api/requests").await;
    assert_eq!(status, 200);
    let newest_first: Vec<String> = asked.iter().rev().map(|m| (*m).to_owned()).collect();
    assert_eq!(models(&after), newest_first);
    assert_eq!(after, before, "every field, the traces too, as before the restart");
    for entry in after.as_array().unwrap() {
        assert!(!entry["trace"].as_array().unwrap().is_empty(), "{entry}");
    }

    let (_, first) = h.api_get("/api/requests?limit=2").await;
    assert_eq!(models(&first), newest_first[..2]);
    let (_, past) = h.api_get("/api/requests?limit=2&offset=2").await;
    assert_eq!(models(&past), newest_first[2..4], "past the ring, from the file");
    let (_, last) = h.api_get("/api/requests?limit=2&offset=4").await;
    assert_eq!(models(&last), newest_first[4..]);
    let (_, filtered) = h.api_get("/api/requests?model=smart&offset=1").await;
    assert_eq!(models(&filtered), ["smart"], "filters apply to the file's requests too");
    let (_, by_provider) = h.api_get("/api/requests?provider=an").await;
    assert_eq!(by_provider.as_array().unwrap().len(), 1);

    // A new request goes on top, the file's still below it.
    let response = h.openai("smart", false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    h.logged(6).await;
    let (_, grown) = h.api_get("/api/requests?limit=3&offset=2").await;
    assert_eq!(models(&grown), newest_first[1..4]);
    h.stop().await;
}
