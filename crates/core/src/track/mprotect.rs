//! Write tracking by page protection (AI-Ckpt §3.4): tracked pages are read-only; the first
//! write to one raises SIGSEGV, the handler records the page as dirty and makes it writable.

use super::region::TrackedRegion;
use super::{registry, Backend, TrackError, Tracker};
use crate::sys::{mem, page_size, signal};
use std::sync::Arc;

/// The SIGSEGV handler. Async-signal-safe: a lock-free registry lookup, atomic bit sets and
/// mprotect(2). Faults outside tracked memory go to the previous handler or default action.
extern "C" fn on_segv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: `info` is the kernel's siginfo for this signal.
    if unsafe { signal::is_access_error(info) } {
        // SAFETY: as above.
        let addr = unsafe { signal::fault_address(info) };
        let mut all_ok = true;
        match registry::with_regions_containing(addr, |r| all_ok &= open_page(r, addr)) {
            registry::Lookup::Tracked if all_ok => return,
            registry::Lookup::Retry => return,
            _ => {}
        }
    }
    // SAFETY: called from the SIGSEGV handler with the kernel's arguments.
    unsafe { signal::chain(sig, info, ctx) };
}

/// Make the page at `addr` writable and record it as written. Signal-safe.
///
/// If a commit still needs the page's bytes, they are first copied aside or the writer waits
/// for the committer (`Epoch::before_write`). Open first, mark second: if a checkpoint's `collect` (take bits, then re-protect) runs in
/// between, either it re-protects the page after we opened it and our bit lands in the new
/// epoch (the retried write faults again), or it took the bits before we set ours. Marking
/// first would let `collect` take the bit and re-protect before we open the page, leaving it
/// writable with no bit: every later write to it in the epoch would be lost.
fn open_page(r: &TrackedRegion, addr: usize) -> bool {
    let ps = page_size();
    let page = (addr - r.base) / ps;
    let epoch = &*r.epoch;
    epoch.enter();
    epoch.before_write(r, page);
    let (lo, hi) = epoch.open_run(r, page);
    let opened = if mem::protect(r.page_addr(lo), (hi - lo) * ps, mem::PROT_OPEN).is_ok() {
        for p in lo..hi {
            r.dirty.set(p);
        }
        true
    } else {
        // Splitting the mapping page by page can exhaust vm.max_map_count (ENOMEM). Give up
        // page granularity for this region until the next checkpoint rather than crash:
        // open it whole, which also merges its mappings back into one, and mark it all
        // dirty. Not while a commit still needs its scheduled pages read-only.
        epoch.wait_until_committed();
        let whole = mem::protect(r.base, r.span_len(), mem::PROT_OPEN).is_ok();
        if whole {
            r.dirty.set_all();
        }
        whole
    };
    if opened {
        r.dirty.count_fault();
    } else {
        signal::signal_safe_message(
            b"ickpt: cannot unprotect a tracked page; see docs/design.md\n",
        );
    }
    epoch.leave();
    opened
}

/// The mprotect + SIGSEGV backend.
pub struct MprotectTracker;

impl MprotectTracker {
    pub fn new() -> Result<Self, TrackError> {
        signal::install_segv_handler(on_segv).map_err(TrackError::Signal)?;
        Ok(MprotectTracker)
    }

    /// Mark pages `neighbours` share with `r` as dirty in them before `r`'s pages are opened,
    /// since their writes to those shared pages will no longer trap.
    fn mark_shared_pages_dirty(r: &TrackedRegion) {
        let ps = page_size();
        for o in registry::neighbours_sharing_pages(r) {
            // Only pages both spans cover: at most the first and last of `o`.
            let first = (r.base.max(o.base) - o.base) / ps;
            let end = (r.span_end().min(o.span_end()) - o.base) / ps;
            for page in first..end {
                o.dirty.set(page);
            }
        }
    }
}

impl Tracker for MprotectTracker {
    fn backend(&self) -> Backend {
        Backend::Mprotect
    }

    fn attach(&self, r: &Arc<TrackedRegion>, armed: bool) -> Result<(), TrackError> {
        registry::insert(r.clone()).map_err(|e| match e {
            registry::Refused::Overlap { other_id } => TrackError::Overlap(other_id),
            registry::Refused::OwnMemory => TrackError::OwnMemory,
            registry::Refused::OutOfMemory => {
                TrackError::Protect(std::io::Error::from_raw_os_error(libc::ENOMEM))
            }
        })?;
        if !armed {
            return Ok(());
        }
        if let Err(e) = mem::protect(r.base, r.span_len(), mem::PROT_TRACKED) {
            let _ = mem::protect(r.base, r.span_len(), mem::PROT_OPEN);
            registry::remove(r);
            return Err(TrackError::Protect(e));
        }
        Ok(())
    }

    fn detach(&self, r: &Arc<TrackedRegion>) -> Result<(), TrackError> {
        Self::mark_shared_pages_dirty(r);
        let opened = mem::protect(r.base, r.span_len(), mem::PROT_OPEN);
        registry::remove(r);
        opened.map_err(TrackError::Protect)
    }

    fn collect(&self, r: &TrackedRegion, out: &mut Vec<u64>) -> Result<(), TrackError> {
        // Take the bits first, then protect: a write between the two lands in a page that is
        // still open and is saved by the copy that follows; a write after faults into the
        // new epoch. Nothing is lost either way.
        r.dirty.take_into(out);
        mem::protect(r.base, r.span_len(), mem::PROT_TRACKED).map_err(|e| {
            r.dirty.merge(out);
            TrackError::Protect(e)
        })
    }

    fn open_for_restore(&self, r: &TrackedRegion) -> Result<(), TrackError> {
        Self::mark_shared_pages_dirty(r);
        mem::protect(r.base, r.span_len(), mem::PROT_OPEN).map_err(TrackError::Protect)
    }

    fn handler_intact(&self) -> Result<bool, TrackError> {
        signal::segv_handler_is(on_segv).map_err(TrackError::Signal)
    }
}
