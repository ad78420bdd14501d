//! What the tray shows, as a pure function of the health page: the icon's colour, the tooltip
//! and one status line per provider. Kept apart from Tauri so it is tested on its own.
//!
//! The colour answers "can my tools get answers right now?":
//! - green: every breaker closed, nothing benched, nothing locked;
//! - amber: something is degraded, a key is cooling, a model is locked, routing is paused, or
//!   the team's database cannot be reached (this instance decides alone until it is
//!   back), but every combo still has a candidate;
//! - red: a provider's breaker is open (or half-open, still proving itself), or some combo has
//!   nothing that could serve, or the overall budget is enforced and spent (nothing is served).
//!
//! What the doctor found is counted in the tooltip and on a menu line of
//! its own, and changes no colour: a finding suggests a fix for what the colour already shows,
//! or for what will matter later (a destination waiting for confirmation).
//!
//! The tooltip names the keys under their quota reserve (they take no new session while
//! another key has more; the colour stays), and the budget nearest its limit, if any is set; a key's enforced budget that
//! is spent turns it amber (that tool is refused, the others are served).

use std::fmt::Write as _;

use switchyard::services::Health;

use crate::notices::Notice;
use switchyard_core::calendar::rfc3339;
use switchyard_core::doctor::Finding;
use switchyard_core::resilience::{BreakerState, ProbeScope, ProbeView};
use switchyard_core::usage::budget::{BudgetState, BudgetView};

/// How long the tooltip names a target that a recovery probe found healthy again.
const BACK_FOR_MS: u64 = 5 * 60 * 1000;

/// The tray icon's colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Healthy,
    Warning,
    Down,
}

impl Level {
    /// The icon's RGB colour.
    pub fn rgb(self) -> [u8; 3] {
        match self {
            Self::Healthy => [0x2e, 0xa0, 0x43],
            Self::Warning => [0xd9, 0x8e, 0x04],
            Self::Down => [0xd1, 0x24, 0x2f],
        }
    }
}

/// Everything the tray displays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrayView {
    pub level: Level,
    pub tooltip: String,
    /// One line per provider, in config order.
    pub lines: Vec<String>,
    pub paused: bool,
    /// `Doctor: 2 findings`, the menu line that opens the window where they are applied; none
    /// while the doctor finds nothing.
    pub doctor: Option<String>,
}

/// The tray for `health`; `providers` are the configured provider ids, in config order (a
/// provider nothing has happened to yet has no breaker entry, and is healthy).
pub fn tray_view(health: &Health, providers: &[String]) -> TrayView {
    let snapshot = &health.snapshot;
    let open = snapshot
        .breakers
        .iter()
        .filter(|b| matches!(b.state, BreakerState::Open | BreakerState::HalfOpen))
        .count();
    let degraded =
        snapshot.breakers.iter().filter(|b| matches!(b.state, BreakerState::Degraded)).count();
    let cooling = snapshot.credentials.len();
    let locked = snapshot.lockouts.len();
    let stranded: Vec<&str> =
        health.combos.iter().filter(|c| c.eligible == 0).map(|c| c.name.as_str()).collect();

    let team_offline = health.team.as_ref().filter(|t| !t.connected);
    let level = if open > 0 || !stranded.is_empty() {
        Level::Down
    } else if degraded > 0 || cooling > 0 || locked > 0 || health.paused || team_offline.is_some() {
        Level::Warning
    } else {
        Level::Healthy
    };

    let mut tooltip = String::from("Switchyard");
    if health.paused {
        tooltip.push_str(" (paused)");
    }
    let count = providers.len();
    let _ = write!(
        tooltip,
        ": {count} {} ({open} open, {degraded} degraded) · {cooling} {} cooling · {locked} {} locked",
        plural(count, "provider", "providers"),
        plural(cooling, "key", "keys"),
        plural(locked, "model", "models"),
    );
    if !stranded.is_empty() {
        let _ = write!(tooltip, " · nothing can serve {}", stranded.join(", "));
    }
    if team_offline.is_some() {
        tooltip.push_str(" · team database unreachable: not sharing");
    }
    // A key near the end of its quota still serves its sessions: said, not coloured.
    let low: Vec<String> = health
        .headroom
        .iter()
        .filter(|v| v.below_reserve)
        .map(|v| format!("{}/{}", v.provider, v.credential))
        .collect();
    if !low.is_empty() {
        let _ = write!(tooltip, " · under the quota reserve: {}", low.join(", "));
    }
    let back: Vec<String> = snapshot
        .probes
        .iter()
        .filter(|p| healed_lately(p, snapshot.at.0))
        .map(|p| scope_label(&p.scope))
        .collect();
    if !back.is_empty() {
        let _ = write!(tooltip, " · back after a probe: {}", back.join(", "));
    }

    let lines = providers.iter().map(|p| provider_line(health, p)).collect();
    TrayView { level, tooltip, lines, paused: health.paused, doctor: None }
}

