use super::{FileError, ForkedChild};
use ickpt_format::FormatError;
use thiserror::Error;

/// Why a delta could not be injected. Every check runs before the first byte is written: on
/// any of these errors memory is as it was.
#[derive(Debug, Error)]
pub enum InjectError {
    /// The delta file could not be read.
    #[error(transparent)]
    File(#[from] FileError),
    /// The delta file fails its checks.
    #[error("{file}: not a valid delta: {source}")]
    Corrupt {
        file: String,
        #[source]
        source: FormatError,
    },
    /// The delta names a region that is not protected now, or one of another length.
    #[error("region {id}: {what}")]
    RegionMismatch { id: u64, what: String },
    #[error(transparent)]
    Forked(#[from] ForkedChild),
}
