//! The three layers against a small reference model (proptest).
//!
//! Random sequences of attempts (started, finished or dropped, possibly interleaved so that
//! stragglers finish after the state moved on), clock advances forward and backward, restarts
//! (records out, a fresh registry restored from them) and full sweeps are applied both to the
//! real `HealthRegistry` and to the model below. After every step every candidate's
//! eligibility must agree, skip reason and remaining time included.
//!
//! The model is written from RESILIENCE.md with the default policies baked in as constants, in
//! the plainest possible style: no tables, no eviction, no events. Pristine entries are simply
//! default values.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use proptest::prelude::*;
use switchyard_core::outcome::{
    BodyHint, BreakerFault, ClassifyPolicy, CredentialFault, Outcome, OutcomeKind, TransportFault,
    Upstream, classify,
};
use switchyard_core::resilience::registry::RegistryLimits;
use switchyard_core::resilience::{Attempt, HealthRegistry, SkipReason};
use switchyard_core::settings::LockoutSettings;
use switchyard_core::{CandidateKey, UnixMillis, Verdict};

const T0: u64 = 1_700_000_000_000;
const SEC: u64 = 1_000;
const IDLE_TTL: u64 = 600 * SEC;

// Default policies, restated.
const BREAKER_THRESHOLD: u32 = 5;
const BREAKER_RESET: u64 = 30 * SEC;
const BREAKER_MAX_MULT: u64 = 16;
const BREAKER_LONGEST: u64 = BREAKER_RESET * BREAKER_MAX_MULT;
const PROBE_TIMEOUT: u64 = 120 * SEC;
const KEY_BASE: u64 = 3 * SEC;
const KEY_MAX: u64 = 300 * SEC;
const KEY_QUOTA: u64 = 3_600 * SEC;
const KEY_MAX_LEVEL: u32 = 10;
const KEY_LONGEST: u64 = 3_600 * SEC;
const LOCK_BASE: u64 = 10 * SEC;
const LOCK_MAX: u64 = 60 * SEC; // LockoutSettings::default().max_cooldown (one minute)
const LOCK_STEPS: u32 = 5;
const LOCK_LONGEST: u64 = 3_600 * SEC;

// ---------------------------------------------------------------------------------------------
// The model

#[derive(Clone, Debug, Default)]
struct ModelBreaker {
    open_until: Option<u64>,
    half_open: bool,
    probes: Vec<(u64, u64)>, // (id, deadline)
    failures: u32,
    reopens: u32,
    changed_at: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum KeyStatus {
    #[default]
    Active,
    Cooling,
    Quota,
    Invalid,
}

#[derive(Clone, Debug, Default)]
struct ModelKey {
    status: KeyStatus,
    until: Option<u64>,
    level: u32,
    changed_at: u64,
}

#[derive(Clone, Debug, Default)]
struct ModelLock {
    until: Option<u64>,
    rate_limited: bool,
    failures: u32,
    changed_at: u64,
}

#[derive(Clone, Debug, Default)]
struct Model {
    breakers: HashMap<usize, ModelBreaker>,
    keys: HashMap<(usize, usize), ModelKey>,
    locks: HashMap<(usize, usize, usize), ModelLock>,
    next_probe: u64,
}

fn pow2(n: u32) -> u64 {
    1u64.checked_shl(n).unwrap_or(u64::MAX)
}

impl ModelBreaker {
    fn refresh(&mut self, now: u64) {
        if let Some(until) = self.open_until {
            if now >= until {
                self.open_until = None;
                self.half_open = true;
                self.probes.clear();
                self.changed_at = until;
            } else if until > now + BREAKER_LONGEST {
                self.open_until = Some(now + BREAKER_LONGEST);
                self.changed_at = now;
            }
        }
        self.probes.retain(|&(_, deadline)| deadline > now);
        // Closed: the count halves per whole reset timeout since the last change.
        if self.open_until.is_none() && !self.half_open && self.failures > 0 {
            let halvings = now.saturating_sub(self.changed_at) / BREAKER_RESET;
            if halvings > 0 {
                self.failures = self
                    .failures
                    .checked_shr(u32::try_from(halvings).unwrap_or(u32::MAX))
                    .unwrap_or(0);
                self.changed_at += halvings * BREAKER_RESET;
            }
        }
    }

