//! Which targets may answer one embeddings request: vectors of different models do not mix
//! (a query embedded by one model finds nothing among documents embedded by another), so an
//! embeddings request goes only to targets that embed into its combo's space: that of the
//! combo's first target in the order the user wrote, whatever is benched or how a strategy
//! orders them. A space is named by a model id: the target's own, or the one its model
//! declares it `embeds_like` (the same model served by another host).

use super::Candidate;

/// Why a candidate of another space is passed over, as the trace names it.
pub const OTHER_SPACE: &str = "other_embedding_space";

/// `candidates` split into those of space `home`, in order, and those of any other: never
/// offered, only named in the trace. `space` is a candidate's space.
pub fn within_space<'s>(
    candidates: Vec<Candidate>,
    home: &str,
    space: impl Fn(&Candidate) -> &'s str,
) -> (Vec<Candidate>, Vec<Candidate>) {
    candidates.into_iter().partition(|candidate| space(candidate) == home)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::CandidateKey;

    fn candidate(target: usize, credential: &str, model: &'static str) -> Candidate {
        Candidate { target, key: CandidateKey::new("p", credential, model) }
    }

    #[test]
    fn only_candidates_of_the_home_space_are_offered_in_their_order() {
        let candidates = vec![
            candidate(1, "b", "small"),
            candidate(0, "a", "large"),
            candidate(1, "a", "small"),
            candidate(2, "a", "small-elsewhere"),
        ];
        // Targets 1 and 2 embed into `small` (2 serves it elsewhere); target 0 into `large`.
        let spaces = ["large", "small", "small"];
        let space = |c: &Candidate| spaces[c.target];
        let (offered, passed) = within_space(candidates.clone(), "small", space);
        let keys = |cs: &[Candidate]| cs.iter().map(|c| c.key.to_string()).collect::<Vec<_>>();
        let expected = [candidates[0].clone(), candidates[2].clone(), candidates[3].clone()];
        assert_eq!(keys(&offered), keys(&expected));
        assert_eq!(keys(&passed), keys(&[candidates[1].clone()]));
        let (offered, passed) = within_space(candidates.clone(), "large", space);
        assert_eq!((keys(&offered), passed.len()), (keys(&[candidates[1].clone()]), 3));
    }
}
