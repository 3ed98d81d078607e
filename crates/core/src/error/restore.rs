//! `restore` and `restore_latest`: the version's files, or the regions they go into.

use super::{ForkedChild, ReadError, RegionError};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum RestoreError {
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The protected regions are not the version's (checked before any byte is written).
    #[error("region {id}: {what}")]
    RegionMismatch { id: u64, what: String },
    #[error(transparent)]
    Region(#[from] RegionError),
    /// A program section is open: a restore would replace what it compares against.
    #[error("section {0} is open: call ickpt_section_stop before restoring")]
    SectionOpen(u64),
    #[error(transparent)]
    Forked(#[from] ForkedChild),
}

impl RestoreError {
    /// Whether an older version may still restore (see [`ReadError::is_damage`]).
    pub fn is_damage(&self) -> bool {
        matches!(self, RestoreError::Read(e) if e.is_damage())
    }

    /// The file found damaged, if that is what failed ([`ReadError::damaged_file`]).
    pub fn damaged_file(&self) -> Option<&str> {
        match self {
            RestoreError::Read(e) => e.damaged_file(),
            _ => None,
        }
    }
}
