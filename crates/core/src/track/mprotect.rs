//! Write tracking by page protection (AI-Ckpt §3.4): tracked pages are read-only; the first
//! write to one raises SIGSEGV, the handler records the page as dirty and makes it writable.

use super::epoch::Epoch;
use super::region::TrackedRegion;
use super::{registry, Backend, TrackError, Tracker};
use crate::sys::{mem, page_size, signal};
use std::sync::Arc;

/// The SIGSEGV handler. Async-signal-safe: a lock-free registry lookup, atomics, futexes,
/// memcpy and mprotect(2). Faults outside tracked memory go to the previous handler or the
/// default action. errno is preserved: the interrupted code may be about to read it.
extern "C" fn on_segv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    let errno = unsafe { *libc::__errno_location() };
    let restore_errno = || {
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = errno };
    };
    // SAFETY: `info` is the kernel's siginfo for this signal.
    if unsafe { signal::is_access_error(info) } {
        // SAFETY: as above.
        let addr = unsafe { signal::fault_address(info) };
        match handle_write(addr) {
            registry::Lookup::Retry => return restore_errno(),
            registry::Lookup::Tracked => return restore_errno(),
            registry::Lookup::NotOurs => {}
        }
    }
    restore_errno();
    // SAFETY: called from the SIGSEGV handler with the kernel's arguments.
    unsafe { signal::chain(sig, info, ctx) };
}

/// Epochs a fault has entered (a page shared by regions of several engines enters each).
struct Entered {
    epochs: [*const Epoch; 8],
    n: usize,
}

impl Entered {
    fn enter(&mut self, e: &Epoch) -> bool {
        if self.epochs[..self.n].iter().any(|&p| std::ptr::eq(p, e)) {
            return true;
        }
        if self.n == self.epochs.len() {
            return false;
        }
        e.enter();
        self.epochs[self.n] = e;
        self.n += 1;
        true
    }

    fn leave_all(&self) {
        for &e in &self.epochs[..self.n] {
            // SAFETY: each epoch is owned by its engine, which outlives its regions' faults.
            unsafe { (*e).leave() };
        }
    }
}

/// Record a first write at `addr` in every region whose pages contain it, and make its page
/// writable. Signal-safe.
///
/// Every region decides first (copy aside or wait for its commit, `Epoch::before_write`),
/// and only then is the page opened: a page shared by two regions must not become writable
/// while the second still needs its bytes. The epochs are entered once for the whole fault,
/// so no checkpoint can schedule between the decisions and the opening.
///
/// Open first, mark second: if a checkpoint's `collect` (take bits, then re-protect) runs in
/// between, either it re-protects the page after we opened it and our bit lands in the new
/// epoch (the retried write faults again), or it took the bits before we set ours. Marking
/// first would let `collect` take the bit and re-protect before we open the page, leaving it
/// writable with no bit: every later write to it in the epoch would be lost.
fn handle_write(addr: usize) -> registry::Lookup {
    let ps = page_size();
    let mut entered = Entered {
        epochs: [std::ptr::null(); 8],
        n: 0,
    };
    let mut regions = 0usize;
    let mut ok = true;
    let found = registry::with_regions_containing(addr, |r| {
        regions += 1;
        if entered.enter(&r.epoch) {
            r.epoch.before_write(r, (addr - r.base) / ps);
        } else {
            ok = false;
        }
    });
    if !matches!(found, registry::Lookup::Tracked) {
        entered.leave_all();
        return found;
    }
    let shared = regions > 1;
    registry::with_regions_containing(addr, |r| ok &= open(r, (addr - r.base) / ps, shared));
    entered.leave_all();
    if ok {
        registry::Lookup::Tracked
    } else {
        signal::signal_safe_message(
            b"ickpt: cannot unprotect a tracked page; see docs/design.md\n",
        );
        registry::Lookup::NotOurs
    }
}

/// Open `page` of `r` (with its fault-around run unless the page is shared) and mark it.
fn open(r: &TrackedRegion, page: usize, shared: bool) -> bool {
    let ps = page_size();
    let epoch = &*r.epoch;
    let (lo, hi) = if shared {
        (page, page + 1)
    } else {
        epoch.open_run(r, page)
    };
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
    }
    opened
}

/// The mprotect + SIGSEGV backend.
pub struct MprotectTracker;

impl MprotectTracker {
    pub fn new() -> Result<Self, TrackError> {
        signal::install_segv_handler(on_segv).map_err(TrackError::Signal)?;
        // Whatever the store, a child forked mid-commit must not wait for pages.
        crate::sys::fs::ensure_fork_handler();
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

    fn collect(
        &self,
        r: &TrackedRegion,
        out: &mut Vec<u64>,
        before_rearm: &mut dyn FnMut(&[u64]),
    ) -> Result<(), TrackError> {
        // Take the bits first, then protect: a write between the two lands in a page that is
        // still open and is saved by the copy that follows; a write after faults into the
        // new epoch. Nothing is lost either way.
        r.dirty.take_into(out);
        before_rearm(out);
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
