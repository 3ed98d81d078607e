//! The process-wide table of tracked regions, readable from a signal handler without locks.
//!
//! Writers (protect/unprotect, ordinary code) serialise on a spin lock, build a new sorted
//! snapshot and publish it with one atomic swap. The handler counts itself in the in-flight
//! counter before loading the snapshot; a writer frees a replaced snapshot (and the regions
//! that left it) only once no handler is in flight, so the handler never reads freed memory.
//!
//! Everything the handler writes (the in-flight counter, tombstone hit counts) lives in a page
//! ickpt mapped itself, never on a page an application may protect.

// Unsafe allowed here (lib.rs fences it): the lock-free snapshot the signal handler reads through
// a raw pointer.
#![allow(unsafe_code)]

use crate::track::memory::own_mem::OwnSlice;
use crate::track::region::TrackedRegion;
use crate::track::RangeProblem;
use crate::track::TrackError;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

struct Snapshot {
    /// Sorted by `base`; user ranges never overlap, so ends are sorted too.
    regions: Vec<Arc<TrackedRegion>>,
}

static CURRENT: AtomicPtr<Snapshot> = AtomicPtr::new(std::ptr::null_mut());
/// A spin lock rather than a Mutex so a child forked while it was held can reset it.
static WRITER: AtomicBool = AtomicBool::new(false);

/// Recently untracked spans. A fault that raced `unprotect` (the page was read-only when the
/// write trapped, but the region left the registry before the handler looked) finds its
/// address here and simply retries the write, now that the page is open. Each tombstone
/// absorbs a bounded number of faults, so a genuine segfault there still crashes.
const TOMBSTONES: usize = 32;
const TOMBSTONE_HITS: u64 = 1024;
/// Handler page layout: word 0 in-flight count, word 1 next tombstone slot, then
/// (start, end, hits) triples.
const W_IN_FLIGHT: usize = 0;
const W_NEXT_TOMB: usize = 1;
const W_TOMBS: usize = 2;

static PAGE: OnceLock<OwnSlice<AtomicU64>> = OnceLock::new();

/// Map the handler page if it is not mapped yet (ordinary code only).
fn handler_page() -> Option<&'static OwnSlice<AtomicU64>> {
    if PAGE.get().is_none() {
        let w = OwnSlice::new(W_TOMBS + 3 * TOMBSTONES).ok()?;
        let _ = PAGE.set(w);
    }
    PAGE.get()
}

/// Signal-safe: `OnceLock::get` is an atomic load; it never initialises.
fn handler_page_if_ready() -> Option<&'static [AtomicU64]> {
    PAGE.get().map(|p| &p[..])
}

struct WriterGuard;

fn lock_writers() -> WriterGuard {
    while WRITER
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::thread::yield_now();
    }
    WriterGuard
}

impl Drop for WriterGuard {
    fn drop(&mut self) {
        WRITER.store(false, Ordering::Release);
    }
}

fn snapshot_regions() -> Vec<Arc<TrackedRegion>> {
    let p = CURRENT.load(Ordering::SeqCst);
    if p.is_null() {
        return Vec::new();
    }
    // SAFETY: only writers, who hold WRITER (as our callers do), replace or free snapshots.
    unsafe { (*p).regions.clone() }
}

fn publish(regions: Vec<Arc<TrackedRegion>>) {
    let new = Box::into_raw(Box::new(Snapshot { regions }));
    let old = CURRENT.swap(new, Ordering::SeqCst);
    if let Some(w) = handler_page_if_ready() {
        // A handler that loaded `old` incremented the counter before loading; wait it out.
        while w[W_IN_FLIGHT].load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
    }
    if !old.is_null() {
        // SAFETY: `old` came from Box::into_raw in an earlier publish and no handler can
        // still hold it (in-flight drained after the swap); writers are serialised.
        drop(unsafe { Box::from_raw(old) });
    }
}

