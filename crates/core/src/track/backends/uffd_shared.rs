//! What both userfaultfd backends do alike: register a region for write-protect faults (or
//! hand it to page protection when userfaultfd refuses its memory type), and unregister it.

// Unsafe allowed here (lib.rs fences it): PAGEMAP_SCAN writes its results into ickpt's own memory.
#![allow(unsafe_code)]

use crate::sys::mem::Protection;
use crate::sys::page_size;
use crate::sys::pagemap::{PageRegion, Pagemap};
use crate::sys::userfault::Userfault;
use crate::track::backends::mprotect::MprotectTracker;
use crate::track::memory::bitmap;
use crate::track::memory::own_mem::OwnBytes;
use crate::track::region::TrackedRegion;
use crate::track::registry;
use crate::track::{Backend, Guard, TrackError, Tracker};
use std::io;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

/// Page runs one PAGEMAP_SCAN call reports (24 bytes each); a region with more is scanned
/// in several calls.
const SCAN_RUNS: usize = 4096;

/// PAGEMAP_SCAN over tracked regions: which pages were written since they were last
/// write-protected.
pub(crate) struct Scanner {
    pagemap: Pagemap,
    /// The ioctl's output, in a mapping of ickpt's own: the kernel writes it, so no tracked
    /// region may cover it.
    buf: Mutex<OwnBytes>,
}

impl Scanner {
    pub fn new() -> Result<Scanner, TrackError> {
        Ok(Scanner {
            pagemap: Pagemap::open().map_err(TrackError::Userfault)?,
            buf: Mutex::new(
                OwnBytes::scratch(SCAN_RUNS * std::mem::size_of::<PageRegion>())
                    .map_err(TrackError::OwnAlloc)?,
            ),
        })
    }

    pub fn span(&self) -> (usize, usize) {
        self.buf.lock().unwrap_or_else(|e| e.into_inner()).span()
    }

    /// Set the bits of `r`'s written pages in `out` (`protect_again`: and write-protect them,
    /// async userfaultfd only). Returns how many, and which of the region's edge pages
    /// (first, last) were among them.
    pub fn written(
        &self,
        r: &TrackedRegion,
        out: &mut [u64],
        protect_again: bool,
    ) -> io::Result<(u64, [bool; 2])> {
        let last = r.npages - 1;
        let mut edges = [false; 2];
        let pages = self.scan(r, protect_again, |lo, hi| {
            edges[0] |= lo == 0;
            edges[1] |= hi > last;
            for p in lo..hi {
                bitmap::set(out, p);
            }
        })?;
        Ok((pages, edges))
    }

    /// Set the bits of the written pages among `pages` of `r` in `out` and write-protect them
    /// again (async userfaultfd; pre-copy takes a few pages of a region this way).
    pub fn written_in(
        &self,
        r: &TrackedRegion,
        pages: std::ops::Range<usize>,
        out: &mut [u64],
    ) -> io::Result<()> {
        let (lo, hi) = (r.page_addr(pages.start), r.page_addr(pages.end));
        self.scan_span(lo, hi, true, |a, b| {
            for p in a..b {
                bitmap::set(out, pages.start + p);
            }
        })
        .map(drop)
    }

    /// Call `f(lo, hi)` for each run of `r`'s pages written since they were last
    /// write-protected, changing nothing.
    pub fn each_written(&self, r: &TrackedRegion, f: impl FnMut(usize, usize)) -> io::Result<()> {
        self.scan(r, false, f).map(drop)
    }

    fn scan(
        &self,
        r: &TrackedRegion,
        protect_again: bool,
        f: impl FnMut(usize, usize),
    ) -> io::Result<u64> {
        self.scan_span(r.base(), r.span_end(), protect_again, f)
    }

    /// `scan` over the pages `start..end` of a tracked region; `f` gets page indexes from
    /// `start`.
    fn scan_span(
        &self,
        start: usize,
        end: usize,
        protect_again: bool,
        f: impl FnMut(usize, usize),
    ) -> io::Result<u64> {
        let buf = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the mapping holds SCAN_RUNS page_regions (plain integers, valid at zero),
        // is page-aligned, and the lock gives this call sole use of it.
        let runs =
            unsafe { std::slice::from_raw_parts_mut(buf.as_ptr().cast::<PageRegion>(), SCAN_RUNS) };
        // SAFETY: the buffer is ickpt's own mapping, which the registry keeps untracked.
        unsafe {
            self.pagemap
                .take_written(start, end, page_size(), runs, protect_again, f)
        }
    }
}

/// A userfaultfd, its regions, and the mprotect tracker behind it: it tracks the regions
/// userfaultfd cannot, and its SIGSEGV handler serves the uffd-async fence.
pub(crate) struct UffdRegions {
    pub uffd: Userfault,
    pub fence: MprotectTracker,
    /// Regions handed to page protection (each region's `mech` says which).
    fallbacks: AtomicUsize,
    /// The process that opened the userfaultfd: in a forked child its ioctls would act on
    /// the parent's address space.
    pid: AtomicU32,
    mech: Backend,
}

impl UffdRegions {
    pub fn new(uffd: Userfault, mech: Backend) -> Result<Self, TrackError> {
        Ok(UffdRegions {
            uffd,
            fence: MprotectTracker::new()?,
            fallbacks: AtomicUsize::new(0),
            pid: AtomicU32::new(std::process::id()),
            mech,
        })
    }

