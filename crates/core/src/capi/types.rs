//! Types and constants of the C ABI, laid out as `include/ickpt.h` declares them.

use crate::engine::{CheckpointInfo, Stats};
use crate::error::Error;
use crate::store::dir::OpenError;
use ickpt_format::Kind;
use std::ffi::{c_char, CStr};

/// Result of every ickpt call. 0 is success; `ickpt_last_error()` explains a failure.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ickpt_result {
    ICKPT_OK = 0,
    /// A NULL pointer, zero length, bad configuration or unknown pointer.
    ICKPT_ERR_INVALID_ARGUMENT = 1,
    ICKPT_ERR_NOT_INITIALIZED = 2,
    ICKPT_ERR_ALREADY_INITIALIZED = 3,
    /// No protected region has that id.
    ICKPT_ERR_UNKNOWN_REGION = 4,
    /// A region with that id is already protected, or the memory overlaps one.
    ICKPT_ERR_REGION_EXISTS = 5,
    /// Protected regions and the version's regions differ (missing id or size mismatch).
    ICKPT_ERR_REGION_MISMATCH = 6,
    /// No such version, or no version at all.
    ICKPT_ERR_NOT_FOUND = 7,
    /// A checkpoint file failed its checks, or a chain is broken.
    ICKPT_ERR_CORRUPT = 8,
    ICKPT_ERR_IO = 9,
    /// The store's device is full. Earlier versions are intact.
    ICKPT_ERR_NO_SPACE = 10,
    /// The directory holds something other than an ickpt store.
    ICKPT_ERR_NOT_A_STORE = 11,
    /// Another process holds the store.
    ICKPT_ERR_STORE_LOCKED = 12,
    /// Write tracking failed (protection change, signal handler replaced).
    ICKPT_ERR_TRACKING = 13,
    /// A bug in ickpt; the message says where.
    ICKPT_ERR_INTERNAL = 14,
}

pub const ICKPT_BACKEND_AUTO: u32 = 0;
pub const ICKPT_BACKEND_MPROTECT: u32 = 1;

pub const ICKPT_KIND_FULL: u32 = 0;
pub const ICKPT_KIND_INCREMENTAL: u32 = 1;

/// Configuration for `ickpt_init`. Initialise with `ickpt_config_init`, then change fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ickpt_config {
    /// sizeof(ickpt_config); set by ickpt_config_init.
    pub struct_size: u32,
    /// ICKPT_BACKEND_*; the environment variable ICKPT_BACKEND overrides it.
    pub backend: u32,
    /// Every full_every-th checkpoint is full (default 10: 1 full, 9 incremental).
    pub full_every: u32,
    /// Full chains kept on disk (default 2).
    pub keep_chains: u32,
    /// Store directory; NULL means the environment variable ICKPT_DIR.
    pub dir: *const c_char,
    /// Emulated storage bandwidth in bytes per second for experiments; 0 means unlimited
    /// (the environment variable ICKPT_BANDWIDTH, e.g. "200M", sets it too).
    pub bandwidth: u64,
}

/// What `ickpt_checkpoint` committed.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ickpt_checkpoint_info {
    pub version: u64,
    /// The version this one increments; 0 for a full version.
    pub parent: u64,
    /// ICKPT_KIND_FULL or ICKPT_KIND_INCREMENTAL.
    pub kind: u32,
    pub reserved: u32,
    /// Pages stored in this version.
    pub pages: u64,
    /// Size of the version file in bytes.
    pub bytes: u64,
    pub duration_ns: u64,
}

/// Totals since `ickpt_init`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ickpt_stats {
    /// ICKPT_BACKEND_* in use.
    pub backend: u32,
    pub regions: u32,
    pub protected_bytes: u64,
    pub checkpoints: u64,
    pub full_checkpoints: u64,
    pub incremental_checkpoints: u64,
    pub failed_checkpoints: u64,
    pub pages_written: u64,
    pub bytes_written: u64,
    pub checkpoint_ns: u64,
    /// First writes trapped.
    pub faults: u64,
    pub restores: u64,
    pub pages_restored: u64,
    pub restore_ns: u64,
}

impl From<&CheckpointInfo> for ickpt_checkpoint_info {
    fn from(i: &CheckpointInfo) -> Self {
        ickpt_checkpoint_info {
            version: i.version,
            parent: i.parent,
            kind: kind_code(i.kind),
            reserved: 0,
            pages: i.pages,
            bytes: i.bytes,
            duration_ns: i.duration.as_nanos() as u64,
        }
    }
}

