//! Dev-only support for Switchyard's tests and benchmarks.
//!
//! The fault-injecting mock upstream (OpenAI, Anthropic and Gemini dialects with scripted
//! failures) lands here with the proxy issue. Tests drive time through the core's
//! [`ManualClock`], re-exported so test code has one place to import test tools from.

pub use switchyard_core::ManualClock;