/// The tray with what the doctor found (`Services::doctor()`): the count on a menu line and in
/// the tooltip, and the finding itself in the tooltip when there is only one.
pub fn with_findings(mut view: TrayView, findings: &[Finding]) -> TrayView {
    let count = findings.len();
    if count == 0 {
        return view;
    }
    let counted = format!("{count} {}", plural(count, "finding", "findings"));
    match findings {
        [only] => {
            let _ = write!(view.tooltip, " · doctor: {counted} ({})", only.title);
        }
        _ => {
            let _ = write!(view.tooltip, " · doctor: {counted}");
        }
    }
    view.doctor = Some(format!("Doctor: {counted}"));
    view
}

/// The tray when the port was taken at start: red, and the tooltip says so first. Whoever holds
/// the port gets what editors send there, keys and prompts included, so this outranks every
/// provider's health.
pub fn port_taken(mut view: TrayView, port: u16) -> TrayView {
    view.level = Level::Down;
    view.tooltip = format!("{} · {}", port_taken_notice(port).title, view.tooltip);
    view
}

/// The tray with the budget nearest its limit in the tooltip, and the colour a spent enforced
/// budget gives it.
pub fn with_budgets(mut view: TrayView, budgets: &[BudgetView]) -> TrayView {
    let Some(nearest) = budgets.iter().max_by_key(|b| b.percent) else { return view };
    let _ = write!(
        view.tooltip,
        " · {}: ${} of ${}",
        budget_label(nearest),
        nearest.spent,
        nearest.limit
    );
    if nearest.state == BudgetState::Reached && nearest.enforce {
        let _ = write!(view.tooltip, ", spent: refusing until {}", rfc3339(nearest.resets_at));
    } else {
        let _ = write!(view.tooltip, " ({} %)", nearest.percent);
    }
    for spent in budgets.iter().filter(|b| b.enforce && b.state == BudgetState::Reached) {
        let level = if spent.key.is_none() { Level::Down } else { Level::Warning };
        if view.level == Level::Healthy || level == Level::Down {
            view.level = level;
        }
    }
    view
}

/// `daily budget` or `daily budget of editor`.
pub fn budget_label(budget: &BudgetView) -> String {
    match &budget.key {
        None => format!("{} budget", budget.period.as_str()),
        Some(key) => format!("{} budget of {key}", budget.period.as_str()),
    }
}

/// What the desktop says, once at start and in the tray, when `port` was taken.
pub fn port_taken_notice(port: u16) -> Notice {
    Notice {
        title: format!("Switchyard is not serving: port {port} is taken"),
        body: format!(
            "Another program holds 127.0.0.1:{port}; editors pointed there would send it their \
             keys and prompts. Quit that program, or choose another port in General → Server, \
             then restart Switchyard."
        ),
    }
}

/// `openai: open, retry in 42 s · 1 key cooling · 2 models locked`.
fn provider_line(health: &Health, provider: &str) -> String {
    let snapshot = &health.snapshot;
    let breaker = snapshot.breakers.iter().find(|b| b.provider.as_str() == provider);
    let mut line = format!("{provider}: ");
    match breaker.map(|b| (b.state, b.retry_in_ms)) {
        None | Some((BreakerState::Closed, _)) => line.push_str("healthy"),
        Some((BreakerState::Degraded, _)) => line.push_str("degraded"),
        Some((BreakerState::Open, retry_in_ms)) => {
            let _ = write!(line, "open, retry in {}", seconds(retry_in_ms));
        }
        Some((BreakerState::HalfOpen, _)) => line.push_str("half-open, probing"),
    }
    let cooling =
        snapshot.credentials.iter().filter(|c| c.key.provider.as_str() == provider).count();
    if cooling > 0 {
        let _ = write!(line, " · {cooling} {} cooling", plural(cooling, "key", "keys"));
    }
    let locked = snapshot.lockouts.iter().filter(|l| l.key.provider.as_str() == provider).count();
    if locked > 0 {
        let _ = write!(line, " · {locked} {} locked", plural(locked, "model", "models"));
    }
    line
}

/// Whether `probe` found its target healthy again within [`BACK_FOR_MS`] of `now`.
fn healed_lately(probe: &ProbeView, now: u64) -> bool {
    probe
        .last
        .as_ref()
        .is_some_and(|last| last.healed && now.saturating_sub(last.at.0) < BACK_FOR_MS)
}

