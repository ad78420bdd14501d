//! Team mode: several instances share breaker, cooldown and lockout state through a
//! database. This is the domain half, with no I/O; the database half (`PostgreSQL`,
//! `LISTEN`/`NOTIFY`, the sync task) is `switchyard-store`'s `team`.
//!
//! - [`identity`]: what a shared entry is called across machines (a provider's base URL, a
//!   keyed hash of a credential's secret), never the config-local names.
//! - [`shared`]: what the database holds and how an instance's change composes with the others':
//!   each change is applied to the current shared entry at the database's `now` by the same
//!   state machines the local layers run, so two instances at 3 of 5 failures open the breaker
//!   at the fifth, and a half-open probe slot is a lease only one instance holds.
//! - [`offset`]: how far this instance's clock is from the database's, to read shared deadlines
//!   in local time.
//! - [`link`]: the registry's end of the sync task: operations out (never waiting), leases
//!   asked for with a deadline.
//!
//! Invariants:
//! - The request path never waits on the database, except for a half-open lease, and that at
//!   most the wait derived from the measured round trip ([`round_trip`]).
//! - What comes from the team is bounded by this instance's own policy before it is taken in
//!   ([`trust`]): a forged row or lease outlives its bound nowhere.
//! - A change that came from the database is applied to the registry without becoming an
//!   operation again (`HealthRegistry::apply_shared_*`), so nothing echoes.
//! - Shared deadlines are instants of the database's clock; each instance converts them with its
//!   measured offset, so a skewed clock cannot bench anything longer or shorter than meant.

pub mod identity;
pub mod link;
pub mod offset;
pub mod round_trip;
pub mod shared;
pub mod trust;

pub use self::identity::{TeamCredential, TeamIdentities, TeamModel, TeamProvider};
pub use self::link::{
    LeaseAnswer, LeaseMessage, LeaseRequest, LeaseScope, LinkControl, Overflow, TeamInbox,
    TeamLink, TeamOp, TeamTarget,
};
pub use self::offset::ClockOffset;
pub use self::round_trip::RoundTrips;
pub use self::shared::{
    BreakerChange, CredentialChange, Lease, LockoutChange, SharedBreaker, SharedCredential,
    SharedLockout, Stamp,
};
