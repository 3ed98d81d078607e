//! Every error ickpt reports. Each names the file, region or version involved and, where
//! there is one, what to do about it. `docs/abi.md` maps them to C result codes.

use crate::store::dir::OpenError;
use crate::track::TrackError;
use ickpt_format::FormatError;
use std::io;
use thiserror::Error;

/// What a corruption message ends with, outside `ickpt verify` (which leaves it off).
pub const VERIFY_HINT: &str = "; run 'ickpt verify' to check the whole store";

#[derive(Debug, Error)]
pub enum Error {
    #[error(transparent)]
    Setting(#[from] crate::config::SettingError),
    /// A pointer argument the C API needs was NULL.
    #[error("{what} is NULL")]
    Null { what: &'static str },
    /// `protect` or `alloc` refused the memory asked for.
    #[error("region {id}: memory at {start:#x}+{len} {problem}")]
    BadRange {
        id: u64,
        start: usize,
        len: usize,
        problem: RangeProblem,
    },
    #[error("allocation of {size} bytes for region {id}: {why}")]
    AllocSize {
        id: u64,
        size: usize,
        why: &'static str,
    },
    #[error("{ptr:#x} was not returned by ickpt_malloc (or was freed already)")]
    NotAllocated { ptr: usize },
    #[error("version {version} is past the last number the format allows ({max}): {dir} holds {last}, which is not a version this process wrote; move it out of the store")]
    VersionsExhausted {
        version: u64,
        max: u64,
        dir: String,
        last: String,
    },
    #[error("region {0} is not protected")]
    UnknownRegion(u64),
    #[error("region {0} is already protected; unprotect it first")]
    RegionExists(u64),
    #[error("region {id}: {what}")]
    RegionMismatch { id: u64, what: String },
    #[error("{file}: corrupt checkpoint: {source}{VERIFY_HINT}")]
    Corrupt {
        file: String,
        #[source]
        source: FormatError,
    },
    #[error("{file}: {op} failed: {source}")]
    Io {
        file: String,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("{file}: no space left on the device; free space or choose another directory (earlier checkpoints are intact)")]
    NoSpace { file: String },
    #[error("version {version} not found in {dir} (it holds: {available}); 'ickpt ls' lists them")]
    NotFound {
        version: u64,
        dir: String,
        available: String,
    },
    #[error("{file} belongs to another store (identity {found}, this store's is {own}): it was copied in from elsewhere and is never restored here; move it out")]
    Foreign {
        file: String,
        found: crate::store::StoreId,
        own: crate::store::StoreId,
    },
    #[error("restoring version {version}: the process is out of file descriptors (after checking {open} file(s) of its chain, one open at a time): raise the limit ('ulimit -n') or close files the application keeps open")]
    OutOfFiles { version: u64, open: usize },
    #[error("no version in {dir} can be restored ({tried} tried; the newest failed with: {newest}); 'ickpt verify' names every problem")]
    NoRestorable {
        dir: String,
        tried: usize,
        newest: String,
    },
    #[error("no committed checkpoint in {dir}")]
    NoCheckpoint { dir: String },
    #[error("version {version} needs version {missing}, which is missing from {dir}: the chain is broken; restore an older full chain ('ickpt ls')")]
    ChainBroken {
        version: u64,
        missing: u64,
        dir: String,
    },
    #[error(transparent)]
    Store(#[from] OpenError),
    #[error(transparent)]
    Track(#[from] TrackError),
    #[error("region {id} ({start:#x}..{end:#x}): its memory was unmapped while protected; unprotect a region before unmapping or freeing its memory (unprotect it now to go on)")]
    RegionUnmapped { id: u64, start: usize, end: usize },
    #[error("the SIGSEGV handler was replaced after ickpt started, so writes are no longer tracked; install your handler before ickpt_init")]
    HandlerReplaced,
    #[error("version {version} was abandoned: a thread ickpt needed to commit it wrote to a protected page it could not copy (protected memory shares a page with ickpt's own heap; protect page-aligned memory, e.g. from ickpt_malloc, or give cow_bytes room); the pages stay dirty for the next checkpoint")]
    CommitAborted { version: u64 },
    #[error("version {version} was abandoned: its commit panicked ({message}); this is a bug in ickpt or in the store, please report it; the pages stay dirty for the next checkpoint")]
    CommitPanicked { version: u64, message: String },
    #[error("ickpt is not initialised; call ickpt_init first")]
    NotInitialized,
    #[error("this process is a fork of the one that called ickpt_init, whose store it must not write; call ickpt_init here with a directory of its own")]
    ForkedChild,
    #[error("ickpt is already initialised; call ickpt_finalize first")]
    AlreadyInitialized,
}

impl Error {
    /// Whether the error is about what a version's files hold (damaged, missing, foreign,
    /// unreadable), so that an older version may still restore.
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            Error::Corrupt { .. }
                | Error::ChainBroken { .. }
                | Error::Foreign { .. }
                | Error::NotFound { .. }
                | Error::Io { .. }
        )
    }

    /// Wrap an I/O error on `file`, recognising a full disk.
    pub fn io(file: impl Into<String>, op: &'static str, source: io::Error) -> Error {
        let file = file.into();
        if source.raw_os_error() == Some(libc::ENOSPC)
            || source.kind() == io::ErrorKind::StorageFull
        {
            return Error::NoSpace { file };
        }
        Error::Io { file, op, source }
    }

    /// The commit of `version` panicked with `payload`.
    pub fn commit_panicked(version: u64, payload: &(dyn std::any::Any + Send)) -> Error {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        Error::CommitPanicked { version, message }
    }

    pub fn format(file: impl Into<String>, e: FormatError) -> Error {
        let file = file.into();
        match e {
            FormatError::Io { source, .. } => Error::Io {
                file,
                op: "read",
                source: io::Error::new(source.kind(), source.to_string()),
            },
            other => Error::Corrupt {
                file,
                source: other,
            },
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why `protect` or `alloc` refused a range.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RangeProblem {
    #[error("is empty or at address 0: protect needs a non-NULL pointer and a non-zero length")]
    Empty,
    #[error("is not entirely mapped")]
    NotMapped,
    #[error("covers ickpt's own tracking memory; protect a smaller range")]
    OwnMemory,
    #[error("covers this thread's alternate signal stack, where ickpt's fault handler runs")]
    SignalStack,
    #[error(
        "cannot be protected: {max} regions are protected already, the most one version can hold"
    )]
    TooManyRegions { max: u64 },
    #[error("cannot be protected: protected memory would span {pages} pages, more than the {max} one version can hold ({gib} GiB of {page_size}-byte pages)")]
    TooManyPages {
        pages: u64,
        max: u64,
        gib: u64,
        page_size: usize,
    },
}
