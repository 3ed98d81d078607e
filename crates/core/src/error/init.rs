//! Opening an engine (`ickpt_init`): the settings, the store directory, its versions and
//! the write tracker.

use super::{DrainError, FileError, ReadError};
use crate::config::SettingError;
use crate::store::dir::OpenError;
use crate::track::TrackError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum InitError {
    #[error(transparent)]
    Setting(#[from] SettingError),
    #[error(transparent)]
    Store(#[from] OpenError),
    /// Reading or recording the store's identity.
    #[error(transparent)]
    File(#[from] FileError),
    /// Reading the versions already in the store.
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("starting write tracking: {0}")]
    Tracking(#[from] TrackError),
    /// A lower tier that belongs to another store, or the drain thread not starting.
    #[error(transparent)]
    Tier(#[from] DrainError),
}
