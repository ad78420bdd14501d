//! Which state changes become a desktop notification, decided without Tauri: a provider's
//! breaker opening, and a combo served by a fallback target. Each can be turned off
//! (`[settings.notifications]`), and fallbacks are announced at most once a minute per combo,
//! so a failing provider under load does not bury the desktop in notices. A budget at 80 % and
//! a budget reached are always announced (the proxy sends each once per period): setting the
//! budget is asking for them.

use std::collections::HashMap;

use switchyard::config::NotificationSettings;
use switchyard_core::UnixMillis;
use switchyard_core::calendar::rfc3339;
use switchyard_core::resilience::{BreakerState, HealthEvent};
use switchyard_core::usage::budget::{BudgetState, BudgetView};

use crate::status::budget_label;

/// The quiet time after announcing a combo's fallback.
pub const FALLBACK_QUIET_MS: u64 = 60_000;

/// A notification to show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub title: String,
    pub body: String,
}

/// Remembers what was announced when.
#[derive(Debug, Default)]
pub struct Notices {
    fallback_announced: HashMap<String, UnixMillis>,
}

impl Notices {
    /// The notice for a health event, if it deserves one.
    pub fn on_health(
        &mut self,
        event: &HealthEvent,
        settings: &NotificationSettings,
    ) -> Option<Notice> {
        if let HealthEvent::Budget { budget, .. } = event {
            return Some(budget_notice(budget));
        }
        let HealthEvent::Breaker { provider, record: Some(record), .. } = event else {
            return None;
        };
        if !settings.breaker_open || record.state != BreakerState::Open {
            return None;
        }
        let retry = record
            .open_until
            .map(|until| until.0.saturating_sub(record.changed_at.0).div_ceil(1000))
            .map_or_else(String::new, |s| format!(" Switchyard tries it again in {s} s."));
        Some(Notice {
            title: format!("{provider} is failing"),
            body: format!("Its circuit breaker opened; requests go to the other targets.{retry}"),
        })
    }

    /// The notice for a finished request, if it was a fallback worth announcing at `now`.
    pub fn on_request(
        &mut self,
        model: &str,
        served_by: Option<&str>,
        attempts: u32,
        now: UnixMillis,
        settings: &NotificationSettings,
    ) -> Option<Notice> {
        let served_by = served_by?;
        if !settings.fallback || attempts < 2 {
            return None;
        }
        if let Some(last) = self.fallback_announced.get(model)
            && now.0.saturating_sub(last.0) < FALLBACK_QUIET_MS
        {
            return None;
        }
        self.fallback_announced.insert(model.to_owned(), now);
        Some(Notice {
            title: format!("{model} fell back"),
            body: format!("Served by {served_by} after {attempts} attempts."),
        })
    }
}

/// `Daily budget of editor at 90 %` / `… reached`, with what it means.
fn budget_notice(budget: &BudgetView) -> Notice {
    let label = budget_label(budget);
    let resets = rfc3339(budget.resets_at);
    let spent = format!("${} of ${} spent", budget.spent, budget.limit);
    match (budget.state, budget.enforce) {
        (BudgetState::Reached, true) => Notice {
            title: format!("The {label} is spent"),
            body: format!("{spent}: requests it covers are refused until {resets}."),
        },
        (BudgetState::Reached, false) => Notice {
            title: format!("The {label} is spent"),
            body: format!(
                "{spent}; requests still go through (it is not enforced). It resets at {resets}."
            ),
        },
        _ => Notice {
            title: format!("The {label} is at {} %", budget.percent),
            body: format!("{spent}; it resets at {resets}."),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::resilience::BreakerRecord;

    const T0: UnixMillis = UnixMillis(1_800_000_000_000);

    fn breaker(state: BreakerState, open_until: Option<UnixMillis>) -> HealthEvent {
        HealthEvent::Breaker {
            provider: "openai".into(),
            record: Some(BreakerRecord {
                state,
                failures: 5,
                reopens: 0,
                open_until,
                last_fault: None,
                changed_at: T0,
            }),
            at: T0,
        }
    }

    #[test]
    fn an_opening_breaker_is_announced_with_its_retry_time() {
        let on = NotificationSettings::default();
        let notice = Notices::default()
            .on_health(&breaker(BreakerState::Open, Some(UnixMillis(T0.0 + 30_000))), &on)
            .unwrap();
        assert_eq!(notice.title, "openai is failing");
        assert!(notice.body.ends_with("again in 30 s."), "{}", notice.body);
    }

    #[test]
    fn other_breaker_states_and_a_disabled_setting_are_silent() {
        let on = NotificationSettings::default();
        let mut notices = Notices::default();
        for state in [BreakerState::Closed, BreakerState::Degraded, BreakerState::HalfOpen] {
            assert_eq!(notices.on_health(&breaker(state, None), &on), None, "{state:?}");
        }
        let off = NotificationSettings { breaker_open: false, ..on };
        assert_eq!(notices.on_health(&breaker(BreakerState::Open, Some(T0)), &off), None);
    }

    #[test]
    fn a_budget_event_is_announced_saying_whether_requests_are_refused() {
        let budget = |state, percent, enforce| BudgetView {
            key: Some("editor".into()),
            period: switchyard_core::usage::budget::BudgetPeriod::Daily,
            enforce,
            limit: "5".into(),
            limit_nanodollars: 5_000_000_000,
            spent: "4.5".into(),
            spent_nanodollars: 4_500_000_000,
            percent,
            state,
            resets_at: UnixMillis(T0.0 + 57_600_000),
        };
        let off = NotificationSettings { breaker_open: false, fallback: false };
        let mut notices = Notices::default();
        let warned = notices
            .on_health(
                &HealthEvent::Budget { budget: budget(BudgetState::Warning, 90, true), at: T0 },
                &off,
            )
            .unwrap();
        assert_eq!(warned.title, "The daily budget of editor is at 90 %");
        assert_eq!(warned.body, "$4.5 of $5 spent; it resets at 2027-01-16T00:00:00Z.");
        let spent = notices
            .on_health(
                &HealthEvent::Budget { budget: budget(BudgetState::Reached, 100, true), at: T0 },
                &off,
            )
            .unwrap();
        assert!(spent.body.contains("are refused until 2027-01-16T00:00:00Z"), "{}", spent.body);
    }

    #[test]
    fn a_fallback_is_announced_once_a_minute_per_combo() {
        let on = NotificationSettings::default();
        let mut n = Notices::default();
        let fell_back = |n: &mut Notices, model: &str, at: u64| {
            n.on_request(model, Some("an/claude"), 2, UnixMillis(T0.0 + at), &on)
        };
        assert!(fell_back(&mut n, "smart", 0).is_some());
        assert!(fell_back(&mut n, "smart", FALLBACK_QUIET_MS - 1).is_none());
        assert!(fell_back(&mut n, "fast", 1).is_some(), "another combo has its own quiet time");
        assert!(fell_back(&mut n, "smart", FALLBACK_QUIET_MS).is_some());
    }

    #[test]
    fn first_choice_answers_failures_and_a_disabled_setting_are_not_fallbacks() {
        let on = NotificationSettings::default();
        let mut n = Notices::default();
        assert_eq!(n.on_request("smart", Some("oa/gpt-4o"), 1, T0, &on), None);
        assert_eq!(n.on_request("smart", None, 3, T0, &on), None);
        let off = NotificationSettings { fallback: false, ..on };
        assert_eq!(n.on_request("smart", Some("an/claude"), 2, T0, &off), None);
    }
}
