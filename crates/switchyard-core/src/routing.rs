//! Routing: combos (named, ordered sets of targets), aliases (other tools' model names mapped
//! onto routes), the strategies that order them, the planner
//! that turns a combo into candidates through the three resilience layers, and the retry budget
//! (RESILIENCE.md §1, §8).
//!
//! Everything here is pure and synchronous: the planner reads the health registry without
//! awaiting, and the attempt loop that does the I/O lives in the app.

pub mod accounts;
pub mod alias;
pub mod attempts;
pub mod auto;
pub mod budget;
pub mod combo;
pub mod context;
pub mod embeddings;
pub mod hedge;
pub mod planner;
pub mod session;
pub mod strategy;

pub use self::accounts::Accounts;
pub use self::alias::{Alias, AliasTable, Pattern};
pub use self::budget::RetryBudget;
pub use self::combo::{Combo, Price, RouteStrategy, Target};
pub use self::context::ContextNeed;
pub use self::hedge::HedgeAfter;
pub use self::planner::{
    Candidate, Plan, Probe, ProviderRoster, Skipped, plan, plan_for, prefer_within_targets,
};
pub use self::strategy::TargetOrderer;