fn intersects(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Add a region; refused if its user range overlaps a tracked one or its covering pages
/// cover memory the fault handler (or the kernel, `extra`) writes on ickpt's behalf.
pub fn insert(region: Arc<TrackedRegion>, extra: &[(usize, usize)]) -> Result<(), TrackError> {
    // Every tracked region passes here, however its tracker was made.
    ensure_fork_reset();
    let page = handler_page().ok_or(TrackError::OwnAlloc(std::io::Error::from_raw_os_error(
        libc::ENOMEM,
    )))?;
    let _w = lock_writers();
    let mut regions = snapshot_regions();
    let (start, end) = (region.user_ptr, region.user_ptr + region.user_len);
    if let Some(o) = regions
        .iter()
        .find(|o| o.user_ptr < end && start < o.user_ptr + o.user_len)
    {
        return Err(TrackError::Refused(RangeProblem::Overlaps(o.id)));
    }
    let span = (region.base(), region.span_end());
    let mut own = regions
        .iter()
        .chain(std::iter::once(&region))
        .flat_map(|r| r.own_spans())
        .chain(std::iter::once(page.span()))
        .chain(crate::sys::altstack::spans())
        .chain(extra.iter().copied());
    if own.any(|s| intersects(s, span)) {
        return Err(TrackError::Refused(RangeProblem::OwnMemory));
    }
    let at = regions.partition_point(|o| o.user_ptr < region.user_ptr);
    regions.insert(at, region);
    publish(regions);
    Ok(())
}

/// Remove a region. Once this returns, no fault handler refers to it. Faults that trapped
/// on its pages before it left are retried (see TOMBSTONES).
pub fn remove(region: &Arc<TrackedRegion>) {
    let _w = lock_writers();
    if let Some(w) = handler_page_if_ready() {
        let slot = w[W_NEXT_TOMB].fetch_add(1, Ordering::SeqCst) as usize % TOMBSTONES;
        let t = &w[W_TOMBS + 3 * slot..W_TOMBS + 3 * slot + 3];
        t[0].store(0, Ordering::SeqCst);
        t[1].store(region.span_end() as u64, Ordering::SeqCst);
        t[2].store(0, Ordering::SeqCst);
        t[0].store(region.base() as u64, Ordering::SeqCst);
    }
    let mut regions = snapshot_regions();
    regions.retain(|o| !Arc::ptr_eq(o, region));
    publish(regions);
}

/// Other tracked regions whose covering pages share a page with `region`'s (a page that
/// holds the end of one small allocation and the start of the next).
pub fn neighbours_sharing_pages(region: &TrackedRegion) -> Vec<Arc<TrackedRegion>> {
    let _w = lock_writers();
    snapshot_regions()
        .into_iter()
        .filter(|o| !std::ptr::eq(Arc::as_ptr(o), region))
        .filter(|o| o.base() < region.span_end() && region.base() < o.span_end())
        .collect()
}

/// What the handler found at a faulting address.
pub enum Lookup {
    /// Regions were found and `f` ran on each.
    Tracked,
    /// The address was tracked until an unprotect that raced this fault: retry the write.
    Retry,
    NotOurs,
}

/// Call `f` on every tracked region whose covering pages contain `addr`. Async-signal-safe:
/// atomics and reads of a snapshot that cannot be freed while we are counted in flight.
pub fn with_regions_containing(addr: usize, mut f: impl FnMut(&TrackedRegion)) -> Lookup {
    let Some(w) = handler_page_if_ready() else {
        return Lookup::NotOurs;
    };
    w[W_IN_FLIGHT].fetch_add(1, Ordering::SeqCst);
    let p = CURRENT.load(Ordering::SeqCst);
    let mut found = false;
    if !p.is_null() {
        // SAFETY: the snapshot stays alive while the in-flight count includes us.
        let regions = unsafe { &(*p).regions };
        let mut i = regions.partition_point(|r| r.base() <= addr);
        while i > 0 {
            i -= 1;
            let r = &regions[i];
            if r.span_end() <= addr {
                break;
            }
            if r.contains(addr) {
                found = true;
                f(r);
            }
        }
    }
    // Decrement before anything can chain to an application handler that may longjmp.
    w[W_IN_FLIGHT].fetch_sub(1, Ordering::SeqCst);
    if found {
        return Lookup::Tracked;
    }
    for t in w[W_TOMBS..].chunks_exact(3) {
        let (start, end) = (t[0].load(Ordering::SeqCst), t[1].load(Ordering::SeqCst));
        if start as usize <= addr
            && addr < end as usize
            && t[2].fetch_add(1, Ordering::SeqCst) < TOMBSTONE_HITS
        {
            return Lookup::Retry;
        }
    }
    Lookup::NotOurs
}

/// Make every forked child run [`reset_after_fork`] (once per process; [`insert`] calls it,
/// so no tracked region exists without it, whatever made its tracker): a child forked
/// mid-commit must not wait for pages.
fn ensure_fork_reset() {
    static AT_FORK: std::sync::Once = std::sync::Once::new();
    extern "C" fn in_forked_child() {
        reset_after_fork();
    }
    AT_FORK.call_once(|| crate::sys::thread::at_fork_child(in_forked_child));
}

/// In a child just forked: only the forking thread exists, so no handler is in flight and
/// no writer holds the lock, whatever the parent's other threads were doing.
fn reset_after_fork() {
    WRITER.store(false, Ordering::SeqCst);
    if let Some(w) = handler_page_if_ready() {
        w[W_IN_FLIGHT].store(0, Ordering::SeqCst);
    }
    let p = CURRENT.load(Ordering::SeqCst);
    if !p.is_null() {
        // SAFETY: no other thread exists in the child, so nothing frees the snapshot.
        for r in unsafe { &(*p).regions } {
            r.protocol.orphan();
        }
    }
}
