//! Team mode (issue 20): several instances share breaker, cooldown and lockout state through a
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
//!   most [`link::LEASE_WAIT`].
//! - A change that came from the database is applied to the registry without becoming an
//!   operation again (`HealthRegistry::apply_shared_*`), so nothing echoes.
//! - Shared deadlines are instants of the database's clock; each instance converts them with its
//!   measured offset, so a skewed clock cannot bench anything longer or shorter than meant.

pub mod identity;
pub mod link;
pub mod offset;
pub mod shared;

pub use self::identity::{TeamCredential, TeamIdentities, TeamModel, TeamProvider};
pub use self::link::{LeaseAnswer, LeaseRequest, TeamInbox, TeamLink, TeamOp, TeamTarget};
pub use self::offset::ClockOffset;
pub use self::shared::{
    BreakerChange, CredentialChange, Lease, LockoutChange, SharedBreaker, SharedCredential,
    SharedLockout, Stamp,
};
