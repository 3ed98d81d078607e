use super::{FileError, ForkedChild, InjectError, RegionError};
use ickpt_format::FormatError;
use thiserror::Error;

/// Why a section call failed (`Engine::section_start`, `_save`, `_take`, `_stop`,
/// `_reset`). On any of them committed section files are as they were.
#[derive(Debug, Error)]
pub enum SectionError {
    /// A call out of Table I's order (a start inside a section, a save outside one, a save
    /// in a section whose saves were recovered): what happened and what to call instead.
    #[error("{0}")]
    Order(String),
    /// A save name ickpt cannot use as a file name, or one the section may not merge into.
    #[error("section name {name:?}: {why}")]
    Name { name: String, why: String },
    /// The protected regions changed since the section started, or differ from the ones its
    /// recovered saves hold.
    #[error("{0}")]
    Regions(String),
    /// The save's file would exceed what a restart reads back (1 GiB).
    #[error("section save {name:?}: its file would be {bytes} bytes, more than a restart reads back (1 GiB): save more often, under a new name, or protect less")]
    TooLarge { name: String, bytes: u64 },
    /// Reading or writing a section file.
    #[error(transparent)]
    File(#[from] FileError),
    /// A saved section file failed its checks.
    #[error("{file}: not a valid section save: {source}; a restart cannot recover past it: call ickpt_section_reset (or use an empty directory) to run every section afresh")]
    Corrupt {
        file: String,
        #[source]
        source: FormatError,
    },
    /// Recovering: a saved section could not be injected.
    #[error(transparent)]
    Inject(#[from] InjectError),
    /// Re-arming write tracking failed.
    #[error(transparent)]
    Region(#[from] RegionError),
    #[error(transparent)]
    Forked(#[from] ForkedChild),
}
