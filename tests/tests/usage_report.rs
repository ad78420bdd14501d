//! Usage aggregates through the API: requests made through two local
//! keys, in three hours of two days (a manual clock), streamed and not, one of them after a
//! fallback, come back from `GET /api/usage` bucket by bucket exactly as the mock reported
//! them, grouped by model, provider, key and combo, narrowed by every filter, and as CSV; a bad
//! parameter is a 400 naming it; `/metrics` counts by provider and model with labels bounded
//! to the config.

use serde_json::{Value, json};
use switchyard_core::calendar::{HOUR_MS, rfc3339};
use switchyard_core::usage::{Prices, Usage};
use switchyard_core::{ManualClock, UnixMillis};
use switchyard_e2e::harness::{Harness, Setup, T0};
use switchyard_testkit::{Behavior, Reply, Tokens};

const CONFIG: &str = r#"
[[combos]]
name = "chat"
targets = [
  { target = "oa/gpt-4o", price = { input_per_mtok = 2.5, output_per_mtok = 10.0, cache_read_per_mtok = 1.25 } },
  { target = "an/claude-backup", price = { input_per_mtok = 3.0, output_per_mtok = 15.0 } },
]

[[combos]]
name = "cheap"
targets = [{ target = "oa/gpt-4o-mini", price = { input_per_mtok = 0.15, output_per_mtok = 0.6 } }]
"#;

/// What every answer reports: OpenAI counts the cache read inside the prompt, the proxy takes
/// it out again.
const TOKENS: Tokens =
    Tokens { input: 1_000, cache_read: 400, cache_write: 0, output: 200, reasoning: 30 };

fn used() -> Usage {
    Usage { uncached_input: 1_000, cache_read: 400, output: 200, reasoning: 30, ..Usage::default() }
}

/// The cost of [`used`] at a combo target's price, in nanodollars.
fn cost(input: f64, output: f64, cache_read: Option<f64>) -> u64 {
    used().cost(&Prices::per_mtok(Some(input), Some(output), cache_read, None)).unwrap().0
}

fn reply() -> Behavior {
    Behavior::Reply(Reply { usage: Some(TOKENS), ..Reply::default() })
}

async fn create_key(h: &Harness, name: &str) -> (String, String) {
    let (status, body) = h.api(reqwest::Method::POST, "/api/keys", &json!({ "name": name })).await;
    assert_eq!(status, 201, "{body}");
    (body["id"].as_str().unwrap().to_owned(), body["key"].as_str().unwrap().to_owned())
}

/// A Chat request for `model` through `key`, read to its end.
async fn ask(h: &Harness, key: &str, model: &str, stream: bool) {
    let body =
        json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]});
    let response = h
        .http
        .post(h.url("/v1/chat/completions"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let _ = response.bytes().await.unwrap();
}

async fn usage(h: &Harness, query: &str) -> Value {
    let (status, body) = h.api_get(&format!("/api/usage?{query}")).await;
    assert_eq!(status, 200, "{query}: {body}");
    body
}

fn n(value: &Value) -> u64 {
    value.as_u64().unwrap_or_else(|| panic!("a number: {value}"))
}

/// The series whose key is `key`.
fn series<'r>(report: &'r Value, key: &str) -> &'r Value {
    report["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key)
        .unwrap_or_else(|| panic!("no series {key} in {report}"))
}

/// One field of every point of a series (or of `totals`).
fn column(points: &Value, field: &str) -> Vec<u64> {
    points.as_array().unwrap().iter().map(|p| n(&p[field])).collect()
}

/// The requests every report test reads: two local keys, three hours of two days.
struct Scene {
    h: Harness,
    editor_id: String,
    agent_id: String,
    /// The cost of one answer of gpt-4o, gpt-4o-mini and claude-backup, in nanodollars.
    gpt: u64,
    mini: u64,
    claude: u64,
}