    fn check(&self, now: u64) -> Result<(), SkipReason> {
        if let Some(until) = self.open_until {
            return Err(SkipReason::BreakerOpen { retry_in_ms: until - now });
        }
        if self.half_open && !self.probes.is_empty() {
            let first = self.probes.iter().map(|p| p.1).min().unwrap();
            return Err(SkipReason::BreakerProbing { retry_in_ms: first.saturating_sub(now) });
        }
        Ok(())
    }

    fn is_live_probe(&self, probe: Option<u64>) -> bool {
        self.half_open && probe.is_some_and(|id| self.probes.iter().any(|p| p.0 == id))
    }

    fn open(&mut self, now: u64) {
        self.open_until = Some(now + BREAKER_RESET * pow2(self.reopens).min(BREAKER_MAX_MULT));
        self.half_open = false;
        self.probes.clear();
        self.changed_at = now;
    }

    fn fail(&mut self, now: u64, fault: BreakerFault, probe: Option<u64>) {
        if self.open_until.is_none() && !self.half_open {
            self.failures += 1;
            self.changed_at = now;
            if fault == BreakerFault::Tls || self.failures >= BREAKER_THRESHOLD {
                self.open(now);
            }
        } else if self.is_live_probe(probe) {
            self.reopens += 1;
            self.open(now);
        }
    }

    fn succeed(&mut self, now: u64, probe: Option<u64>) {
        if self.open_until.is_none() && !self.half_open && self.failures > 0 {
            self.failures -= 1;
            self.changed_at = now;
        } else if self.is_live_probe(probe) {
            *self = Self { changed_at: now, ..Self::default() };
        }
    }

    fn healthy(&self) -> bool {
        self.open_until.is_none() && !self.half_open
    }
}

impl ModelKey {
    fn refresh(&mut self, now: u64) {
        if let Some(until) = self.until {
            if now >= until {
                self.status = KeyStatus::Active;
                self.until = None;
                self.changed_at = until;
            } else if until > now + KEY_LONGEST {
                self.until = Some(now + KEY_LONGEST);
                self.changed_at = now;
            }
        }
    }

    fn check(&self, now: u64) -> Result<(), SkipReason> {
        let retry_in_ms = self.until.map_or(0, |u| u - now);
        match self.status {
            KeyStatus::Active => Ok(()),
            KeyStatus::Cooling => Err(SkipReason::CredentialCooling { retry_in_ms }),
            KeyStatus::Quota => Err(SkipReason::CredentialQuotaExhausted { retry_in_ms }),
            KeyStatus::Invalid => Err(SkipReason::CredentialInvalid),
        }
    }

    fn fail(&mut self, now: u64, fault: CredentialFault, hint: Option<u64>) {
        match fault {
            CredentialFault::Auth if self.status != KeyStatus::Invalid => {
                self.status = KeyStatus::Invalid;
                self.until = None;
            }
            CredentialFault::Quota
                if !matches!(self.status, KeyStatus::Quota | KeyStatus::Invalid) =>
            {
                self.status = KeyStatus::Quota;
                self.until = Some(now + hint.unwrap_or(0).max(KEY_QUOTA));
            }
            CredentialFault::RateLimit if self.status == KeyStatus::Active => {
                let wait = hint.unwrap_or_else(|| (KEY_BASE * pow2(self.level)).min(KEY_MAX));
                self.status = KeyStatus::Cooling;
                self.until = Some(now + wait);
                self.level = (self.level + 1).min(KEY_MAX_LEVEL);
            }
            _ => return,
        }
        self.changed_at = now;
    }

    fn succeed(&mut self, now: u64) {
        if self.level > 0 {
            self.level -= 1;
            self.changed_at = now;
        }
    }

    fn healthy(&self) -> bool {
        self.status == KeyStatus::Active
    }
}

impl ModelLock {
    fn refresh(&mut self, now: u64) {
        if let Some(until) = self.until {
            if now >= until {
                self.until = None;
                self.changed_at = until;
            } else if until > now + LOCK_LONGEST {
                self.until = Some(now + LOCK_LONGEST);
                self.changed_at = now;
            }
        }
    }

