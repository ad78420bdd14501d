//! Falling back after `context_length_exceeded` (RESILIENCE.md §2): which targets may still
//! take a request that one model refused as too long.
//!
//! A refusal says something about the model, not the provider: the same model elsewhere would
//! refuse the same prompt, and so would any target whose window is known to be no larger than
//! the refusing one's. Every other target may be tried: a larger window, or one nobody wrote
//! down (an unknown window proves nothing either way). Only when no such target is left does the
//! client get the provider's error.

use crate::ModelId;

/// What earlier `context_length_exceeded` refusals of this request rule out. The default rules
/// out nothing and allocates nothing: most requests never meet a refusal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextNeed {
    /// Models that refused the request as too long.
    refused: Vec<ModelId>,
    /// The largest known window among them.
    window: Option<u32>,
}

impl ContextNeed {
    /// `model`, whose window is `window` if known, refused the request as too long.
    pub fn refused_by(&mut self, model: &ModelId, window: Option<u32>) {
        if !self.refused.contains(model) {
            self.refused.push(model.clone());
        }
        self.window = self.window.max(window);
    }

    /// Whether a target of `model` with `window` may still be tried.
    pub fn admits(&self, model: &ModelId, window: Option<u32>) -> bool {
        if self.refused.contains(model) {
            return false;
        }
        match (self.window, window) {
            (Some(refused), Some(window)) => window > refused,
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(id: &str) -> ModelId {
        id.into()
    }

    #[test]
    fn nothing_is_ruled_out_before_a_refusal() {
        assert!(ContextNeed::default().admits(&model("a"), Some(1)));
        assert!(ContextNeed::default().admits(&model("a"), None));
    }

    #[test]
    fn a_refusal_by_a_model_of_unknown_window_leaves_every_other_model_in() {
        let mut need = ContextNeed::default();
        need.refused_by(&model("small"), None);
        assert!(!need.admits(&model("small"), None), "never the same model elsewhere");
        assert!(!need.admits(&model("small"), Some(1_000_000)), "the same model, whatever it says");
        assert!(need.admits(&model("other"), None), "an unknown window is tried");
        assert!(need.admits(&model("other"), Some(8_000)), "nothing to compare a known one with");
    }

    #[test]
    fn a_refusal_by_a_model_of_known_window_rules_out_windows_no_larger() {
        let mut need = ContextNeed::default();
        need.refused_by(&model("small"), Some(128_000));
        assert!(!need.admits(&model("same"), Some(128_000)), "no larger is no better");
        assert!(!need.admits(&model("smaller"), Some(32_000)));
        assert!(need.admits(&model("larger"), Some(200_000)));
        assert!(need.admits(&model("unknown"), None), "a window not known is tried");
    }

    #[test]
    fn refusals_add_up_to_the_largest_window_and_every_model() {
        let mut need = ContextNeed::default();
        need.refused_by(&model("a"), Some(200_000));
        need.refused_by(&model("b"), None);
        need.refused_by(&model("c"), Some(100_000));
        assert!(!need.admits(&model("d"), Some(150_000)), "the largest refusing window counts");
        assert!(need.admits(&model("d"), Some(400_000)));
        assert!(!need.admits(&model("b"), Some(400_000)));
    }
}
