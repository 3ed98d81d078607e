//! Deleting versions no kept chain needs.

use super::{FileError, ForkedChild, ReadError};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum GcError {
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Removing a version's file.
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Forked(#[from] ForkedChild),
}
