//! The request log's usage columns (issue 18) survive a write and a reopen bucket by bucket.

use switchyard_core::UnixMillis;
use switchyard_core::usage::{Nanodollars, Usage};
use switchyard_store::{RequestRecord, Store};

use crate::fixture::state_file;

fn record(usage: Option<Usage>, cost: Option<Nanodollars>) -> RequestRecord {
    RequestRecord {
        at: UnixMillis(1_000),
        dialect: "openai".into(),
        model: "m".into(),
        served_by: Some("p/m".into()),
        status: 200,
        attempts: 1,
        duration_ms: 5,
        trace: "[]".into(),
        outcome: None,
        first_byte_ms: Some(5),
        usage,
        cost,
    }
}

#[tokio::test]
async fn usage_and_cost_are_read_back_as_written_and_absent_stays_absent() {
    let (_dir, path) = state_file();
    let used = Usage {
        uncached_input: 11,
        cache_read: 22,
        cache_write: 33,
        output: 44,
        reasoning: 5,
        estimated: true,
    };
    let written = [
        record(Some(used), Some(Nanodollars(123_456))),
        record(Some(used), None),
        record(None, None),
    ];
    let store = Store::open(&path).await.unwrap();
    store.append_requests(&written, 10).await.unwrap();
    drop(store);
    let store = Store::open(&path).await.unwrap();
    let mut read = store.recent_requests(10).await.unwrap();
    read.reverse();
    assert_eq!(read, written);
}
