//! Write tracking: which pages of the protected regions were written since the last
//! checkpoint. One trait; each kernel mechanism is a backend behind it.

mod acck;
mod backends;
mod huge;
pub(crate) mod memory;
pub(crate) mod protocol;
mod range_problem;
pub(crate) mod region;
pub(crate) mod registry;
mod reported;
pub(crate) mod stack;

use crate::sys::uffd::{Features, Hidden};
pub(crate) use backends::take_back_fault_handler;
pub use backends::{MprotectTracker, UffdAsyncTracker, UffdSpin, UffdTracker};
pub(crate) use memory::bitmap;
pub(crate) use memory::own_mem::{OwnBytes, ScratchVec};
#[doc(hidden)]
#[cfg(feature = "testing")]
pub use protocol::test_pause;
pub(crate) use protocol::Protocol;
pub use range_problem::RangeProblem;
pub(crate) use region::TrackedRegion;
pub(crate) use reported::WithReported;
pub(crate) use stack::{before_protect, on_this_stack};
use std::sync::{Arc, OnceLock};
use thiserror::Error;

/// How writes are tracked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Backend {
    /// Probe the kernel and choose the best available backend.
    Auto,
    /// mprotect + SIGSEGV (AI-Ckpt §3.4); works everywhere.
    Mprotect,
    /// userfaultfd write-protect, faults handled by a thread of ickpt's.
    Uffd,
    /// userfaultfd async write-protect read back with PAGEMAP_SCAN (Linux 6.7+).
    UffdAsync,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Mprotect => "mprotect",
            Backend::Uffd => "uffd",
            Backend::UffdAsync => "uffd-async",
        }
    }

    pub fn parse(s: &str) -> Option<Backend> {
        match s {
            "auto" => Some(Backend::Auto),
            "mprotect" => Some(Backend::Mprotect),
            "uffd" => Some(Backend::Uffd),
            "uffd-async" => Some(Backend::UffdAsync),
            _ => None,
        }
    }
}

/// How finely writes are monitored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    /// Every page traps on its first write in an epoch (AI-Ckpt).
    Page,
    /// ACCK: stop trapping in pieces of a region whose start is being written.
    Adaptive,
}

impl Granularity {
    pub fn as_str(self) -> &'static str {
        match self {
            Granularity::Page => "page",
            Granularity::Adaptive => "adaptive",
        }
    }

    pub fn parse(s: &str) -> Option<Granularity> {
        match s {
            "page" => Some(Granularity::Page),
            "adaptive" => Some(Granularity::Adaptive),
            _ => None,
        }
    }
}

