//! The process-wide table of tracked regions, readable from a signal handler without locks.
//!
//! Writers (protect/unprotect, ordinary code) serialise on a mutex, build a new sorted
//! snapshot and publish it with one atomic swap. The handler counts itself in `IN_FLIGHT`
//! before loading the snapshot; a writer frees a replaced snapshot (and the regions that left
//! it) only once no handler is in flight, so the handler never reads freed memory.

use super::region::TrackedRegion;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

struct Snapshot {
    /// Sorted by `base`; user ranges never overlap, so ends are sorted too.
    regions: Vec<Arc<TrackedRegion>>,
}

static CURRENT: AtomicPtr<Snapshot> = AtomicPtr::new(std::ptr::null_mut());
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
static WRITER: Mutex<()> = Mutex::new(());

/// The user range of an already tracked region overlaps the requested one.
#[derive(Debug)]
pub struct Overlap {
    pub other_id: u64,
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
    // A handler that loaded `old` incremented IN_FLIGHT before loading; wait it out.
    while IN_FLIGHT.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
    if !old.is_null() {
        // SAFETY: `old` came from Box::into_raw in an earlier publish and no handler can
        // still hold it (IN_FLIGHT drained after the swap); writers are serialised.
        drop(unsafe { Box::from_raw(old) });
    }
}

/// Add a region; fails if its user range overlaps a tracked one.
pub fn insert(region: Arc<TrackedRegion>) -> Result<(), Overlap> {
    let _w = WRITER.lock().unwrap_or_else(|e| e.into_inner());
    let mut regions = snapshot_regions();
    let (start, end) = (region.user_ptr, region.user_ptr + region.user_len);
    if let Some(o) = regions
        .iter()
        .find(|o| o.user_ptr < end && start < o.user_ptr + o.user_len)
    {
        return Err(Overlap { other_id: o.id });
    }
    let at = regions.partition_point(|o| o.user_ptr < region.user_ptr);
    regions.insert(at, region);
    publish(regions);
    Ok(())
}

/// Remove a region. Once this returns, no fault handler refers to it.
pub fn remove(region: &Arc<TrackedRegion>) {
    let _w = WRITER.lock().unwrap_or_else(|e| e.into_inner());
    let mut regions = snapshot_regions();
    regions.retain(|o| !Arc::ptr_eq(o, region));
    publish(regions);
}

/// Other tracked regions whose covering pages share a page with `region`'s (a page that
/// holds the end of one small allocation and the start of the next).
pub fn neighbours_sharing_pages(region: &TrackedRegion) -> Vec<Arc<TrackedRegion>> {
    let _w = WRITER.lock().unwrap_or_else(|e| e.into_inner());
    snapshot_regions()
        .into_iter()
        .filter(|o| !std::ptr::eq(Arc::as_ptr(o), region))
        .filter(|o| o.base < region.span_end() && region.base < o.span_end())
        .collect()
}

/// Call `f` on every tracked region whose covering pages contain `addr`; returns whether
/// there was one. Async-signal-safe: atomics and reads of a snapshot that cannot be freed
/// while we are counted in IN_FLIGHT.
pub fn with_regions_containing(addr: usize, mut f: impl FnMut(&TrackedRegion)) -> bool {
    IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
    let p = CURRENT.load(Ordering::SeqCst);
    let mut found = false;
    if !p.is_null() {
        // SAFETY: the snapshot stays alive while IN_FLIGHT counts us (see `publish`).
        let regions = unsafe { &(*p).regions };
        let mut i = regions.partition_point(|r| r.base <= addr);
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
    IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    found
}