/// `openai`, `openai/key-1`, or `openai/gpt-4o@key-1`: what a probe stood for.
fn scope_label(scope: &ProbeScope) -> String {
    match scope {
        ProbeScope::Provider { provider } => provider.to_string(),
        ProbeScope::Credential { key } => format!("{}/{}", key.provider, key.credential),
        ProbeScope::Model { key } => key.to_string(),
    }
}

fn seconds(ms: u64) -> String {
    format!("{} s", ms.div_ceil(1000))
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

#[cfg(test)]
mod tests {
    use switchyard::proxy::{ComboHealth, HeadroomView};
    use switchyard::services::{ConfigSaving, Persistence, TeamView};
    use switchyard_core::doctor::{Action, Kind};
    use switchyard_core::outcome::OutcomeKind;
    use switchyard_core::resilience::registry::{BreakerView, CredentialView, LockoutView};
    use switchyard_core::resilience::{Bench, CredentialStatus, HealthSnapshot, ProbeResult};
    use switchyard_core::{CandidateKey, CredentialKey, UnixMillis};

    use super::*;

    const PROVIDERS: [&str; 2] = ["openai", "anthropic"];

    fn providers() -> Vec<String> {
        PROVIDERS.iter().map(ToString::to_string).collect()
    }

    fn health() -> Health {
        Health {
            paused: false,
            persistence: Persistence { durable: true, reason: None },
            config_saved_to: ConfigSaving::StateFile,
            combos: vec![ComboHealth { name: "smart".into(), eligible: 3, candidates: 3 }],
            team: None,
            headroom: Vec::new(),
            snapshot: HealthSnapshot {
                at: UnixMillis(1_800_000_000_000),
                breakers: Vec::new(),
                credentials: Vec::new(),
                lockouts: Vec::new(),
                probes: Vec::new(),
                untracked: 0,
            },
        }
    }

    fn breaker(provider: &str, state: BreakerState, retry_in_ms: u64) -> BreakerView {
        BreakerView {
            provider: provider.into(),
            state,
            failures: 5,
            reopens: 0,
            last_fault: None,
            retry_in_ms,
            probing_elsewhere: false,
            recorded_by: None,
        }
    }

    fn cooling(provider: &str, credential: &str) -> CredentialView {
        CredentialView {
            key: CredentialKey { provider: provider.into(), credential: credential.into() },
            status: CredentialStatus::Cooling,
            backoff_level: 1,
            retry_in_ms: Some(5_000),
            recorded_by: None,
            last_error: None,
        }
    }

    fn locked(provider: &str, model: &str) -> LockoutView {
        LockoutView {
            key: CandidateKey::new(provider, "key-1", model),
            reason: None,
            consecutive_failures: 2,
            locked_until: UnixMillis(1_800_000_060_000),
            remaining_ms: 60_000,
            recorded_by: None,
        }
    }

    fn team(connected: bool) -> TeamView {
        TeamView {
            instance: "alice-laptop".into(),
            connected,
            reason: (!connected).then(|| "connection refused".into()),
            since: UnixMillis(1_800_000_000_000),
            members: Vec::new(),
            clock_offset_ms: 0,
            backlog: 0,
            dropped: 0,
        }
    }

    #[test]
    fn a_key_under_its_quota_reserve_is_named_in_the_tooltip_and_changes_no_colour() {
        use switchyard_core::resilience::headroom::Window;
        let mut h = health();
        let window = Window { name: "requests".into(), remaining: 0.02, resets_at: None };
        h.headroom = vec![
            HeadroomView {
                provider: "anthropic".into(),
                credential: "work".into(),
                windows: vec![window.clone()],
                below_reserve: true,
                subscription: false,
            },
            HeadroomView {
                provider: "openai".into(),
                credential: "main".into(),
                windows: vec![Window { remaining: 0.5, ..window }],
                below_reserve: false,
                subscription: false,
            },
        ];
        let view = tray_view(&h, &providers());
        assert_eq!(view.level, Level::Healthy);
        assert!(
            view.tooltip.ends_with(" · under the quota reserve: anthropic/work"),
            "{}",
            view.tooltip
        );
    }

    #[test]
    fn an_unreachable_team_database_turns_it_amber_and_says_so_and_a_reachable_one_says_nothing() {
        let mut h = health();
        h.team = Some(team(true));
        let view = tray_view(&h, &providers());
        assert_eq!(view.level, Level::Healthy);
        assert!(!view.tooltip.contains("team"), "{}", view.tooltip);
        h.team = Some(team(false));
        let view = tray_view(&h, &providers());
        assert_eq!(view.level, Level::Warning);
        assert!(
            view.tooltip.ends_with(" · team database unreachable: not sharing"),
            "{}",
            view.tooltip
        );
    }

    #[test]
    fn a_taken_port_turns_even_a_healthy_tray_red_and_says_so_first() {
        let view = port_taken(tray_view(&health(), &providers()), 4141);
        assert_eq!(view.level, Level::Down);
        assert!(
            view.tooltip.starts_with(
                "Switchyard is not serving: port 4141 is taken · Switchyard: 2 providers"
            ),
            "{}",
            view.tooltip
        );
        assert_eq!(view.lines, ["openai: healthy", "anthropic: healthy"]);
        let notice = port_taken_notice(4141);
        assert!(notice.body.contains("127.0.0.1:4141"), "{}", notice.body);
        assert!(notice.body.contains("General → Server"), "{}", notice.body);
    }

    #[test]
    fn all_quiet_is_green_with_a_healthy_line_per_configured_provider() {
        let view = tray_view(&health(), &providers());
        assert_eq!(view.level, Level::Healthy);
        assert_eq!(view.lines, ["openai: healthy", "anthropic: healthy"]);
        assert_eq!(
            view.tooltip,
            "Switchyard: 2 providers (0 open, 0 degraded) · 0 keys cooling · 0 models locked"
        );
        assert!(!view.paused);
    }

    #[test]
    fn a_degraded_provider_a_cooling_key_a_locked_model_or_a_pause_each_turn_it_amber() {
        let mut cases: Vec<Health> = Vec::new();
        let mut h = health();
        h.snapshot.breakers.push(breaker("openai", BreakerState::Degraded, 0));
        cases.push(h);
        let mut h = health();
        h.snapshot.credentials.push(cooling("openai", "key-1"));
        cases.push(h);
        let mut h = health();
        h.snapshot.lockouts.push(locked("anthropic", "claude"));
        cases.push(h);
        let mut h = health();
        h.paused = true;
        cases.push(h);
        for h in cases {
            assert_eq!(tray_view(&h, &providers()).level, Level::Warning, "{h:?}");
        }
    }

    #[test]
    fn an_open_or_half_open_breaker_or_a_combo_with_nothing_eligible_turns_it_red() {
        for state in [BreakerState::Open, BreakerState::HalfOpen] {
            let mut h = health();
            h.snapshot.breakers.push(breaker("anthropic", state, 42_000));
            h.snapshot.credentials.push(cooling("openai", "key-1"));
            assert_eq!(tray_view(&h, &providers()).level, Level::Down, "{state:?}");
        }
        let mut h = health();
        h.combos[0].eligible = 0;
        let view = tray_view(&h, &providers());
        assert_eq!(view.level, Level::Down);
        assert!(view.tooltip.ends_with(" · nothing can serve smart"), "{}", view.tooltip);
    }

    #[test]
    fn the_tooltip_names_a_target_a_probe_found_healthy_again_for_five_minutes() {
        let probe = |scope: ProbeScope, ago_ms: u64, healed: bool| ProbeView {
            scope,
            probing: false,
            last: Some(ProbeResult {
                at: UnixMillis(1_800_000_000_000 - ago_ms),
                bench: Bench::BreakerDegraded,
                outcome: if healed { OutcomeKind::Success } else { OutcomeKind::Transient },
                status: Some(if healed { 200 } else { 503 }),
                healed,
            }),
        };
        let mut h = health();
        h.snapshot.probes = vec![
            probe(ProbeScope::Provider { provider: "openai".into() }, 10_000, true),
            probe(
                ProbeScope::Model { key: CandidateKey::new("anthropic", "key-1", "claude") },
                20_000,
                true,
            ),
            probe(ProbeScope::Provider { provider: "stale".into() }, BACK_FOR_MS, true),
            probe(ProbeScope::Provider { provider: "failing".into() }, 1_000, false),
        ];
        let view = tray_view(&h, &providers());
        assert!(
            view.tooltip.ends_with(" · back after a probe: openai, anthropic/claude@key-1"),
            "{}",
            view.tooltip
        );
        assert_eq!(view.level, Level::Healthy, "a healed target is nothing to worry about");
    }

    #[test]
    fn each_line_says_the_breaker_state_retry_time_and_what_is_benched() {
        let mut h = health();
        h.paused = true;
        h.snapshot.breakers.push(breaker("openai", BreakerState::Open, 41_200));
        h.snapshot.credentials.push(cooling("openai", "key-1"));
        h.snapshot.credentials.push(cooling("openai", "key-2"));
        h.snapshot.lockouts.push(locked("openai", "gpt-4o"));
        h.snapshot.breakers.push(breaker("anthropic", BreakerState::HalfOpen, 0));
        let view = tray_view(&h, &providers());
        assert_eq!(
            view.lines,
            [
                "openai: open, retry in 42 s · 2 keys cooling · 1 model locked",
                "anthropic: half-open, probing",
            ]
        );
        assert_eq!(
            view.tooltip,
            "Switchyard (paused): 2 providers (2 open, 0 degraded) · 2 keys cooling · 1 model locked"
        );
        assert!(view.paused);
    }

    fn budget(key: Option<&str>, percent: u32, enforce: bool) -> BudgetView {
        let state = match percent {
            0..80 => BudgetState::Ok,
            80..100 => BudgetState::Warning,
            _ => BudgetState::Reached,
        };
        BudgetView {
            key: key.map(str::to_owned),
            period: switchyard_core::usage::budget::BudgetPeriod::Daily,
            enforce,
            limit: "5".into(),
            limit_nanodollars: 5_000_000_000,
            spent: format!("{}", f64::from(percent) / 20.0),
            spent_nanodollars: u64::from(percent) * 50_000_000,
            percent,
            state,
            resets_at: UnixMillis(1_800_000_000_000 + 57_600_000),
        }
    }

    #[test]
    fn the_tooltip_names_the_budget_nearest_its_limit_and_a_spent_enforced_one_colours_the_tray() {
        let calm = tray_view(&health(), &providers());
        let view =
            with_budgets(calm.clone(), &[budget(None, 40, true), budget(Some("editor"), 82, true)]);
        assert!(
            view.tooltip.ends_with(" · daily budget of editor: $4.1 of $5 (82 %)"),
            "{}",
            view.tooltip
        );
        assert_eq!(view.level, Level::Healthy, "a warning is in the tooltip only");
        let view = with_budgets(calm.clone(), &[budget(Some("editor"), 100, true)]);
        assert!(
            view.tooltip.ends_with(", spent: refusing until 2027-01-16T00:00:00Z"),
            "{}",
            view.tooltip
        );
        assert_eq!(view.level, Level::Warning, "one tool is refused, the others are served");
        assert_eq!(with_budgets(calm.clone(), &[budget(None, 120, true)]).level, Level::Down);
        assert_eq!(with_budgets(calm.clone(), &[budget(None, 120, false)]).level, Level::Healthy);
        assert_eq!(with_budgets(calm.clone(), &[]), calm);
    }

    fn finding(kind: Kind, subject: &str, title: &str) -> Finding {
        Finding {
            id: format!("{}:{subject}", kind.as_str()),
            kind,
            title: title.into(),
            evidence: vec!["seen".into()],
            digest: "d".into(),
            action: Action::Advice { says: "look".into(), link: "#/providers".into() },
        }
    }

    #[test]
    fn the_doctor_s_findings_are_counted_on_a_menu_line_and_in_the_tooltip_without_changing_the_colour()
     {
        let calm = tray_view(&health(), &providers());
        assert_eq!(with_findings(calm.clone(), &[]), calm, "nothing found: nothing said");

        let confirm = finding(
            Kind::DestinationUnconfirmed,
            "newp",
            "newp waits for you to confirm where its requests go",
        );
        let one = with_findings(calm.clone(), std::slice::from_ref(&confirm));
        assert_eq!(one.doctor.as_deref(), Some("Doctor: 1 finding"));
        assert!(
            one.tooltip.ends_with(
                " · doctor: 1 finding (newp waits for you to confirm where its requests go)"
            ),
            "{}",
            one.tooltip
        );
        assert_eq!(one.level, Level::Healthy, "a finding is a suggestion, not a fault");

        let refused = finding(Kind::KeyRefused, "openai/main", "openai/main was refused");
        let two = with_findings(calm, &[confirm, refused]);
        assert_eq!(two.doctor.as_deref(), Some("Doctor: 2 findings"));
        assert!(two.tooltip.ends_with(" · doctor: 2 findings"), "{}", two.tooltip);
        assert_eq!(two.lines, ["openai: healthy", "anthropic: healthy"]);
    }

    #[test]
    fn each_level_has_its_own_colour() {
        let colours = [Level::Healthy.rgb(), Level::Warning.rgb(), Level::Down.rgb()];
        assert_ne!(colours[0], colours[1]);
        assert_ne!(colours[1], colours[2]);
        assert_ne!(colours[0], colours[2]);
    }
}