#[derive(Debug, Error)]
pub enum TrackError {
    /// The range cannot be tracked (overlap, ickpt's own memory, the signal stack): the
    /// engine reports it as the protect call's `BadRange`.
    #[error("the memory {0}")]
    Refused(RangeProblem),
    #[error("allocating tracking memory failed: {0}")]
    OwnAlloc(#[source] std::io::Error),
    #[error("changing page protection failed: {0}")]
    Protect(#[source] std::io::Error),
    #[error("the memory is no longer mapped")]
    Unmapped,
    #[error("installing the SIGSEGV handler failed: {0}")]
    Signal(#[source] std::io::Error),
    #[error("this engine belongs to the parent process; a forked child must start its own")]
    ForkedChild,
    #[error("userfaultfd failed: {0}")]
    Userfault(#[source] std::io::Error),
    #[error("the {0} backend is not available on this kernel ({1}); run `ickpt probe`, or use backend auto")]
    Unavailable(&'static str, String),
}

/// How a commit keeps other threads' writes out of the pages it collected until it has
/// copied them. Backends that decide every first write themselves (mprotect, uffd) always
/// intercept such writes and treat both alike; uffd-async, whose writes never reach ickpt,
/// needs a fence for that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// Intercept them: a write to a page the commit still needs waits or copies the page
    /// aside (AI-Ckpt Algorithm 2). Async commits, where the application runs on.
    Fence,
    /// Let them through and ask afterwards ([`Tracker::unwritten_since_collect`]): a sync
    /// commit whose application threads are still (the usual case) then pays no fence, and
    /// one that met a write is taken again with [`Guard::Fence`]. Pages the region shares
    /// with memory outside it are the exception on uffd-async: they are fenced (the commit's
    /// own allocations may write there) and their writes decided page by page.
    Check,
    /// No commit needs the pages: a restore re-arms tracking after writing them, a program
    /// section when it starts or compares (their writes are no first writes of an epoch, so
    /// no fault is counted).
    Rearm,
    /// As [`Guard::Fence`], where no other thread runs until the collect is over (a
    /// whole-process checkpoint stops every thread of the program first): uffd-async then
    /// scans before it fences, and fences the collected pages alone, so the stop costs the
    /// pages written rather than every page tracked (a whole-region fence rewrites every
    /// page-table entry: about 10 ms per GiB in this project's VM). Where the runs are too
    /// many for that to pay, it fences the whole region after all.
    FenceWritten,
    /// As [`Guard::FenceWritten`], where other threads run on (an async call of the API):
    /// a write of theirs between the scan and the fence would reach the version, so once
    /// every region is collected the checkpoint asks each whether any page was written
    /// since its scan ([`Tracker::unwritten_since_collect`]), and one that met a write is
    /// scheduled again with [`Guard::Fence`]. Pages the region shares with memory outside
    /// it are fenced before the scan, as under [`Guard::Check`].
    FenceWrittenChecked,
}

impl Guard {
    /// Whether writes to the collected pages trap until the commit has them.
    pub fn fences(self) -> bool {
        matches!(
            self,
            Guard::Fence | Guard::FenceWritten | Guard::FenceWrittenChecked
        )
    }

    /// Whether the checkpoint asks, once every region is collected, whether a write came
    /// since the region's collect, and schedules again with fences if one did.
    pub fn checked_after_collect(self) -> bool {
        self == Guard::FenceWrittenChecked
    }
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
    /// re-arm tracking so the next epoch starts clean; `guard` says how writes to the
    /// collected pages are kept out until the commit has them. `before_rearm` runs between the two
    /// with the collected bits (the engine sets page states there, so that no write can
    /// reach a re-armed page before its state says whether a commit needs it). On error,
    /// `out` holds what was taken so far: the caller gives it back
    /// (`protocol::committer::give_back`), trackers never do; and the caller still calls
    /// `release`, which lifts whatever the failed collect left raised.
    fn collect(
        &self,
        r: &TrackedRegion,
        guard: Guard,
        out: &mut Vec<u64>,
        before_rearm: &mut dyn FnMut(&[u64]),
    ) -> Result<(), TrackError>;
    /// After a commit collected `r` with [`Guard::Check`] and copied its pages, or a
    /// checkpoint collected every region under [`Guard::FenceWrittenChecked`]: whether no
    /// page of `r` was written since the collect. Any page, not only those the version
    /// stores: regions are collected one after another (and a scan walks its region in
    /// address order), so a write the version leaves out (a page clean when scanned) may
    /// precede, in the writer's order, a write it holds (a page scanned later); only no write
    /// at all makes the version one instant. Pages the collect fenced before its scan
    /// (shared edge pages) are left out: their writes were decided, not missed. Backends that
    /// intercept every write answer true.
    fn unwritten_since_collect(&self, _r: &TrackedRegion) -> Result<bool, TrackError> {
        Ok(true)
    }
    /// During a [`Guard::FenceWrittenChecked`] collect of `r`, with `bits` collected: the
    /// longest run of them the engine should copy into copy-on-write slots now rather than
    /// have the collect fence (0: none), with `free` slots to copy into. Backends whose
    /// tracking traps every write fence nothing extra: none.
    fn copy_ahead_run(&self, _r: &TrackedRegion, _bits: &[u64], _free: usize) -> usize {
        0
    }
    /// Called once per checkpoint with the gate closed, before its regions are collected:
    /// deal with first writes already caught but not yet handed to ickpt.
    fn before_collect(&self) {}
    /// Whether every first write reaches ickpt (a trap it decides on). When not, pages
    /// found written with no first-write record were written after the last commit.
    fn sees_every_write(&self) -> bool {
        true
    }
    /// The running commit no longer needs writes to `r`'s pages decided one by one (all its
    /// pages are taken, or it failed). Called after every `collect`, with its guard.
    fn release(&self, _r: &TrackedRegion, _guard: Guard) {}
    /// The running commit has taken every page it stores in `pages` of `r`, which it fenced:
    /// writes there need no decision any more. Only called where
    /// [`Tracker::lifts_fence_early`] says so.
    fn lift(&self, _r: &TrackedRegion, _pages: std::ops::Range<usize>) {}
    /// Whether a commit may lift `r`'s fence chunk by chunk behind itself rather than all at
    /// once at its end: where the fence is not the tracking (for mprotect and uffd, and a
    /// region uffd-async tracks by protection, the protection is what records the next
    /// epoch's writes, and must stay).
    fn lifts_fence_early(&self, _r: &TrackedRegion) -> bool {
        false
    }
    /// Stop tracking writes to `r` and make it writable without a fault per page: for ickpt
    /// itself to write (restore), or for the program to write untracked (a program section's
    /// stop). The pair of [`Tracker::rearm`], which tracks again.
    fn disarm(&self, r: &TrackedRegion) -> Result<(), TrackError>;
    /// After `ickpt restart` put this process's memory back: take the process as this
    /// tracker's own (its id changed) and make `r` trackable again. A userfaultfd backend
    /// registers it again (moving a mapping into place dropped its registration; the
    /// userfaultfd itself was made again at its old descriptor number); page protection
    /// needs nothing, the [`Tracker::rearm`] that follows protects it.
    fn after_restart(&self, _r: &TrackedRegion) -> Result<(), TrackError> {
        Ok(())
    }
    /// Track writes to `r` again from here, its memory the new baseline: after a restore
    /// wrote it, or as a program section starts or compares. `out` and `before_rearm` as in
    /// `collect` (the bits: pages written since the last collect, which the caller gives
    /// back or owes to the next checkpoint, or drops when a restore wrote them). No commit
    /// runs, so no fence is raised ([`Guard::Rearm`]): for uffd-async, setting and lifting
    /// one cost 20-28 ms per 256 MiB of restore (traced: docs/benchmarks.md, "The uffd-async
    /// fence").
    fn rearm(
        &self,
        r: &TrackedRegion,
        out: &mut Vec<u64>,
        before_rearm: &mut dyn FnMut(&[u64]),
    ) -> Result<(), TrackError> {
        let collected = self.collect(r, Guard::Rearm, out, before_rearm);
        self.release(r, Guard::Rearm);
        collected
    }
    /// Pre-copy (PRWIP): set in `out` (one bit a page) the pages of `r` written since
    /// they were last armed, leaving tracking as it is: a page reported stays written, and is
    /// reported again until [`collect_pages`](Tracker::collect_pages) or a collect takes it.
    /// No commit runs. By default (page protection) the dirty bits are the record.
    fn peek_written(&self, r: &TrackedRegion, out: &mut Vec<u64>) -> Result<(), TrackError> {
        r.dirty.copy_into(out);
        Ok(())
    }
    /// Pre-copy: take `pages` of `r` as [`collect`](Tracker::collect) takes a whole region,
    /// with no commit running: the bits of those written are set in `out` (its other bits
    /// left as they are), and the pages are armed again, so a later write is recorded. Bits
    /// first, then the arming: a write in between lands in a page still open, which the
    /// caller copies afterwards. By default, page protection.
    fn collect_pages(
        &self,
        r: &TrackedRegion,
        pages: std::ops::Range<usize>,
        out: &mut Vec<u64>,
    ) -> Result<(), TrackError> {
        backends::collect_pages_by_protection(r, pages, out)
    }
    /// False when something replaced the mechanism behind ickpt's back (for mprotect: the
    /// application installed its own SIGSEGV handler after ickpt started).
    fn handler_intact(&self) -> Result<bool, TrackError>;
}

/// What this kernel offers for tracking, probed once per process.
fn kernel_features() -> &'static Features {
    static F: OnceLock<Features> = OnceLock::new();
    F.get_or_init(crate::sys::uffd::probe)
}

/// What this kernel offers for tracking, less what `hide` hides (the `ICKPT_NO_UFFD` and
/// `ICKPT_NO_PAGEMAP_SCAN` switches, which `crate::probe` reads). The kernel is probed once.
pub fn features(hide: Hidden) -> Features {
    kernel_features().hiding(hide)
}

/// The backends `f` offers.
fn offered(f: &Features) -> Vec<Backend> {
    let mut v = vec![Backend::Mprotect];
    if f.uffd_wp() {
        v.push(Backend::Uffd);
    }
    if f.uffd_wp_async() {
        v.push(Backend::UffdAsync);
    }
    v
}

/// The backends this kernel offers, less what `hide` hides.
pub fn available(hide: Hidden) -> Vec<Backend> {
    offered(&features(hide))
}

/// What `auto` takes on this kernel, less what `hide` hides (see [`select`]).
pub fn auto_choice(hide: Hidden) -> Backend {
    auto_of(&features(hide))
}

fn auto_of(f: &Features) -> Backend {
    if f.uffd_wp_async() {
        Backend::UffdAsync
    } else {
        Backend::Mprotect
    }
}

/// The backend `requested` resolves to on this kernel (`ICKPT_BACKEND` has overridden the
/// request in `Config::from_env`, so tests can force every backend; `ICKPT_NO_UFFD` and
/// `ICKPT_NO_PAGEMAP_SCAN` hide kernel features from the probe, so they can force each
/// fallback of `auto` too). `spin`: how the uffd backend's handler thread waits.
///
/// `auto` takes uffd-async where the kernel has it (the cheapest first write, and system
/// calls may write into tracked memory), and mprotect otherwise: the uffd handler thread's
/// round trip costs more than a signal, so it is chosen only on request.
pub(crate) fn select(
    requested: Backend,
    spin: UffdSpin,
    hide: Hidden,
) -> Result<Arc<dyn Tracker>, TrackError> {
    let f = &kernel_features().hiding(hide);
    let missing = |name| TrackError::Unavailable(name, f.notes.join("; "));
    Ok(match requested {
        Backend::Mprotect => Arc::new(MprotectTracker::new()?),
        Backend::UffdAsync if f.uffd_wp_async() => Arc::new(UffdAsyncTracker::new()?),
        Backend::UffdAsync => return Err(missing("uffd-async")),
        Backend::Uffd if f.uffd_wp() => Arc::new(UffdTracker::new(spin, f.pagemap_scan)?),
        Backend::Uffd => return Err(missing("uffd")),
        // A userfaultfd the probe could open but this engine cannot (descriptor limit)
        // falls back too.
        Backend::Auto => match f.uffd_wp_async().then(UffdAsyncTracker::new) {
            Some(Ok(t)) => Arc::new(t),
            _ => Arc::new(MprotectTracker::new()?),
        },
    })
}
