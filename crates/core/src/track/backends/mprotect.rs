//! Write tracking by page protection (AI-Ckpt §3.4): tracked pages are read-only; the first
//! write to one raises SIGSEGV, the handler records the page as dirty and makes it writable.

// Unsafe allowed here (lib.rs fences it): the SIGSEGV handler reads the kernel's siginfo and
// chains to the previous handler.
#![allow(unsafe_code)]

use crate::sys::mem::Protection;
use crate::sys::{page_size, signal, thread};
use crate::track::protocol::first_write::{self, Outcome};
use crate::track::region::TrackedRegion;
use crate::track::registry;
use crate::track::{Backend, Guard, TrackError, Tracker};
use std::sync::Arc;

/// The SIGSEGV handler. Async-signal-safe: a lock-free registry lookup, atomics, futexes,
/// memcpy and mprotect(2). Faults outside tracked memory go to the previous handler or the
/// default action. errno is preserved: the interrupted code may be about to read it.
/// Install ickpt's SIGSEGV handler again if the application replaced it, the application's
/// then receiving the faults that are not ickpt's (`sys::signal::take_back`).
pub(crate) fn take_back_fault_handler() -> std::io::Result<bool> {
    signal::take_back(on_segv)
}

extern "C" fn on_segv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let errno = crate::sys::io::errno();
    let restore_errno = || crate::sys::io::set_errno(errno);
    // SAFETY: `info` is the kernel's siginfo for this signal.
    if unsafe { signal::is_access_error(info) } {
        // SAFETY: as above.
        let addr = unsafe { signal::fault_address(info) };
        // SAFETY: `ctx` is the kernel's context for this signal.
        let ip = unsafe { signal::fault_ip(ctx) };
        match first_write::first_write(addr, thread::tid(), &mut Segv { ip }) {
            Outcome::Done | Outcome::Retry => return restore_errno(),
            Outcome::Failed => signal::signal_safe_message(
                b"ickpt: cannot unprotect a tracked page; see docs/design.md\n",
            ),
            Outcome::NotOurs | Outcome::Gate | Outcome::Wait => {}
        }
    }
    restore_errno();
    // SAFETY: called from the SIGSEGV handler with the kernel's arguments.
    unsafe { signal::chain(sig, info, ctx) };
}

/// A write caught by SIGSEGV, handled on the faulting thread, which may block; `ip` is the
/// instruction that wrote.
pub(crate) struct Segv {
    pub ip: usize,
}

impl first_write::Catch for Segv {
    fn blocking(&self) -> bool {
        true
    }

    fn writer(&self) -> usize {
        self.ip
    }

    fn wait(&mut self, r: &TrackedRegion, page: usize, brief: bool) -> bool {
        r.protocol.wait_for(r, page, brief);
        true
    }

    fn open(&mut self, r: &TrackedRegion, lo: usize, hi: usize) -> bool {
        r.mem.protect_pages(lo, hi - lo, Protection::Open).is_ok()
    }

    /// Splitting the mapping page by page can exhaust vm.max_map_count (ENOMEM). Give up
    /// page granularity for this region until the next checkpoint rather than crash: open it
    /// whole, which also merges its mappings back into one. Not while a commit still needs
    /// its scheduled pages read-only.
    fn open_whole(&mut self, r: &TrackedRegion) -> bool {
        r.protocol.wait_until_committed();
        r.mem.protect(Protection::Open).is_ok()
    }
}

/// `Tracker::collect_pages` where page protection tracks `r`: take the bits, then protect.
pub(crate) fn collect_pages_by_protection(
    r: &TrackedRegion,
    pages: std::ops::Range<usize>,
    out: &mut Vec<u64>,
) -> Result<(), TrackError> {
    r.dirty.take_range(pages.start, pages.end, out);
    r.mem
        .protect_pages(pages.start, pages.len(), Protection::Tracked)
        .map_err(TrackError::Protect)
}

/// The mprotect + SIGSEGV backend.
pub struct MprotectTracker;

impl MprotectTracker {
    pub fn new() -> Result<Self, TrackError> {
        signal::install_segv_handler(on_segv).map_err(TrackError::Signal)?;
        Ok(MprotectTracker)
    }

    /// Write-protect a region already in the registry; on failure it leaves the registry.
    pub(crate) fn arm(r: &Arc<TrackedRegion>) -> Result<(), TrackError> {
        if let Err(e) = r.mem.protect(Protection::Tracked) {
            let _ = r.mem.protect(Protection::Open);
            registry::remove(r);
            return Err(TrackError::Protect(e));
        }
        Ok(())
    }

    /// Mark pages neighbours share with `r` as dirty in them before `r`'s pages are opened,
    /// since their writes to those shared pages will no longer trap. `protection_only`: only
    /// neighbours that page protection tracks (opening with mprotect leaves the others'
    /// tracking alone).
    pub(crate) fn mark_shared_pages_dirty(r: &TrackedRegion) {
        let ps = page_size();
        for o in registry::neighbours_sharing_pages(r) {
            // Only pages both spans cover: at most the first and last of `o`.
            let first = (r.base().max(o.base()) - o.base()) / ps;
            let end = (r.span_end().min(o.span_end()) - o.base()) / ps;
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
        r.set_mechanism(Backend::Mprotect);
        registry::insert(r.clone(), &[])?;
        if armed {
            Self::arm(r)?;
        }
        Ok(())
    }

    fn detach(&self, r: &Arc<TrackedRegion>) -> Result<(), TrackError> {
        Self::mark_shared_pages_dirty(r);
        let opened = r.mem.protect(Protection::Open);
        registry::remove(r);
        opened.map_err(TrackError::Protect)
    }

    fn collect(
        &self,
        r: &TrackedRegion,
        _guard: Guard,
        out: &mut Vec<u64>,
        before_rearm: &mut dyn FnMut(&[u64]),
    ) -> Result<(), TrackError> {
        // Take the bits first, then protect: a write between the two lands in a page that is
        // still open and is saved by the copy that follows; a write after faults into the
        // new epoch. Nothing is lost either way.
        r.dirty.take_into(out);
        before_rearm(out);
        r.mem
            .protect(Protection::Tracked)
            .map_err(TrackError::Protect)
    }

    fn disarm(&self, r: &TrackedRegion) -> Result<(), TrackError> {
        Self::mark_shared_pages_dirty(r);
        r.mem.protect(Protection::Open).map_err(TrackError::Protect)
    }

    fn handler_intact(&self) -> Result<bool, TrackError> {
        signal::segv_handler_is(on_segv).map_err(TrackError::Signal)
    }
}
