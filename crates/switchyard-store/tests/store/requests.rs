//! The request log's usage columns survive a write and a reopen bucket by bucket, and
//! the usage aggregates written with them sum them exactly.

use switchyard_core::UnixMillis;
use switchyard_core::calendar::HOUR_MS;
use switchyard_core::usage::ledger::Ledger;
use switchyard_core::usage::{Nanodollars, Usage};
use switchyard_store::{RequestFilter, RequestRecord, Store, UsageBatch};

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
        local_key: Some("key_1".into()),
        combo: Some("smart".into()),
        fallback: true,
        session: None,
        credential: None,
        session_home: None,
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
    // Every other field set too, with text that JSON escapes: a batch is written as one JSON
    // array of rows.
    let every = RequestRecord {
        outcome: Some("complete".into()),
        model: "m \"quoted\" \u{e9}\u{1f600}\n".into(),
        trace: r#"[{"target":"p/m","what":{"served":200}}]"#.into(),
        served_by: None,
        fallback: false,
        session: Some("0123456789abcdef0123456789abcdef".into()),
        credential: Some("k1".into()),
        session_home: Some("p/home".into()),
        cost: Some(Nanodollars(9_000_000_000_000_000_000)),
        ..record(Some(Usage { estimated: false, ..used }), None)
    };
    let written = [
        record(Some(used), Some(Nanodollars(123_456))),
        record(Some(used), None),
        record(None, None),
        every,
    ];
    let store = Store::open(&path).await.unwrap();
    store.append_requests(&written, 10, None).await.unwrap();
    drop(store);
    let store = Store::open(&path).await.unwrap();
    let mut read = store.recent_requests(10).await.unwrap();
    read.reverse();
    assert_eq!(read, written);
}

#[tokio::test]
async fn a_batch_of_any_size_is_written_whole_and_in_order() {
    // 0 to 90 rows: every mix of the INSERT's prepared sizes (64, 16, 4, 1), each size
    // reused across batches, the order kept across the statements of one batch.
    let (_dir, path) = state_file();
    let store = Store::open(&path).await.unwrap();
    let mut all = Vec::new();
    for size in [0_u64, 1, 3, 4, 5, 21, 64, 90, 2] {
        let before = u64::try_from(all.len()).unwrap();
        let batch: Vec<RequestRecord> = (0..size)
            .map(|i| RequestRecord {
                at: UnixMillis(1_000 + before + i),
                duration_ms: i,
                ..record(None, None)
            })
            .collect();
        store.append_requests(&batch, 1_000, None).await.unwrap();
        all.extend(batch);
    }
    let mut read = store.recent_requests(1_000).await.unwrap();
    read.reverse();
    assert_eq!(read.len(), 190);
    assert_eq!(read, all);
}

/// The aggregates of `records`, row by row, sorted.
fn sums(ledger: &Ledger) -> Vec<String> {
    let mut rows: Vec<String> =
        ledger.rows().map(|r| format!("{} {:?} {:?}", r.hour, r.labels, r.totals)).collect();
    rows.sort();
    rows
}

