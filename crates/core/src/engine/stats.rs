use ickpt_format::Kind;
use std::time::Duration;

/// What one committed checkpoint wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointInfo {
    pub version: u64,
    pub kind: Kind,
    pub parent: u64,
    /// Pages stored in this version.
    pub pages: u64,
    /// Size of the version file.
    pub bytes: u64,
    pub duration: Duration,
}

/// What one restore read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreInfo {
    pub version: u64,
    /// Versions in the chain, newest to full.
    pub chain_len: u32,
    /// Pages read (each page once, however many versions stored it).
    pub pages: u64,
    pub duration: Duration,
}

/// Running totals since the engine started.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub backend: &'static str,
    pub regions: u64,
    pub protected_bytes: u64,
    pub checkpoints: u64,
    pub full_checkpoints: u64,
    pub incremental_checkpoints: u64,
    pub failed_checkpoints: u64,
    pub pages_written: u64,
    pub bytes_written: u64,
    pub checkpoint_time: Duration,
    /// First writes trapped since start.
    pub faults: u64,
    pub(crate) faults_of_removed: u64,
    pub restores: u64,
    pub pages_restored: u64,
    pub restore_time: Duration,
    pub last_checkpoint: Option<CheckpointInfo>,
}