    fn check(&self, now: u64) -> Result<(), SkipReason> {
        match self.until {
            Some(until) => Err(SkipReason::ModelLocked {
                retry_in_ms: until - now,
                rate_limited: self.rate_limited,
            }),
            None => Ok(()),
        }
    }

    fn fail(&mut self, now: u64, kind: OutcomeKind, hint: Option<u64>) {
        if self.until.is_some() {
            return;
        }
        self.rate_limited = kind == OutcomeKind::RateLimit;
        self.failures += 1;
        let steps = (self.failures - 1).min(LOCK_STEPS);
        self.until = Some(now + hint.unwrap_or_else(|| (LOCK_BASE * pow2(steps)).min(LOCK_MAX)));
        self.changed_at = now;
    }

    fn succeed(&mut self, now: u64) {
        if self.failures > 0 {
            self.failures /= 2;
            self.changed_at = now;
        }
    }
}

impl Model {
    fn touch(&mut self, (p, c, m): (usize, usize, usize), now: u64) -> Result<(), SkipReason> {
        // A look forgets what has been healthy and quiet for the idle horizon, as a sweep would.
        let idle = |changed_at: u64| now.saturating_sub(changed_at) >= IDLE_TTL;
        let b = self.breakers.entry(p).or_default();
        b.refresh(now);
        if b.healthy() && idle(b.changed_at) {
            *b = ModelBreaker::default();
        }
        let k = self.keys.entry((p, c)).or_default();
        k.refresh(now);
        if k.healthy() && idle(k.changed_at) {
            *k = ModelKey::default();
        }
        let l = self.locks.entry((p, c, m)).or_default();
        l.refresh(now);
        if l.until.is_none() && idle(l.changed_at) {
            *l = ModelLock::default();
        }
        b.check(now)?;
        k.check(now)?;
        l.check(now)
    }

    /// Admits an attempt: `Ok(Some(probe))` when it is the breaker's probe.
    fn admit(&mut self, key: (usize, usize, usize), now: u64) -> Result<Option<u64>, SkipReason> {
        self.touch(key, now)?;
        let b = self.breakers.get_mut(&key.0).unwrap();
        if !b.half_open {
            return Ok(None);
        }
        self.next_probe += 1;
        b.probes.push((self.next_probe, now + PROBE_TIMEOUT));
        Ok(Some(self.next_probe))
    }

    fn release(&mut self, key: (usize, usize, usize), probe: Option<u64>) {
        if let (Some(id), Some(b)) = (probe, self.breakers.get_mut(&key.0)) {
            b.probes.retain(|p| p.0 != id);
        }
    }

    fn finish(&mut self, key: (usize, usize, usize), probe: Option<u64>, v: &Verdict, now: u64) {
        let _ = self.touch(key, now);
        if v.kind != OutcomeKind::Aborted {
            let hint = v.retry_after.map(|d| u64::try_from(d.as_millis()).unwrap());
            let success = v.kind == OutcomeKind::Success;
            let b = self.breakers.get_mut(&key.0).unwrap();
            match v.charges.provider {
                Some(fault) => b.fail(now, fault, probe),
                None => b.succeed(now, probe),
            }
            let k = self.keys.get_mut(&(key.0, key.1)).unwrap();
            match v.charges.credential {
                Some(fault) => k.fail(now, fault, hint),
                None if success => k.succeed(now),
                None => {}
            }
            let l = self.locks.get_mut(&key).unwrap();
            if v.charges.model {
                l.fail(now, v.kind, hint);
            } else if success {
                l.succeed(now);
            }
        }
        self.release(key, probe);
    }

    fn sweep(&mut self, now: u64) {
        let idle = |changed_at: u64| now.saturating_sub(changed_at) >= IDLE_TTL;
        for b in self.breakers.values_mut() {
            b.refresh(now);
            if b.healthy() && idle(b.changed_at) {
                *b = ModelBreaker::default();
            }
        }
        for k in self.keys.values_mut() {
            k.refresh(now);
            if k.healthy() && idle(k.changed_at) {
                *k = ModelKey::default();
            }
        }
        for l in self.locks.values_mut() {
            l.refresh(now);
            if l.until.is_none() && idle(l.changed_at) {
                *l = ModelLock::default();
            }
        }
    }

