//! Protected regions: tracking a range the application names or memory ickpt allocates,
//! and letting them go.

// Unsafe allowed here (lib.rs fences it): `protect` is an unsafe fn (the caller vouches for the
// range), and the range becomes the region's `TrackedPages` on that promise.
#![allow(unsafe_code)]

use super::{Engine, RegionSlot, State};
use crate::error::{ProtectError, RegionError};
use crate::sys::mem::{Mapping, TrackedPages};
use crate::sys::page_size;
use crate::track::{self, RangeProblem, TrackedRegion};
use std::sync::Arc;

impl Engine {
    /// Track `len` bytes at `ptr` under `id`. The covering pages are write-protected; bytes
    /// of those pages outside the range are never restored.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be readable and writable memory of this process that stays mapped
    /// until it is unprotected (or the engine dropped).
    pub unsafe fn protect(&self, id: u64, ptr: *mut u8, len: usize) -> Result<(), ProtectError> {
        nonempty(id, ptr, len)?;
        self.insert(id, ptr as usize, len, None, false).map(|_| ())
    }

    /// Keep `len` bytes at `ptr` as region `id`, untracked: the caller reports each write
    /// through the handle returned, and writes none of its pages from a checkpoint until the
    /// commit it began is over (`wait`, or the end of a sync checkpoint). A commit copies the
    /// pages reported since the last one unfenced, where a tracked page costs a fault on its
    /// first write and a fence around the commit. For `ickpt run`'s own buffers, which only
    /// its capture writes, while the program is stopped.
    ///
    /// # Safety
    /// As [`Engine::protect`]; and a write the caller does not report, or makes while a
    /// commit needs the page, is missing from or torn in the versions.
    #[doc(hidden)]
    pub unsafe fn protect_reported(
        &self,
        id: u64,
        ptr: *mut u8,
        len: usize,
    ) -> Result<ReportedWrites, ProtectError> {
        nonempty(id, ptr, len)?;
        let tr = self.insert(id, ptr as usize, len, None, true)?;
        Ok(ReportedWrites { tr })
    }

    /// Track `len` bytes at `ptr` as region `id`; `owned`: the mapping `alloc` made for it
    /// (unmapped if the region is refused). Callers vouch for the range: `protect`'s caller
    /// by its contract, `alloc` by having mapped it.
    fn insert(
        &self,
        id: u64,
        ptr: usize,
        len: usize,
        owned: Option<Mapping>,
        reported: bool,
    ) -> Result<Arc<TrackedRegion>, ProtectError> {
        let mut st = self.lock_for_change()?;
        if st.regions.contains_key(&id) {
            return Err(ProtectError::RegionExists(id));
        }
        let bad = |problem| ProtectError::BadRange {
            id,
            start: ptr,
            len,
            problem,
        };
        let refused = |e| match e {
            track::TrackError::Refused(problem) => bad(problem),
            source => RegionError::Tracking { id, source }.into(),
        };
        // SAFETY: read-write memory of this process, mapped until it is unprotected (the
        // callers vouch, see above); tracking lets its writes through, and the registry
        // refuses a range over ickpt's own memory.
        let pages = unsafe { TrackedPages::covering(ptr, len) }
            .map_err(|_| bad(RangeProblem::NotMapped))?;
        let tr = Arc::new(
            TrackedRegion::new(id, ptr, len, pages, self.protocol.clone()).map_err(refused)?,
        );
        if reported {
            tr.report_writes();
        }
        within_format_limits(&st, &tr)?;
        if owned.is_none() {
            track::before_protect((tr.base(), tr.span_end())).map_err(refused)?;
        }
        // A new region is stored whole by the next checkpoint: no need to trap its writes
        // until that checkpoint arms it.
        self.tracker.attach(&tr, false).map_err(refused)?;
        st.regions.insert(
            id,
            RegionSlot {
                tr: tr.clone(),
                born: None,
                owned,
            },
        );
        Ok(tr)
    }

    /// Stop tracking region `id`. Its pages are absent from later versions, so a restore of
    /// a later version does not bring them back.
    pub fn unprotect(&self, id: u64) -> Result<(), ProtectError> {
        let mut st = self.lock_for_change()?;
        self.settle(&mut st);
        region_leaves_precopy(&mut st, id);
        let slot = st
            .regions
            .remove(&id)
            .ok_or(ProtectError::UnknownRegion(id))?;
        st.stats.keep_counts_of(&slot.tr);
        match self.tracker.detach(&slot.tr) {
            // Unmapped while protected (a checkpoint said so): it has left tracking all the
            // same, and nothing is left to make writable.
            Err(_) if !slot.tr.still_mapped() => Ok(()),
            r => r.map_err(|e| region_error(&slot.tr, e).into()),
        }
    }

