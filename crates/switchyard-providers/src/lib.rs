//! Upstream provider dialects: wire types, translation between the client and upstream
//! dialects, SSE decoding and encoding, the pooled HTTP executor, and each adapter's refinement
//! of an [`Outcome`](switchyard_core::Outcome) before it is classified.
//!
//! Empty until the proxy issue: the crate exists now so the dependency direction
//! (`core ← providers ← switchyard`) is fixed from the start.
