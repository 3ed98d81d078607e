//! What pre-copy did for one checkpoint, as `CheckpointInfo` reports it and the version's
//! commit stats record it.

use crate::policy::prwip::Strategy;
use std::time::Duration;

/// What pre-copy did for one checkpoint (`CheckpointInfo::precopy`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrecopyInfo {
    pub strategy: Option<Strategy>,
    /// Pages the version holds from pre-copy (copied before the checkpoint call).
    pub pages: u64,
    /// Pre-copied pages written again before the checkpoint: each was copied again, in a
    /// later pass or by the checkpoint itself.
    pub conflicts: u64,
    /// Bytes written more than once into the version's file (pages copied again).
    pub rewritten_bytes: u64,
    /// Page copies the pre-copier wrote before the checkpoint call, first and again.
    pub copies: u64,
    /// Passes since the checkpoint before, and the time they held the engine.
    pub passes: u64,
    pub pass_time: Duration,
    /// Why pre-copy stopped before this checkpoint, if it did (a store or tracking error);
    /// its pages went into the checkpoint.
    pub error: Option<String>,
}

impl PrecopyInfo {
    /// What the version file records of it (format 7).
    pub(crate) fn stored(&self) -> ickpt_format::StoredPrecopy {
        ickpt_format::StoredPrecopy {
            strategy: self.strategy.map_or(0, |s| s.code() as u8),
            pages: self.pages,
            conflicts: self.conflicts,
            copies: self.copies,
            rewritten_bytes: self.rewritten_bytes,
        }
    }
}