    /// Allocate `size` bytes of zeroed, page-aligned memory tracked as region `id`
    /// (AI-Ckpt's malloc_protected).
    pub fn alloc(&self, id: u64, size: usize) -> Result<*mut u8, ProtectError> {
        let refused = |why| ProtectError::AllocSize { id, size, why };
        if size == 0 {
            return Err(refused("a size of 0 cannot be protected"));
        }
        let len = size
            .checked_next_multiple_of(page_size())
            .ok_or_else(|| refused("larger than the address space"))?;
        let m = Mapping::for_application(len).map_err(|source| ProtectError::Map {
            id,
            len,
            source,
        })?;
        let p = m.ptr();
        // A refused region drops the mapping, unmapping it.
        self.insert(id, p as usize, size, Some(m), false)?;
        Ok(p)
    }

    /// Release memory from [`Engine::alloc`] (AI-Ckpt's free_protected).
    pub fn free(&self, ptr: *mut u8) -> Result<(), ProtectError> {
        let mut st = self.lock_for_change()?;
        self.settle(&mut st);
        let id = st
            .regions
            .iter()
            .find(|(_, s)| s.owned.as_ref().is_some_and(|m| m.ptr() == ptr))
            .map(|(id, _)| *id)
            .ok_or(ProtectError::NotAllocated { ptr: ptr as usize })?;
        region_leaves_precopy(&mut st, id);
        let slot = st.regions.remove(&id).expect("found above");
        st.stats.keep_counts_of(&slot.tr);
        self.tracker
            .detach(&slot.tr)
            .map_err(|e| region_error(&slot.tr, e))?;
        // The caller hands the memory back for good.
        slot.owned
            .expect("owned")
            .unmap()
            .map_err(|source| ProtectError::Unmap {
                id,
                ptr: ptr as usize,
                source,
            })
    }

    /// Pointer and length of a protected region.
    pub fn region(&self, id: u64) -> Option<(*mut u8, usize)> {
        let st = self.lock();
        st.regions
            .get(&id)
            .map(|r| (r.tr.user_ptr as *mut u8, r.tr.user_len))
    }
}

/// Region `id` is about to leave tracking: the pre-copy file could no longer index its pages,
/// so it is dropped and every page it held goes back to its region for the next checkpoint;
/// what pre-copy knew of the region's pages is forgotten.
fn region_leaves_precopy(st: &mut State, id: u64) {
    if let Some(p) = &mut st.precopy {
        p.abandon(&st.regions);
        p.forget_region(id);
    }
}

/// A tracking failure on `tr`, named for what it is when its memory is gone: unmapped while
/// protected (otherwise mprotect says only "Cannot allocate memory"). Allocates nothing (the
/// gate may be closed).
pub(crate) fn region_error(tr: &TrackedRegion, e: track::TrackError) -> RegionError {
    if !tr.still_mapped() {
        return RegionError::Unmapped {
            id: tr.id,
            start: tr.user_ptr,
            end: tr.user_ptr + tr.user_len,
        };
    }
    RegionError::Tracking {
        id: tr.id,
        source: e,
    }
}

/// A version must stay readable: the reader refuses more regions or pages than the format's
/// limits (docs/FORMAT.md), so protecting more is refused here, before any version exists.
fn within_format_limits(st: &State, new: &TrackedRegion) -> Result<(), ProtectError> {
    use ickpt_format::limits::{MAX_PAGES, MAX_REGIONS};
    let bad = |problem| ProtectError::BadRange {
        id: new.id,
        start: new.user_ptr,
        len: new.user_len,
        problem,
    };
    if st.regions.len() as u64 >= MAX_REGIONS as u64 {
        return Err(bad(RangeProblem::TooManyRegions {
            max: MAX_REGIONS as u64,
        }));
    }
    let pages: u64 =
        st.regions.values().map(|s| s.tr.npages as u64).sum::<u64>() + new.npages as u64;
    if pages > MAX_PAGES {
        return Err(bad(RangeProblem::TooManyPages {
            pages,
            max: MAX_PAGES,
            gib: (MAX_PAGES * page_size() as u64) >> 30,
            page_size: page_size(),
        }));
    }
    Ok(())
}

/// A range a caller names must hold at least a byte.
fn nonempty(id: u64, ptr: *mut u8, len: usize) -> Result<(), ProtectError> {
    if ptr.is_null() || len == 0 {
        return Err(ProtectError::BadRange {
            id,
            start: ptr as usize,
            len,
            problem: RangeProblem::Empty,
        });
    }
    Ok(())
}

/// What the owner of a region from [`Engine::protect_reported`] reports its writes through.
pub struct ReportedWrites {
    tr: Arc<TrackedRegion>,
}

impl ReportedWrites {
    /// The bytes `offset..offset + len` from the region's start were written. Lock-free.
    pub fn written(&self, offset: usize, len: usize) {
        self.tr
            .reported_written(self.tr.page_offset() + offset, len);
    }
}
