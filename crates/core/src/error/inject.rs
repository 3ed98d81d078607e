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

/// Why two delta files could not be merged into a third (`ickpt merge`, `ickpt_merge`).
#[derive(Debug, Error)]
pub enum MergeFilesError {
    /// An input could not be read or fails its checks.
    #[error(transparent)]
    Read(#[from] InjectError),
    /// The inputs describe different regions.
    #[error("{a} and {b}: {source}")]
    Layout {
        a: String,
        b: String,
        #[source]
        source: ickpt_format::MergeError,
    },
    /// The merged delta would be larger than ickpt reads back.
    #[error("{file}: the merged delta would be {bytes} bytes, more than ickpt reads back")]
    TooLarge { file: String, bytes: u64 },
    /// Writing the output failed (nothing is left under its name unless noted).
    #[error(transparent)]
    Write(#[from] FileError),
}
