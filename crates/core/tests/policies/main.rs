//! Policies in a running engine: coarse monitoring (ACCK), the cost policy, the restart bound,
//! retention, pre-copy.
//!
//! One test binary per topic, one file per concern (fewer binaries to link).

#[path = "../common/mod.rs"]
mod common;

mod acck;
mod cost_policy;
mod precopy;
mod restart_bound;
mod retention;
