//! Errors of `ickpt prune` and `ickpt rm` (`crate::maintain`).

use super::{FileError, ReadError};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum MaintainError {
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Removing a version's file.
    #[error(transparent)]
    File(#[from] FileError),
    #[error("version {version} is in none of {tiers}")]
    NotFound { version: u64, tiers: String },
    #[error("version {version} is read by the restore of {dependents} in {store}: removing it breaks their chain; give --with-dependents to remove them too")]
    HasDependents {
        version: u64,
        store: String,
        dependents: String,
    },
    #[error("version {version} is named by a global record in {store}: an MPI restart of the job may need it; give --force to remove it anyway")]
    Global { version: u64, store: String },
}
