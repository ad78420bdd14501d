//! The live attempts of one request (RESILIENCE.md §8, §10): one state read by the attempt
//! loop, its hedge race and its continuations alike, so that a hedge and a continuation are
//! just more attempts of the same request.
//!
//! Before this state existed, a continuation was handed copies of the loop's counters taken
//! before a race: it could continue on a provider the race had just seen fail, add an attempt
//! past `max_attempts`, or let a hedge answer after the primary's no-fallback verdict. Now every
//! attempt is started through [`AttemptState::start`], every failure rules its provider out
//! here, and a verdict that forbids falling back closes the request to every other target.
//!
//! Pure and synchronous: the proxy keeps it behind a short lock and never awaits while holding
//! it.

use crate::ProviderId;
use crate::routing::ContextNeed;

/// What one request's attempts have done so far.
#[derive(Clone, Debug)]
pub struct AttemptState {
    max_attempts: u32,
    /// Upstream attempts started: first tries, same-target retries, hedges, continuations.
    attempts: u32,
    /// Providers that failed this request on their own account: not tried again for it.
    failed: Vec<ProviderId>,
    /// What `context_length_exceeded` refusals rule out.
    context: ContextNeed,
    /// A verdict that forbids falling back (a policy refusal, the client's own error) was met:
    /// no other target may answer instead, neither a hedge nor a continuation.
    closed: bool,
}

/// Why a candidate is not tried, though the registry would admit it.
pub const PROVIDER_FAILED: &str = "provider_failed_this_request";
pub const CONTEXT_TOO_SMALL: &str = "context_window_too_small";

impl AttemptState {
    pub fn new(max_attempts: u32) -> Self {
        Self {
            max_attempts,
            attempts: 0,
            failed: Vec::new(),
            context: ContextNeed::default(),
            closed: false,
        }
    }

    /// Starts one more upstream attempt if the cap allows and no final verdict was met.
    pub fn start(&mut self) -> bool {
        if self.closed || self.attempts >= self.max_attempts {
            return false;
        }
        self.attempts += 1;
        true
    }

    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Attempts still allowed.
    pub fn left(&self) -> u32 {
        if self.closed { 0 } else { self.max_attempts.saturating_sub(self.attempts) }
    }

    /// Whether another attempt may follow the one in flight.
    pub fn another_allowed(&self) -> bool {
        self.left() > 0
    }

    /// `provider` failed this request on its own account.
    pub fn rule_out(&mut self, provider: &ProviderId) {
        if !self.failed.contains(provider) {
            self.failed.push(provider.clone());
        }
    }

    pub fn failed(&self) -> &[ProviderId] {
        &self.failed
    }

    /// A verdict that forbids falling back: nobody else answers this request.
    pub fn close(&mut self) {
        self.closed = true;
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    pub fn context(&self) -> &ContextNeed {
        &self.context
    }

    pub fn context_mut(&mut self) -> &mut ContextNeed {
        &mut self.context
    }

    /// Why a target on `provider` serving `model` (window `window`, if known) may not be tried
    /// for this request; `None` when it may.
    pub fn screen(
        &self,
        provider: &ProviderId,
        model: &crate::ModelId,
        window: Option<u32>,
    ) -> Option<&'static str> {
        if self.failed.contains(provider) {
            Some(PROVIDER_FAILED)
        } else if !self.context.admits(model, window) {
            Some(CONTEXT_TOO_SMALL)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_of_every_kind_share_one_cap() {
        let mut state = AttemptState::new(3);
        assert!(state.start(), "the first try");
        assert!(state.start(), "a hedge");
        assert_eq!(state.left(), 1);
        assert!(state.start(), "a continuation");
        assert!(!state.start(), "a fourth attempt of any kind is refused");
        assert_eq!((state.attempts(), state.left()), (3, 0));
        assert!(!state.another_allowed());
    }

    #[test]
    fn a_provider_ruled_out_by_a_racing_attempt_is_out_for_every_later_one() {
        let mut state = AttemptState::new(3);
        let (a, b) = (ProviderId::from("a"), ProviderId::from("b"));
        state.rule_out(&a);
        state.rule_out(&a);
        assert_eq!(state.failed(), std::slice::from_ref(&a));
        assert_eq!(state.screen(&a, &"m".into(), None), Some(PROVIDER_FAILED));
        assert_eq!(state.screen(&b, &"m".into(), None), None);
    }

    #[test]
    fn a_final_verdict_closes_the_request_to_every_other_attempt() {
        let mut state = AttemptState::new(3);
        assert!(state.start());
        state.close();
        assert!(state.is_closed());
        assert_eq!(state.left(), 0);
        assert!(!state.start(), "no hedge, no continuation, no fallback");
    }

    #[test]
    fn a_context_refusal_screens_the_same_model_and_smaller_windows() {
        let mut state = AttemptState::new(3);
        state.context_mut().refused_by(&"small".into(), Some(8_000));
        let p = ProviderId::from("p");
        assert_eq!(state.screen(&p, &"small".into(), None), Some(CONTEXT_TOO_SMALL));
        assert_eq!(state.screen(&p, &"other".into(), Some(4_000)), Some(CONTEXT_TOO_SMALL));
        assert_eq!(state.screen(&p, &"other".into(), None), None);
    }
}