impl Scene {
    /// Hour 0: the editor asks `chat`, the agent streams `cheap`. Hour 1: the editor streams
    /// `chat`. A day later: the agent asks `chat`, whose first target has retired its model.
    async fn start() -> Self {
        let clock = ManualClock::new(T0);
        let h = Harness::start_with(Setup::new(CONFIG).clock(&clock)).await;
        h.mock.set_default("gpt-4o", reply());
        h.mock.set_default("gpt-4o-mini", reply());
        h.mock.set_default("claude-backup", reply());
        let (editor_id, editor) = create_key(&h, "editor").await;
        let (agent_id, agent) = create_key(&h, "agent").await;
        ask(&h, &editor, "chat", false).await;
        ask(&h, &agent, "cheap", true).await;
        clock.advance(std::time::Duration::from_millis(HOUR_MS));
        ask(&h, &editor, "chat", true).await;
        clock.advance(std::time::Duration::from_millis(24 * HOUR_MS));
        h.mock.script("gpt-4o", [Behavior::status(404), Behavior::status(404)]);
        ask(&h, &agent, "chat", false).await;
        h.logged(4).await;
        let (gpt, mini, claude) =
            (cost(2.5, 10.0, Some(1.25)), cost(0.15, 0.6, None), cost(3.0, 15.0, None));
        Self { h, editor_id, agent_id, gpt, mini, claude }
    }

    /// `from` and `to` as dates: the two days.
    fn days() -> String {
        let last = rfc3339(UnixMillis(T0.0 + 25 * HOUR_MS));
        format!("from={}&to={}", &rfc3339(T0)[..10], &last[..10])
    }
}

#[tokio::test]
async fn hourly_buckets_hold_each_hours_requests_tokens_and_cost_as_the_mock_reported_them() {
    let Scene { h, gpt, mini, claude, .. } = Scene::start().await;
    let from = rfc3339(T0);
    let hours = usage(
        &h,
        &format!(
            "bucket=hour&from={from}&to={}&group_by=model",
            rfc3339(UnixMillis(T0.0 + 26 * HOUR_MS))
        ),
    )
    .await;
    assert_eq!(hours["buckets"].as_array().unwrap().len(), 26);
    assert_eq!(n(&hours["buckets"][1]) - n(&hours["buckets"][0]), HOUR_MS);
    let gpt_series = series(&hours, "oa/gpt-4o");
    assert_eq!(&column(&gpt_series["points"], "requests")[..3], [1, 1, 0]);
    assert_eq!(&column(&gpt_series["points"], "uncached_input")[..2], [1_000, 1_000]);
    assert_eq!(&column(&gpt_series["points"], "cache_read")[..2], [400, 400]);
    assert_eq!(&column(&gpt_series["points"], "output")[..2], [200, 200]);
    assert_eq!(&column(&gpt_series["points"], "reasoning")[..2], [30, 30]);
    assert_eq!(&column(&gpt_series["points"], "cost_nanodollars")[..2], [gpt, gpt]);
    assert_eq!(&column(&gpt_series["points"], "ttft_samples")[..2], [0, 1], "only the stream");
    assert_eq!(column(&series(&hours, "oa/gpt-4o-mini")["points"], "cost_nanodollars")[0], mini);
    let backup = series(&hours, "an/claude-backup");
    assert_eq!(column(&backup["points"], "requests")[24], 0, "the fallback came a day later");
    assert_eq!(column(&backup["points"], "requests")[25], 1);
    assert_eq!(column(&backup["points"], "fallbacks")[25], 1);
    assert_eq!(column(&hours["totals"], "requests")[..2], [2, 1]);
    assert_eq!(n(&hours["total"]["cost_nanodollars"]), 2 * gpt + mini + claude);
    assert_eq!(hours["total"]["errors"], 0);
}