impl From<&Stats> for ickpt_stats {
    fn from(s: &Stats) -> Self {
        ickpt_stats {
            backend: match s.backend {
                "mprotect" => ICKPT_BACKEND_MPROTECT,
                _ => ICKPT_BACKEND_AUTO,
            },
            regions: s.regions as u32,
            protected_bytes: s.protected_bytes,
            checkpoints: s.checkpoints,
            full_checkpoints: s.full_checkpoints,
            incremental_checkpoints: s.incremental_checkpoints,
            failed_checkpoints: s.failed_checkpoints,
            pages_written: s.pages_written,
            bytes_written: s.bytes_written,
            checkpoint_ns: s.checkpoint_time.as_nanos() as u64,
            faults: s.faults,
            restores: s.restores,
            pages_restored: s.pages_restored,
            restore_ns: s.restore_time.as_nanos() as u64,
        }
    }
}

fn kind_code(k: Kind) -> u32 {
    match k {
        Kind::Full => ICKPT_KIND_FULL,
        Kind::Incremental => ICKPT_KIND_INCREMENTAL,
    }
}

/// The result code for an error.
pub fn code_of(e: &Error) -> ickpt_result {
    use ickpt_result::*;
    match e {
        Error::InvalidArgument(_) => ICKPT_ERR_INVALID_ARGUMENT,
        Error::NotInitialized | Error::ForkedChild => ICKPT_ERR_NOT_INITIALIZED,
        Error::AlreadyInitialized => ICKPT_ERR_ALREADY_INITIALIZED,
        Error::UnknownRegion(_) => ICKPT_ERR_UNKNOWN_REGION,
        Error::RegionExists(_) => ICKPT_ERR_REGION_EXISTS,
        Error::Track(crate::track::TrackError::Overlap(_)) => ICKPT_ERR_REGION_EXISTS,
        Error::RegionMismatch { .. } => ICKPT_ERR_REGION_MISMATCH,
        Error::NotFound { .. } | Error::NoCheckpoint { .. } => ICKPT_ERR_NOT_FOUND,
        Error::Corrupt { .. } | Error::ChainBroken { .. } => ICKPT_ERR_CORRUPT,
        Error::Io { .. } => ICKPT_ERR_IO,
        Error::NoSpace { .. } => ICKPT_ERR_NO_SPACE,
        Error::Store(OpenError::NotAStore { .. } | OpenError::Missing { .. }) => {
            ICKPT_ERR_NOT_A_STORE
        }
        Error::Store(OpenError::Locked { .. }) => ICKPT_ERR_STORE_LOCKED,
        Error::Store(OpenError::Io { .. }) => ICKPT_ERR_IO,
        Error::Track(_) | Error::HandlerReplaced => ICKPT_ERR_TRACKING,
    }
}

pub fn result_name(code: i32) -> &'static CStr {
    use ickpt_result::*;
    const NAMES: [(ickpt_result, &CStr); 15] = [
        (ICKPT_OK, c"ICKPT_OK"),
        (ICKPT_ERR_INVALID_ARGUMENT, c"ICKPT_ERR_INVALID_ARGUMENT"),
        (ICKPT_ERR_NOT_INITIALIZED, c"ICKPT_ERR_NOT_INITIALIZED"),
        (
            ICKPT_ERR_ALREADY_INITIALIZED,
            c"ICKPT_ERR_ALREADY_INITIALIZED",
        ),
        (ICKPT_ERR_UNKNOWN_REGION, c"ICKPT_ERR_UNKNOWN_REGION"),
        (ICKPT_ERR_REGION_EXISTS, c"ICKPT_ERR_REGION_EXISTS"),
        (ICKPT_ERR_REGION_MISMATCH, c"ICKPT_ERR_REGION_MISMATCH"),
        (ICKPT_ERR_NOT_FOUND, c"ICKPT_ERR_NOT_FOUND"),
        (ICKPT_ERR_CORRUPT, c"ICKPT_ERR_CORRUPT"),
        (ICKPT_ERR_IO, c"ICKPT_ERR_IO"),
        (ICKPT_ERR_NO_SPACE, c"ICKPT_ERR_NO_SPACE"),
        (ICKPT_ERR_NOT_A_STORE, c"ICKPT_ERR_NOT_A_STORE"),
        (ICKPT_ERR_STORE_LOCKED, c"ICKPT_ERR_STORE_LOCKED"),
        (ICKPT_ERR_TRACKING, c"ICKPT_ERR_TRACKING"),
        (ICKPT_ERR_INTERNAL, c"ICKPT_ERR_INTERNAL"),
    ];
    NAMES
        .iter()
        .find(|(r, _)| *r as i32 == code)
        .map_or(c"unknown", |(_, name)| name)
}
