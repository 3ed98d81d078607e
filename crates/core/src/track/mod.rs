//! Write tracking: which pages of the protected regions were written since the last
//! checkpoint. One trait; each kernel mechanism is a backend behind it.

pub mod bitmap;
mod cow;
pub mod epoch;
mod mprotect;
mod own_mem;
pub mod pages;
pub mod region;
mod registry;

pub use epoch::{AccessCounts, Epoch};
pub use mprotect::MprotectTracker;
pub use pages::Access;
pub use region::TrackedRegion;
pub(crate) use registry::reset_after_fork;
use std::sync::Arc;
use thiserror::Error;

/// How writes are tracked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Probe the kernel and choose the best available backend.
    Auto,
    /// mprotect + SIGSEGV (paper 000 §3.4); works everywhere.
    Mprotect,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Mprotect => "mprotect",
        }
    }

    pub fn parse(s: &str) -> Option<Backend> {
        match s {
            "auto" => Some(Backend::Auto),
            "mprotect" => Some(Backend::Mprotect),
            _ => None,
        }
    }
}

#[derive(Debug, Error)]
pub enum TrackError {
    #[error("memory overlaps protected region {0}")]
    Overlap(u64),
    #[error("the range is not entirely mapped memory: {0}")]
    NotMapped(#[source] std::io::Error),
    #[error("the range covers ickpt's own tracking memory; protect a smaller range")]
    OwnMemory,
    #[error("allocating tracking memory failed: {0}")]
    OwnAlloc(#[source] std::io::Error),
    #[error("changing page protection failed: {0}")]
    Protect(#[source] std::io::Error),
    #[error("installing the SIGSEGV handler failed: {0}")]
    Signal(#[source] std::io::Error),
}

/// A write-tracking mechanism. Every backend passes the same conformance tests.
pub trait Tracker: Send + Sync {
    fn backend(&self) -> Backend;
    /// Start tracking `r`. Armed: from now on writes to it are recorded. Not armed: writes
    /// are recorded from the first `collect` on (for a region whose next version stores
    /// it whole anyway, so its writes before then need no trap).
    fn attach(&self, r: &Arc<TrackedRegion>, armed: bool) -> Result<(), TrackError>;
    /// Stop tracking `r` and leave its memory writable.
    fn detach(&self, r: &Arc<TrackedRegion>) -> Result<(), TrackError>;
    /// Move the set of pages written since the last call into `out` (one bit per page) and
    /// re-arm tracking so the next epoch starts clean. `before_rearm` runs between the two
    /// with the collected bits (the engine sets page states there, so that no write can
    /// reach a re-armed page before its state says whether a commit needs it).
    fn collect(
        &self,
        r: &TrackedRegion,
        out: &mut Vec<u64>,
        before_rearm: &mut dyn FnMut(&[u64]),
    ) -> Result<(), TrackError>;
    /// Make `r` writable by ickpt itself (restore) without a fault per page. Tracking
    /// resumes at the next `collect`.
    fn open_for_restore(&self, r: &TrackedRegion) -> Result<(), TrackError>;
    /// False when something replaced the mechanism behind ickpt's back (for mprotect: the
    /// application installed its own SIGSEGV handler after ickpt started).
    fn handler_intact(&self) -> Result<bool, TrackError>;
}

/// The backend `requested` resolves to on this kernel. `ICKPT_BACKEND` overrides, so tests
/// can force every fallback.
pub fn select(requested: Backend) -> Result<Arc<dyn Tracker>, TrackError> {
    let forced = std::env::var("ICKPT_BACKEND")
        .ok()
        .and_then(|s| Backend::parse(&s));
    match forced.unwrap_or(requested) {
        Backend::Auto | Backend::Mprotect => Ok(Arc::new(MprotectTracker::new()?)),
    }
}