    /// What survives a restart: probes in flight die with the process; deadlines beyond the
    /// longest cooldown are pulled back.
    fn restart(&mut self, now: u64) {
        for b in self.breakers.values_mut() {
            b.probes.clear();
            b.open_until = b.open_until.map(|u| u.min(now + BREAKER_LONGEST));
        }
        for k in self.keys.values_mut() {
            k.until = k.until.map(|u| u.min(now + KEY_LONGEST));
        }
        for l in self.locks.values_mut() {
            l.until = l.until.map(|u| u.min(now + LOCK_LONGEST));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Operations

const PROVIDERS: usize = 2;
const CREDENTIALS: usize = 2;
const MODELS: usize = 2;

#[derive(Clone, Copy, Debug)]
enum Response {
    Status(u16),
    StatusRetryAfter(u16, u64),
    QuotaBody,
    Transport(TransportFault),
    Timeout,
    Aborted,
}

#[derive(Clone, Debug)]
enum Op {
    /// Admit an attempt and keep it in flight.
    Start(usize, usize, usize),
    /// Finish the n-th attempt in flight (modulo how many there are).
    Finish(usize, Response),
    /// Drop the n-th attempt in flight unsettled (cancelled task, panic).
    Drop(usize),
    Advance(u64),
    Rewind(u64),
    Restart,
    Sweep,
}

fn response() -> impl Strategy<Value = Response> {
    prop_oneof![
        4 => Just(Response::Status(200)),
        2 => Just(Response::Status(429)),
        3 => prop::sample::select(vec![400, 401, 402, 404, 408, 429, 500, 502, 503, 529]).prop_map(Response::Status),
        2 => (prop::sample::select(vec![429, 503]), 0..7_200u64).prop_map(|(s, r)| Response::StatusRetryAfter(s, r)),
        1 => Just(Response::QuotaBody),
        1 => prop::sample::select(vec![TransportFault::ConnectRefused, TransportFault::Tls, TransportFault::ResetBeforeHeaders])
            .prop_map(Response::Transport),
        1 => Just(Response::Timeout),
        1 => Just(Response::Aborted),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        // Most traffic on one candidate, so histories get long enough to reach backoff caps.
        3 => Just(Op::Start(0, 0, 0)),
        3 => (0..PROVIDERS, 0..CREDENTIALS, 0..MODELS).prop_map(|(p, c, m)| Op::Start(p, c, m)),
        6 => (any::<usize>(), response()).prop_map(|(i, r)| Op::Finish(i, r)),
        1 => any::<usize>().prop_map(Op::Drop),
        3 => prop_oneof![0..5_000u64, 0..60_000u64, 0..4_000_000u64].prop_map(Op::Advance),
        1 => prop_oneof![0..5_000u64, 0..10_000_000u64].prop_map(Op::Rewind),
        1 => Just(Op::Restart),
        1 => Just(Op::Sweep),
    ]
}

fn verdict(response: Response, policy: &ClassifyPolicy, now: UnixMillis) -> Verdict {
    let mut headers = HeaderMap::new();
    let (upstream, aborted) = match response {
        Response::Status(status) => {
            (Upstream::Response { status, headers: &headers, body: BodyHint::None }, false)
        }
        Response::StatusRetryAfter(status, secs) => {
            headers.insert("retry-after", secs.to_string().parse().unwrap());
            (Upstream::Response { status, headers: &headers, body: BodyHint::None }, false)
        }
        Response::QuotaBody => (
            Upstream::Response {
                status: 429,
                headers: &headers,
                body: BodyHint::InsufficientQuota,
            },
            false,
        ),
        Response::Transport(fault) => (Upstream::Transport(fault), false),
        Response::Timeout => {
            (Upstream::Timeout(switchyard_core::outcome::TimeoutPhase::Headers), false)
        }
        Response::Aborted => {
            (Upstream::Timeout(switchyard_core::outcome::TimeoutPhase::FirstEvent), true)
        }
    };
    classify(&Outcome { client_aborted: aborted, ..Outcome::new(upstream) }, policy, now)
}

fn key_of((p, c, m): (usize, usize, usize)) -> CandidateKey {
    CandidateKey::new(format!("p{p}"), format!("c{c}"), format!("m{m}"))
}

/// `lock_429`: whether 429 is a lockout code (the default) or cools the whole credential.
fn registry(lock_429: bool) -> Arc<HealthRegistry> {
    // No automatic sweeping: which entries a partial sweep visits depends on table order, which
    // the model does not have. Sweeps happen as whole passes, through `Op::Sweep`.
    let registry = HealthRegistry::new(RegistryLimits {
        sweep_budget: 0,
        idle_ttl: Duration::from_millis(IDLE_TTL),
        ..RegistryLimits::default()
    });
    let codes = if lock_429 { vec![404, 429, 503] } else { vec![404, 503] };
    let settings = LockoutSettings { error_codes: codes, ..LockoutSettings::default() };
    registry.set_lockout_policy(settings.validate().unwrap());
    Arc::new(registry)
}

struct InFlight {
    key: (usize, usize, usize),
    real: Attempt,
    probe: Option<u64>,
}

fn run(lock_429: bool, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut real = registry(lock_429);
    let mut model = Model::default();
    let mut in_flight: Vec<InFlight> = Vec::new();
    let mut now = T0;

    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Start(p, c, m) => {
                let key = (p, c, m);
                let got = real.admit(&key_of(key), UnixMillis(now));
                let want = model.admit(key, now);
                match (got, want) {
                    (Ok(attempt), Ok(probe)) => {
                        prop_assert_eq!(
                            attempt.is_probe(),
                            probe.is_some(),
                            "step {}: {:?}",
                            step,
                            op
                        );
                        in_flight.push(InFlight { key, real: attempt, probe });
                    }
                    (Err(got), Err(want)) => prop_assert_eq!(got, want, "step {}: {:?}", step, op),
                    (got, want) => {
                        prop_assert!(
                            false,
                            "step {step}: {op:?}: admit {:?} vs model {want:?}",
                            got.map(|_| ())
                        );
                    }
                }
            }
            Op::Finish(i, response) if !in_flight.is_empty() => {
                let f = in_flight.swap_remove(i % in_flight.len());
                let v = verdict(response, &real.classify_policy(), UnixMillis(now));
                f.real.finish(&v, UnixMillis(now));
                model.finish(f.key, f.probe, &v, now);
            }
            Op::Drop(i) if !in_flight.is_empty() => {
                let f = in_flight.swap_remove(i % in_flight.len());
                drop(f.real);
                model.release(f.key, f.probe);
            }
            Op::Finish(..) | Op::Drop(_) => {}
            Op::Advance(ms) => now += ms,
            Op::Rewind(ms) => now = now.saturating_sub(ms).max(T0 / 2),
            Op::Restart => {
                in_flight.clear();
                let records = real.records();
                real = registry(lock_429);
                real.restore(&records, UnixMillis(now));
                model.restart(now);
            }
            Op::Sweep => {
                let entries = real.len();
                real.sweep(UnixMillis(now), entries);
                model.sweep(now);
            }
        }
        for p in 0..PROVIDERS {
            for c in 0..CREDENTIALS {
                for m in 0..MODELS {
                    let key = (p, c, m);
                    let got = real.eligible(&key_of(key), UnixMillis(now));
                    let want = model.touch(key, now);
                    prop_assert_eq!(
                        got,
                        want,
                        "step {} ({:?}) key {:?} at +{}ms",
                        step,
                        op,
                        key,
                        now.cast_signed() - T0.cast_signed()
                    );
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, max_shrink_iters: 10_000, ..ProptestConfig::default() })]

    #[test]
    fn registry_agrees_with_the_reference_model(lock_429: bool, ops in prop::collection::vec(op(), 1..200)) {
        run(lock_429, &ops)?;
    }
}

#[test]
fn model_and_registry_agree_on_a_hand_written_flap() {
    use Op::{Advance, Finish, Start};
    let mut ops = Vec::new();
    for _ in 0..5 {
        ops.extend([Start(0, 0, 0), Finish(0, Response::Status(502))]);
    }
    ops.extend([
        Advance(30_000),
        Start(0, 0, 0),
        Finish(0, Response::Transport(TransportFault::ConnectRefused)),
    ]);
    ops.extend([
        Advance(60_000),
        Start(0, 1, 1),
        Finish(0, Response::Status(200)),
        Op::Restart,
        Op::Sweep,
    ]);
    run(true, &ops).unwrap();
}
