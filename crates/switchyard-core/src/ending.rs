//! How a stream ended (RESILIENCE.md §7): one pure decision, asked at every exit of the relay,
//! for both paths and every dialect.
//!
//! The relay knows two facts about the answer it read (did content arrive, did a finish reason)
//! and one about where it stopped reading (an end marker, the end of the body, a stall, a cut,
//! an error event, the client leaving). From those alone follows what the answer was:
//!
//! | seen                     | any exit but the client leaving |
//! |--------------------------|---------------------------------|
//! | a finish reason          | complete                        |
//! | no finish, no content    | unanswered: may fall back       |
//! | content, no finish       | truncated: continue, else a terminal error |
//!
//! Invariants:
//! - A finish reason is the only proof of a whole answer: an end marker (`[DONE]`,
//!   `message_stop`) without one is a truncated answer, never a complete one, unless the
//!   provider is configured to trust its end marker ([`Trust::EndMarker`]).
//! - Whatever follows a finish reason (an error event, a cut, a stall) cannot unfinish it.
//! - A client that left ends the stream whatever the upstream did: nobody is charged.

use crate::outcome::StreamFault;

/// What the relay has seen of the answer so far (for a continued answer: of the whole client
/// stream for `content`, of the stream being read for `finish`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Seen {
    /// A real event was read: text, thinking, a tool call's start or arguments, a refusal.
    pub content: bool,
    /// A finish (stop) reason was read.
    pub finish: bool,
}

/// Where the relay stopped reading the upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Exit {
    /// The dialect's end marker (`[DONE]`, `message_stop`). Responses' `response.completed`
    /// carries its finish reason with it; Gemini has none (a Gemini client's JSON-array stream
    /// gets its closing `]` only for a complete answer, like any dialect's end).
    EndMarker,
    /// The body ended with no end marker.
    Eof,
    /// No real event within the deadline (first event or idle).
    Stalled,
    /// The connection broke mid-body.
    Cut,
    /// The upstream reported an error inside the stream (Anthropic `event: error`, an
    /// OpenAI-compatible `{"error": …}` chunk, `finish_reason: "error"`, `response.failed`).
    ErrorEvent,
    /// The client went away.
    ClientGone,
}

impl Exit {
    pub const ALL: [Self; 6] =
        [Self::EndMarker, Self::Eof, Self::Stalled, Self::Cut, Self::ErrorEvent, Self::ClientGone];

    /// The fault the classifier is told when this exit truncated an answer. An error event
    /// after content counts as a cut (the answer broke; what the error said is for the
    /// client's terminal event). `None` for a client that left: that charges nobody.
    pub fn fault(self) -> Option<StreamFault> {
        match self {
            Self::EndMarker | Self::Eof => Some(StreamFault::Truncated),
            Self::Stalled => Some(StreamFault::Stalled),
            Self::Cut | Self::ErrorEvent => Some(StreamFault::Cut),
            Self::ClientGone => None,
        }
    }
}

/// What a provider's stream may be trusted with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Trust {
    /// Only a finish reason proves an answer whole (the default).
    #[default]
    FinishReason,
    /// The provider's end marker proves it too: for an OpenAI-compatible server known to end
    /// good answers with `[DONE]` and no finish reason (`trust_end_marker = true`).
    EndMarker,
}

/// How one stream ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ending {
    /// The model finished: the client gets its dialect's proper end and nobody is charged.
    Complete,
    /// Nothing was answered (no real event): the attempt failed as if before its first byte,
    /// and the request may fall back.
    Unanswered,
    /// Content was read but the model did not finish: continued where a capable target
    /// exists, else the client gets a terminal error event and never the end marker.
    Truncated,
    /// The client left; nobody is charged.
    ClientGone,
}

/// The one decision of RESILIENCE.md §7 (see the module's table).
pub fn ending(seen: Seen, exit: Exit, trust: Trust) -> Ending {
    let finished = seen.finish || (exit == Exit::EndMarker && trust == Trust::EndMarker);
    match exit {
        Exit::ClientGone => Ending::ClientGone,
        _ if finished => Ending::Complete,
        _ if seen.content => Ending::Truncated,
        _ => Ending::Unanswered,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (content, finish, exit, trust) cell, written out: the table of RESILIENCE.md §7.
    #[test]
    fn every_cell_of_the_ending_table() {
        use Ending::{ClientGone, Complete, Truncated, Unanswered};
        for trust in [Trust::FinishReason, Trust::EndMarker] {
            for exit in Exit::ALL {
                for (content, finish) in
                    [(false, false), (true, false), (false, true), (true, true)]
                {
                    let seen = Seen { content, finish };
                    let expected = match (exit, finish, content) {
                        (Exit::ClientGone, _, _) => ClientGone,
                        (_, true, _) => Complete,
                        (Exit::EndMarker, false, _) if trust == Trust::EndMarker => Complete,
                        (_, false, true) => Truncated,
                        (_, false, false) => Unanswered,
                    };
                    assert_eq!(ending(seen, exit, trust), expected, "{seen:?} {exit:?} {trust:?}");
                }
            }
        }
    }

    #[test]
    fn an_end_marker_after_content_without_a_finish_reason_is_truncated() {
        let seen = Seen { content: true, finish: false };
        assert_eq!(ending(seen, Exit::EndMarker, Trust::default()), Ending::Truncated);
    }

    #[test]
    fn an_end_marker_before_any_content_is_unanswered_and_may_fall_back() {
        assert_eq!(ending(Seen::default(), Exit::EndMarker, Trust::default()), Ending::Unanswered);
    }

    #[test]
    fn an_error_event_after_the_finish_reason_completes_the_answer() {
        let seen = Seen { content: true, finish: true };
        assert_eq!(ending(seen, Exit::ErrorEvent, Trust::default()), Ending::Complete);
    }

    #[test]
    fn a_trusted_end_marker_does_not_excuse_a_cut() {
        let seen = Seen { content: true, finish: false };
        assert_eq!(ending(seen, Exit::Cut, Trust::EndMarker), Ending::Truncated);
        assert_eq!(ending(seen, Exit::Eof, Trust::EndMarker), Ending::Truncated);
    }

    #[test]
    fn only_a_client_that_left_has_no_fault() {
        for exit in Exit::ALL {
            assert_eq!(exit.fault().is_none(), exit == Exit::ClientGone, "{exit:?}");
        }
        assert_eq!(Exit::EndMarker.fault(), Some(StreamFault::Truncated));
    }
}