#[tokio::test]
async fn daily_series_by_key_provider_and_combo_and_every_filter_sum_the_right_requests() {
    let Scene { h, editor_id, agent_id, gpt, mini, claude } = Scene::start().await;
    // By day and key: the keys' names label their series; the biggest spender first.
    let range = Scene::days();
    let days = usage(&h, &format!("{range}&group_by=key")).await;
    assert_eq!(days["bucket"], "day");
    assert_eq!(days["buckets"].as_array().unwrap().len(), 2);
    let labels: Vec<&str> =
        days["series"].as_array().unwrap().iter().map(|s| s["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["editor", "agent"], "two gpt-4o answers outspend claude and mini");
    assert_eq!(column(&series(&days, &editor_id)["points"], "cost_nanodollars"), [2 * gpt, 0]);
    assert_eq!(column(&series(&days, &agent_id)["points"], "cost_nanodollars"), [mini, claude]);
    assert_eq!(column(&series(&days, &agent_id)["points"], "fallbacks"), [0, 1]);

    let by = |group: &str| format!("{range}&group_by={group}");
    let providers = usage(&h, &by("provider")).await;
    assert_eq!(n(&series(&providers, "oa")["total"]["requests"]), 3);
    assert_eq!(n(&series(&providers, "an")["total"]["cost_nanodollars"]), claude);
    let combos = usage(&h, &by("combo")).await;
    assert_eq!(n(&series(&combos, "chat")["total"]["requests"]), 3);
    assert_eq!(n(&series(&combos, "cheap")["total"]["requests"]), 1);

    // Filters, by the key's name or id, the combo, the provider, the model with or without
    // its provider.
    for (filter, requests, cost_nanodollars) in [
        ("key=editor", 2, 2 * gpt),
        (&format!("key={agent_id}") as &str, 2, mini + claude),
        ("combo=chat", 3, 2 * gpt + claude),
        ("provider=an", 1, claude),
        ("model=gpt-4o-mini", 1, mini),
        ("model=oa/gpt-4o", 2, 2 * gpt),
        ("key=editor&model=claude-backup", 0, 0),
    ] {
        let report = usage(&h, &format!("{range}&{filter}")).await;
        assert_eq!(n(&report["total"]["requests"]), requests, "{filter}");
        assert_eq!(n(&report["total"]["cost_nanodollars"]), cost_nanodollars, "{filter}");
    }
}

#[tokio::test]
async fn the_csv_export_has_a_header_and_a_row_per_bucket_and_series_that_counted_a_request() {
    let Scene { h, gpt, .. } = Scene::start().await;
    let by = |group: &str| format!("{}&group_by={group}", Scene::days());
    let from = rfc3339(T0);
    for path in [
        format!("/api/usage.csv?{}", by("model")),
        format!("/api/usage?{}&format=csv", by("model")),
    ] {
        let response = h
            .http
            .get(h.url(&path))
            .bearer_auth(switchyard_e2e::harness::MANAGEMENT_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/csv"));
        let text = response.text().await.unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0]
                .starts_with("bucket_start,group,label,requests,fallbacks,errors,uncached_input"),
            "{text}"
        );
        let day0 = &from[..10];
        let gpt_row = lines
            .iter()
            .find(|l| l.starts_with(&format!("{day0}T00:00:00Z,oa/gpt-4o,")))
            .unwrap_or_else(|| panic!("{text}"));
        let fields: Vec<&str> = gpt_row.split(',').collect();
        assert_eq!(&fields[3..11], ["2", "0", "0", "2000", "800", "0", "400", "60"], "{gpt_row}");
        assert_eq!(fields[12], switchyard_core::usage::Nanodollars(2 * gpt).to_string());
        assert_eq!(lines.len(), 1 + 3, "gpt-4o and mini on day 0, claude on day 1: {text}");
    }
}

#[tokio::test]
async fn a_bad_usage_parameter_is_a_400_naming_it() {
    let h = Harness::start(CONFIG).await;
    for (query, field, says) in [
        ("bucket=week", "bucket", "`hour`"),
        ("group_by=tool", "group_by", "`combo`"),
        ("from=yesterday", "from", "2026-01-31T09:00:00Z"),
        ("to=2026-02-30", "to", "RFC 3339"),
        ("from=2026-02-02&to=2026-02-01", "from", "not before"),
        ("bucket=hour&from=2026-01-01&to=2026-03-01", "from", "at most 744"),
        ("key=nobody", "key", "no local key"),
        ("since=2026-01-01", "since", "from, to, bucket"),
        ("format=xml", "format", "`csv`"),
    ] {
        let (status, body) = h.api_get(&format!("/api/usage?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["switchyard"]["field"], field, "{query}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{field}: ")) && message.contains(says),
            "{query}: {message}"
        );
    }
}

#[tokio::test]
async fn metrics_count_by_provider_and_model_with_labels_bounded_to_the_config() {
    let h = Harness::start(CONFIG).await;
    h.mock.set_default("gpt-4o", reply());
    // `an` lists no models, so any name reaches the mock: twenty made-up ones.
    for i in 0..20 {
        h.mock.set_default(&format!("made-up-{i}"), reply());
    }
    ask(&h, switchyard_e2e::harness::LOCAL_KEY, "chat", false).await;
    ask(&h, switchyard_e2e::harness::LOCAL_KEY, "chat", true).await;
    for i in 0..20 {
        ask(&h, switchyard_e2e::harness::LOCAL_KEY, &format!("an/made-up-{i}"), false).await;
    }
    h.mock.set_default("gpt-4o", Behavior::status(400));
    let refused = h.openai("oa/gpt-4o", false).send().await.unwrap();
    assert_eq!(refused.status(), 400);
    h.logged(23).await;

    let text = h.api_text("/metrics").await;
    let served = |labels: &str| format!("switchyard_served_requests_total{{{labels}}} ");
    let value = |line_start: &str| -> u64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(line_start))
            .unwrap_or_else(|| panic!("no {line_start} in\n{text}"));
        line[line_start.len()..].parse().unwrap()
    };
    assert_eq!(value(&served(r#"provider="oa",model="gpt-4o""#)), 2);
    assert_eq!(
        value(&served(r#"provider="an",model="other""#)),
        20,
        "one label for every unconfigured model"
    );
    assert_eq!(value(&served(r#"provider="none",model="none""#)), 1);
    assert!(!text.contains("made-up"), "no client-chosen name becomes a label");
    let lines = text.lines().filter(|l| l.starts_with("switchyard_served_requests_total{")).count();
    assert_eq!(lines, 3);
    assert_eq!(
        value(r#"switchyard_tokens_total{provider="oa",model="gpt-4o",bucket="cache_read"} "#),
        800
    );
    assert_eq!(
        value(r#"switchyard_tokens_total{provider="an",model="other",bucket="output"} "#),
        20 * 200
    );
    let gpt = format!("{}", switchyard_core::usage::Nanodollars(2 * cost(2.5, 10.0, Some(1.25))));
    assert!(
        text.contains(&format!(
            "switchyard_cost_usd_total{{provider=\"oa\",model=\"gpt-4o\"}} {gpt}\n"
        )),
        "{text}"
    );
    assert!(text.contains("# TYPE switchyard_served_fallbacks_total counter"));
}

/// A provider without a `models` list takes any model name a client makes up; the ledger (in
/// memory and in the state file, kept 400 days) counts those under `other`, as `/metrics`
/// does, so no client can grow it one label set per name.
#[tokio::test]
async fn unlisted_models_count_as_other_in_the_ledger_in_memory_and_in_the_file() {
    let data = tempfile::tempdir().unwrap();
    let mock = switchyard_testkit::MockUpstream::start().await;
    let h = Harness::start_in(mock, data.path(), CONFIG).await;
    h.mock.set_default("claude-backup", reply());
    for i in 0..5 {
        h.mock.set_default(&format!("made-up-{i}"), reply());
        ask(&h, switchyard_e2e::harness::LOCAL_KEY, &format!("an/made-up-{i}"), false).await;
    }
    ask(&h, switchyard_e2e::harness::LOCAL_KEY, "an/claude-backup", false).await;
    h.logged(6).await;
    let check = |report: &Value| {
        let mut keys: Vec<(String, u64)> = report["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["key"].as_str().unwrap().to_owned(), n(&s["total"]["requests"])))
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            [("an/claude-backup".to_owned(), 1), ("an/other".to_owned(), 5)],
            "{report}"
        );
        assert!(!report.to_string().contains("made-up"), "{report}");
    };
    check(&usage(&h, "group_by=model").await);
    let mock = h.stop().await;
    let h = Harness::start_in(mock, data.path(), CONFIG).await;
    check(&usage(&h, "group_by=model").await);
}