    /// Regions tracked by mprotect because userfaultfd refused them.
    pub fn fallback_count(&self) -> usize {
        self.fallbacks.load(SeqCst)
    }

    /// What `collect` does before a backend's own work: refuse in a forked child, and hand a
    /// region userfaultfd refused to page protection. None: the backend's turn.
    pub fn collect_common(
        &self,
        r: &TrackedRegion,
        out: &mut Vec<u64>,
        before_rearm: &mut dyn FnMut(&[u64]),
    ) -> Option<Result<(), TrackError>> {
        if let Err(e) = self.check_owner() {
            return Some(Err(e));
        }
        r.tracked_by_protection()
            .then(|| self.fence.collect(r, Guard::Fence, out, before_rearm))
    }

    pub fn forked(&self) -> bool {
        std::process::id() != self.pid.load(SeqCst)
    }

    /// Refuse to act for a forked child: the userfaultfd (and an open pagemap) would act on
    /// the parent's address space.
    pub fn check_owner(&self) -> Result<(), TrackError> {
        if self.forked() {
            return Err(TrackError::ForkedChild);
        }
        Ok(())
    }

    /// Register `r` (`own`: ickpt's mappings the kernel or a handler thread writes, which it
    /// must not cover) and, if `armed`, write-protect it.
    pub fn attach(
        &self,
        r: &Arc<TrackedRegion>,
        armed: bool,
        own: &[(usize, usize)],
    ) -> Result<(), TrackError> {
        self.check_owner()?;
        r.set_mechanism(self.mech);
        registry::insert(r.clone(), own)?;
        if let Err(e) = self.uffd.register_wp(r.base(), r.span_len()) {
            if !matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::EBUSY)) {
                registry::remove(r);
                return Err(TrackError::Userfault(e));
            }
            // A memory type userfaultfd cannot write-protect (EINVAL), or a page another
            // engine's userfaultfd registered (EBUSY): page protection can do it.
            r.set_mechanism(Backend::Mprotect);
            if armed {
                MprotectTracker::arm(r)?;
            }
            self.fallbacks.fetch_add(1, SeqCst);
            return Ok(());
        }
        if armed {
            if let Err(e) = self.uffd.write_protect(r.base(), r.span_len(), true) {
                let _ = self.uffd.unregister(r.base(), r.span_len());
                registry::remove(r);
                return Err(TrackError::Userfault(e));
            }
        }
        Ok(())
    }

    /// Stop tracking `r`; its memory is left writable. Unregistering drops its protection
    /// and wakes any writer still blocked in it.
    pub fn detach(&self, r: &Arc<TrackedRegion>) -> Result<(), TrackError> {
        if r.tracked_by_protection() {
            self.fallbacks.fetch_sub(1, SeqCst);
            return self.fence.detach(r);
        }
        if self.forked() {
            registry::remove(r);
            return r.mem.protect(Protection::Open).map_err(TrackError::Protect);
        }
        MprotectTracker::mark_shared_pages_dirty(r);
        let unregistered = self.uffd.unregister(r.base(), r.span_len());
        let opened = r.mem.protect(Protection::Open);
        registry::remove(r);
        // Neighbours of this engine sharing a page lost its registration with ours: register
        // them again. (Another engine's regions are not ours to register.)
        for o in registry::neighbours_sharing_pages(r) {
            if o.tracked_by(self.mech) && Arc::ptr_eq(&o.protocol, &r.protocol) {
                let _ = self.uffd.register_wp(o.base(), o.span_len());
            }
        }
        unregistered.map_err(TrackError::Userfault)?;
        opened.map_err(TrackError::Protect)
    }

    /// `Tracker::collect_pages` for both userfaultfd backends: refused in a forked child;
    /// page protection for a region userfaultfd refused; else the dirty bits of `pages`,
    /// then `arm` (which may add the kernel's written pages to `out`).
    pub fn collect_pages(
        &self,
        r: &TrackedRegion,
        pages: std::ops::Range<usize>,
        out: &mut Vec<u64>,
        arm: impl FnOnce(std::ops::Range<usize>, &mut Vec<u64>) -> io::Result<()>,
    ) -> Result<(), TrackError> {
        self.check_owner()?;
        if r.tracked_by_protection() {
            return super::collect_pages_by_protection(r, pages, out);
        }
        r.dirty.take_range(pages.start, pages.end, out);
        arm(pages, out).map_err(TrackError::Userfault)
    }

    /// `Tracker::after_restart` for both userfaultfd backends: this process is the
    /// userfaultfd's now, and `r` is registered with it again.
    pub fn after_restart(&self, r: &TrackedRegion) -> Result<(), TrackError> {
        self.pid.store(std::process::id(), SeqCst);
        if r.tracked_by_protection() {
            return Ok(());
        }
        self.uffd
            .register_wp(r.base(), r.span_len())
            .map_err(TrackError::Userfault)
    }

    /// Stop tracking `r` and make it writable without a fault per page ([`Tracker::disarm`]).
    pub fn disarm(&self, r: &TrackedRegion) -> Result<(), TrackError> {
        self.check_owner()?;
        if r.tracked_by_protection() {
            return self.fence.disarm(r);
        }
        MprotectTracker::mark_shared_pages_dirty(r);
        self.uffd
            .write_protect(r.base(), r.span_len(), false)
            .map_err(TrackError::Userfault)?;
        r.mem.protect(Protection::Open).map_err(TrackError::Protect)
    }
}