#[tokio::test]
async fn aggregates_written_batch_by_batch_equal_the_logged_requests_summed_and_old_hours_go() {
    let (_dir, path) = state_file();
    let used = Usage { uncached_input: 7, output: 3, ..Usage::default() };
    let at = |hour: u64| UnixMillis(hour * HOUR_MS + 17);
    let mut everything = Ledger::default();
    let store = Store::open(&path).await.unwrap();
    for batch in 0..4u64 {
        let records: Vec<RequestRecord> = (0..5u64)
            .map(|i| RequestRecord {
                at: at(100 + (batch + i) % 3),
                outcome: (i % 2 == 0).then(|| "complete".to_owned()),
                status: if i == 4 { 503 } else { 200 },
                ..record(Some(used), Some(Nanodollars(1_000 + i)))
            })
            .collect();
        let mut sums = Ledger::default();
        for r in &records {
            sums.add(&r.usage_entry());
            everything.add(&r.usage_entry());
        }
        let usage = UsageBatch { sums: &sums, first_kept_hour: None };
        store.append_requests(&records, 1_000, Some(usage)).await.unwrap();
    }
    drop(store);
    let store = Store::open(&path).await.unwrap();
    assert_eq!(sums(&store.usage(0).await.unwrap()), sums(&everything));
    let logged = store.recent_requests(1_000).await.unwrap();
    let mut from_log = Ledger::default();
    for r in &logged {
        from_log.add(&r.usage_entry());
    }
    assert_eq!(sums(&from_log), sums(&everything), "the log reads back what it summed");

    // Retention: a batch that keeps hours from 101 on deletes hour 100's rows, not the log's.
    let empty = Ledger::default();
    let usage = UsageBatch { sums: &empty, first_kept_hour: Some(101) };
    store.append_requests::<RequestRecord>(&[], 1_000, Some(usage)).await.unwrap();
    let kept = store.usage(0).await.unwrap();
    assert_eq!(kept.rows().map(|r| r.hour).min(), Some(101));
    assert_eq!(store.recent_requests(1_000).await.unwrap().len(), 20);
    assert_eq!(store.usage(102).await.unwrap().rows().map(|r| r.hour).collect::<Vec<_>>(), [102]);
}

/// Requests that differ in every way a filter looks at.
fn varied() -> Vec<RequestRecord> {
    let models = ["smart", "p/m", "fast"];
    let served = [Some("p/m"), Some("q/x"), Some("pp/m"), None];
    let statuses = [200, 200, 503, 429];
    let outcomes = [None, Some("complete"), Some("broken"), Some("client_gone")];
    let sessions =
        [None, Some("abc0123456789abcdef0123456789abc"), Some("abd0123456789abcdef0123456789abc")];
    (0..96_u32)
        .map(|i| {
            let n = i as usize;
            RequestRecord {
                at: UnixMillis(1_000 + u64::from(i / 3)),
                model: models[n % 3].into(),
                served_by: served[n % 4].map(Into::into),
                status: statuses[(n / 2) % 4],
                outcome: outcomes[(n / 3) % 4].map(Into::into),
                attempts: 1 + (i % 5) / 3,
                session: sessions[(n / 5) % 3].map(Into::into),
                trace: format!("[{i}]"),
                ..record(None, None)
            }
        })
        .collect()
}

#[tokio::test]
async fn a_page_from_the_file_is_what_the_filter_passes_in_memory_newest_first() {
    let (_dir, path) = state_file();
    let store = Store::open(&path).await.unwrap();
    let all = varied();
    store.append_requests(&all, 10_000, None).await.unwrap();
    let filters = [
        RequestFilter::default(),
        RequestFilter { model: Some("smart".into()), ..RequestFilter::default() },
        RequestFilter { provider: Some("p".into()), ..RequestFilter::default() },
        RequestFilter { ok: Some(true), ..RequestFilter::default() },
        RequestFilter { ok: Some(false), fallback: Some(true), ..RequestFilter::default() },
        RequestFilter { fallback: Some(false), ..RequestFilter::default() },
        RequestFilter { session: Some("abc".into()), ..RequestFilter::default() },
        RequestFilter { session: Some(String::new()), ..RequestFilter::default() },
        RequestFilter {
            model: Some("fast".into()),
            provider: Some("q".into()),
            ok: Some(true),
            ..RequestFilter::default()
        },
    ];
    for filter in &filters {
        let expected: Vec<&RequestRecord> =
            all.iter().rev().filter(|r| filter.matches(r)).collect();
        for (skip, limit) in [(0, 1000), (3, 5), (40, 100)] {
            let page = store.requests_page(filter, skip, limit).await.unwrap();
            let wanted: Vec<&RequestRecord> =
                expected.iter().copied().skip(skip as usize).take(limit as usize).collect();
            assert_eq!(
                page.iter().collect::<Vec<_>>(),
                wanted,
                "{filter:?} skip {skip} limit {limit}"
            );
        }
    }
    assert!(
        filters
            .iter()
            .all(|f| all.iter().any(|r| f.matches(r)) || f.session.as_deref() == Some(""))
    );
    store.close().await;
}
