//! Copying committed versions down the tiers (`engine/drain.rs`). A drain failure never
//! touches the versions already committed on the first tier: they stay there, and the drain
//! tries again at the next checkpoint and at the next start.

use super::{FileError, GcError};
use crate::store::StoreId;
use std::sync::Arc;
use thiserror::Error;

#[derive(Debug, Clone, Error)]
pub enum DrainError {
    /// Reading from the first tier or writing to a lower one (a full shared file system is
    /// `FileError::NoSpace`).
    #[error("draining to the {tier} tier: {source}")]
    File {
        tier: &'static str,
        #[source]
        source: Arc<FileError>,
    },
    /// Reading the first tier's copy of a file to drain it.
    #[error("draining: reading the local copy: {0}")]
    Source(#[source] Arc<FileError>),
    /// A bug in the drain; the message says where.
    #[error("the drain thread panicked: {0}; the versions stay committed locally")]
    Panicked(String),
    /// Collecting the lower tier's superseded chains.
    #[error("collecting old versions on the {tier} tier: {source}")]
    Collect {
        tier: &'static str,
        #[source]
        source: Arc<GcError>,
    },
    #[error("the {tier} tier {dir} holds another store's versions (identity {found}, this store's is {own}); give each store a directory of its own there")]
    Foreign {
        tier: &'static str,
        dir: String,
        found: StoreId,
        own: StoreId,
    },
    /// The engine was closed before the drain got there; it resumes at the next start.
    #[error("the engine closed before every version reached the lower tiers; they are copied at its next start")]
    Stopped,
}

impl DrainError {
    pub(crate) fn file(tier: &'static str, e: FileError) -> DrainError {
        DrainError::File {
            tier,
            source: Arc::new(e),
        }
    }

    pub(crate) fn collect(tier: &'static str, e: GcError) -> DrainError {
        DrainError::Collect {
            tier,
            source: Arc::new(e),
        }
    }
}
