//! Recording global versions of a coordinated job, and discarding versions a restart of the
//! job must not see.

use super::{FileError, ForkedChild, ReadError};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum GlobalError {
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Writing or removing a record or a version file.
    #[error(transparent)]
    File(#[from] FileError),
    #[error("global version {global} is not after {newest}, the highest record file in {dir} (intact or not): global versions are recorded in increasing order; 'ickpt ls' shows the records that count")]
    OutOfOrder {
        global: u64,
        newest: u64,
        dir: String,
    },
    #[error("global version {global} is out of range (1 to {max})")]
    BadNumber { global: u64, max: u64 },
    #[error(transparent)]
    Forked(#[from] ForkedChild),
}
