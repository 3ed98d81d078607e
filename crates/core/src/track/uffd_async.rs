//! Write tracking by userfaultfd async write-protect (Linux 6.7+). The kernel resolves a
//! first write itself (no signal, no handler thread: about 0.8 µs instead of 4–8 µs) and
//! PAGEMAP_SCAN reads the written pages back and write-protects them again in one call.
//!
//! No write reaches ickpt while this tracks, so a write cannot be held back for a running
//! commit (AI-Ckpt Algorithm 2). A commit therefore fences its regions with mprotect while
//! it needs their pages: writes during a commit trap into the SIGSEGV handler and are decided
//! page by page as with the mprotect backend; once every page is taken the fence is lifted and
//! writes cost the kernel's async fault again. A sync commit with a single-threaded
//! application never meets its fence.

use super::mprotect::MprotectTracker;
use super::own_mem::OwnBytes;
use super::region::TrackedRegion;
use super::uffd_regions::UffdRegions;
use super::{registry, Backend, TrackError, Tracker};
use crate::sys::pagemap::{PageRegion, Pagemap};
use crate::sys::userfault::{Userfault, UFFD_FEATURE_WP_ASYNC, UFFD_FEATURE_WP_UNPOPULATED};
use crate::sys::{mem, page_size};
use std::io;
use std::sync::{Arc, Mutex};

/// Page runs one PAGEMAP_SCAN call reports (24 bytes each); a region with more is scanned
/// in several calls.
const SCAN_RUNS: usize = 4096;

pub struct UffdAsyncTracker {
    regions: UffdRegions,
    pagemap: Pagemap,
    /// PAGEMAP_SCAN's output, in a mapping of ickpt's own: the kernel writes it, so no
    /// tracked region may cover it.
    scan: Mutex<OwnBytes>,
}

impl UffdAsyncTracker {
    pub fn new() -> Result<Self, TrackError> {
        let uffd = Userfault::open(UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED)
            .map_err(TrackError::Userfault)?;
        let pagemap = Pagemap::open().map_err(TrackError::Userfault)?;
        let scan = OwnBytes::new(SCAN_RUNS * std::mem::size_of::<PageRegion>())
            .map_err(TrackError::OwnAlloc)?;
        Ok(UffdAsyncTracker {
            regions: UffdRegions::new(uffd, Backend::UffdAsync)?,
            pagemap,
            scan: Mutex::new(scan),
        })
    }

    /// Regions tracked by mprotect because userfaultfd refused them.
    pub fn fallback_regions(&self) -> usize {
        self.regions.fallback_count()
    }

    fn own_spans(&self) -> [(usize, usize); 1] {
        [self.scan.lock().unwrap_or_else(|e| e.into_inner()).span()]
    }

    /// Take the written pages of `r` into `out` and write-protect them again. Returns how
    /// many, and which of the region's edge pages (first, last) were among them.
    fn take_written(&self, r: &TrackedRegion, out: &mut [u64]) -> io::Result<(u64, [bool; 2])> {
        let buf = self.scan.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the mapping holds SCAN_RUNS page_regions (plain integers, valid at zero),
        // is page-aligned, and the lock gives this call sole use of it.
        let runs =
            unsafe { std::slice::from_raw_parts_mut(buf.as_ptr().cast::<PageRegion>(), SCAN_RUNS) };
        let last = r.npages - 1;
        let mut edges = [false; 2];
        // SAFETY: the buffer is ickpt's own mapping, which the registry keeps untracked.
        let pages = unsafe {
            self.pagemap
                .take_written(r.base, r.span_end(), page_size(), runs, |lo, hi| {
                    edges[0] |= lo == 0;
                    edges[1] |= hi > last;
                    for p in lo..hi {
                        out[p / 64] |= 1 << (p % 64);
                    }
                })
        }?;
        Ok((pages, edges))
    }

    /// A written page `r` shares with a neighbour was write-protected again by `r`'s scan, so
    /// the neighbour's own scan will not see it: mark it in the neighbour's dirty bits, which
    /// its collect takes too. Only what the scan found: passing on bits that came from the
    /// dirty bits would bounce the page between the two regions forever. Lock-free and
    /// allocation-free (the gate is closed).
    fn share_edge_pages(r: &TrackedRegion, edges: [bool; 2]) {
        let ps = page_size();
        for (page, written) in [(0, edges[0]), (r.npages - 1, edges[1])] {
            if !written {
                continue;
            }
            registry::with_regions_containing(r.page_addr(page), |o| {
                if !std::ptr::eq(o, r) {
                    o.dirty.set((r.page_addr(page) - o.base) / ps);
                }
            });
        }
    }
}

impl Tracker for UffdAsyncTracker {
    fn backend(&self) -> Backend {
        Backend::UffdAsync
    }

    fn attach(&self, r: &Arc<TrackedRegion>, armed: bool) -> Result<(), TrackError> {
        self.regions.attach(r, armed, &self.own_spans())
    }

    fn detach(&self, r: &Arc<TrackedRegion>) -> Result<(), TrackError> {
        self.regions.detach(r)
    }

    fn collect(
        &self,
        r: &TrackedRegion,
        out: &mut Vec<u64>,
        before_rearm: &mut dyn FnMut(&[u64]),
    ) -> Result<(), TrackError> {
        if self.regions.by_protection(r) {
            return self.regions.fence.collect(r, out, before_rearm);
        }
        // Fence first: from here a write by any other thread traps and waits at the gate, so
        // none lands between the scan and the page states the commit sets below.
        mem::protect(r.base, r.span_len(), mem::PROT_TRACKED).map_err(TrackError::Protect)?;
        // Pages opened through the fence during the last commit, and the bits of a failed
        // commit put back: their pages are written-protected already or reported below.
        r.dirty.take_into(out);
        match self.take_written(r, out) {
            Ok((pages, edges)) => {
                r.dirty.count_faults(pages);
                Self::share_edge_pages(r, edges);
            }
            Err(e) => {
                r.dirty.merge(out);
                let _ = mem::protect(r.base, r.span_len(), mem::PROT_OPEN);
                return Err(TrackError::Userfault(e));
            }
        }
        before_rearm(out);
        Ok(())
    }

    /// Only writes through the fence (during a commit) do.
    fn sees_every_write(&self) -> bool {
        false
    }

    fn release(&self, r: &TrackedRegion) {
        if self.regions.by_protection(r) {
            return;
        }
        // Opening the span opens pages it shares with neighbours too: those that page
        // protection tracks count them as written.
        MprotectTracker::mark_shared_pages_dirty(r, true);
        let _ = mem::protect(r.base, r.span_len(), mem::PROT_OPEN);
    }

    fn open_for_restore(&self, r: &TrackedRegion) -> Result<(), TrackError> {
        self.regions.open_for_restore(r)
    }

    fn handler_intact(&self) -> Result<bool, TrackError> {
        self.regions.fence.handler_intact()
    }
}
