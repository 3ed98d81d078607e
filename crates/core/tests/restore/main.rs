//! Restores: large restores, round trips, and the acceptance checks of spliced and damaged files.
//!
//! One test binary per topic, one file per concern (fewer binaries to link).

#[path = "../common/mod.rs"]
mod common;

mod acceptance;
mod restore_large;
mod roundtrip;
