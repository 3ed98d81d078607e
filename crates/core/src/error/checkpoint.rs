//! `checkpoint` and `wait`: a version that could not be written. Nothing committed is
//! touched, and the pages stay dirty for the next attempt.

use super::{FileError, ForkedChild, RegionError};
use crate::track::TrackError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum CheckpointError {
    /// Writing the version's file (create, write, commit).
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Region(#[from] RegionError),
    #[error("checkpoint: checking the fault handler failed: {0}")]
    Tracking(#[source] TrackError),
    #[error("the SIGSEGV handler was replaced after ickpt started, so writes are no longer tracked; install your handler before ickpt_init")]
    HandlerReplaced,
    #[error("version {version} is past the last number the format allows ({max}): {dir} holds {last}, which is not a version this process wrote; move it out of the store")]
    VersionsExhausted {
        version: u64,
        max: u64,
        dir: String,
        last: String,
    },
    #[error("version {version} was abandoned: a thread ickpt needed to commit it wrote to a protected page it could not copy (protected memory shares a page with ickpt's own heap; protect page-aligned memory, e.g. from ickpt_malloc, or give cow_bytes room); the pages stay dirty for the next checkpoint")]
    CommitAborted { version: u64 },
    #[error("version {version} was abandoned: its commit panicked ({message}); this is a bug in ickpt or in the store, please report it; the pages stay dirty for the next checkpoint")]
    CommitPanicked { version: u64, message: String },
    #[error(transparent)]
    Forked(#[from] ForkedChild),
}

impl CheckpointError {
    /// The commit of `version` panicked with `payload`.
    pub fn commit_panicked(version: u64, payload: &(dyn std::any::Any + Send)) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        CheckpointError::CommitPanicked { version, message }
    }
}
