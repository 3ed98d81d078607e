//! Write tracking failed on one protected region: said with the region's id and range, in
//! whichever operation it happened (protect, checkpoint, restore).

use crate::track::TrackError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum RegionError {
    #[error("region {id} ({start:#x}..{end:#x}): its memory was unmapped while protected; unprotect a region before unmapping or freeing its memory (unprotect it now to go on)")]
    Unmapped { id: u64, start: usize, end: usize },
    #[error("region {id}: {source}")]
    Tracking {
        id: u64,
        #[source]
        source: TrackError,
    },
}
