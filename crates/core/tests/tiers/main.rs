//! Tiers and coordination: draining to a shared tier, verify on a live store, global versions,
//! the job file.
//!
//! One test binary per topic, one file per concern (fewer binaries to link).

#[path = "../common/mod.rs"]
mod common;

mod global_versions;
mod job_file;
mod outside_drain;
mod tiers;
mod verify_live;
