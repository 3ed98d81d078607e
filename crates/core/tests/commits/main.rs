//! Commits: async and sync commits against writers, store faults, the committer's own heap and
//! stack inside tracked memory, fault-around.
//!
//! One test binary per topic, one file per concern (fewer binaries to link).

#[path = "../common/mod.rs"]
mod common;

mod async_commit;
mod commit_encoder_no_malloc;
mod fault_around;
mod faults;
mod narrow_fence;
mod owner_heap;
mod race;
mod reported;
mod stack;
