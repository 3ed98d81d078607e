//! Write tracking by userfaultfd async write-protect (Linux 6.7+). The kernel resolves a
//! first write itself (no signal, no handler thread: about 1 µs in this project's VM instead of 4–8 µs) and
//! PAGEMAP_SCAN reads the written pages back and write-protects them again in one call.
//!
//! No write reaches ickpt while this tracks, so a write cannot be held back for a running
//! commit (AI-Ckpt Algorithm 2). An async commit therefore fences with mprotect the pages it
//! needs from memory (its regions whole, or the runs it collected, `Guard`): writes during a
//! commit trap into the SIGSEGV handler and are decided page by page as with the mprotect
//! backend. The commit lifts the fence chunk by
//! chunk behind itself (`committer::LiftBehind`), so writes to pages it has taken cost the
//! kernel's async fault again while it runs on. A sync commit, which usually meets
//! no write, collects without the fence (but over pages shared with memory outside the
//! region) and checks afterwards that none came (`Guard`).

use crate::sys::mem::Protection;
use crate::sys::page_size;
use crate::sys::userfault::Userfault;
use crate::track::backends::uffd_shared::{Scanner, UffdRegions};
use crate::track::region::TrackedRegion;
use crate::track::registry;
use crate::track::{bitmap, Backend, Guard, TrackError, Tracker};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A run fenced alone costs about what a whole-region fence costs for this many pages (2–4.5
/// µs a call, with the mapping's split, against 28–199 ns a page-table entry, in this
/// project's VM: `scripts/fence-cost.c`, docs/benchmarks.md "The uffd-async fence").
const FENCE_RUNS_PER_PAGE: usize = 50;
/// Most runs fenced one by one: each may split its mapping in three, and vm.max_map_count
/// is 65530 by default.
const MOST_FENCED_RUNS: usize = 4096;
/// Runs at most this long an async call copies into copy-on-write slots rather than fences
/// (`Tracker::copy_ahead_run`), where that leaves few enough runs to fence one by one: a
/// run fenced alone costs about 2.5 µs, a page copied about a quarter of that.
const COPY_AHEAD_RUN: usize = 3;
/// A page copied ahead costs about what a whole-region fence costs for this many pages
/// (0.6 µs against 34–52 ns a present page, 256 MiB, `scripts/scan-fence-cost.c`): a call
/// copies short runs only while they are fewer pages than its region's share of that.
const FENCED_PAGES_PER_COPY: usize = 16;

pub struct UffdAsyncTracker {
    regions: UffdRegions,
    scanner: Scanner,
}

impl UffdAsyncTracker {
    pub fn new() -> Result<Self, TrackError> {
        let uffd = Userfault::for_async().map_err(TrackError::Userfault)?;
        Ok(UffdAsyncTracker {
            regions: UffdRegions::new(uffd, Backend::UffdAsync)?,
            scanner: Scanner::new()?,
        })
    }

    /// Take `r` off being unarmed (attached unarmed, not collected since); whether it was.
    /// Its first scan reports every present page, which were no first writes of an epoch,
    /// so it counts no faults.
    fn take_unarmed(r: &TrackedRegion) -> bool {
        r.unarmed.swap(false, Ordering::SeqCst)
    }

    /// Move `r`'s written pages into `out` (with the bits already set aside: pages opened
    /// through the fence, a failed commit's) and write-protect them again in the same scan;
    /// then `before_rearm`. Returns how many pages the scan found.
    fn take_written(
        r: &TrackedRegion,
        scanner: &Scanner,
        out: &mut Vec<u64>,
        before_rearm: &mut dyn FnMut(&[u64]),
    ) -> Result<u64, TrackError> {
        r.dirty.take_into(out);
        let (written, edges) = scanner
            .written(r, out, true)
            .map_err(TrackError::Userfault)?;
        Self::share_edge_pages(r, edges);
        before_rearm(out);
        Ok(written)
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
                    o.dirty.set((r.page_addr(page) - o.base()) / ps);
                }
            });
        }
    }

    /// Fence `pages` of `r` (a `Guard::Check` collect's shared edge pages).
    fn fence_pages(r: &TrackedRegion, pages: [Option<usize>; 2]) -> Result<(), TrackError> {
        for p in pages.into_iter().flatten() {
            r.mem
                .protect_pages(p, 1, Protection::Tracked)
                .map_err(TrackError::Protect)?;
        }
        Ok(())
    }

    /// Whether `runs` runs of `r` are fenced one by one rather than by one call over the
    /// whole region.
    fn fenced_alone(r: &TrackedRegion, runs: usize) -> bool {
        runs <= MOST_FENCED_RUNS && runs * FENCE_RUNS_PER_PAGE <= r.npages
    }

    /// Fence the runs of pages set in `bits` that the commit still needs from memory (not
    /// those copied ahead into slots, where `copied_ahead` says some may be), or the whole
    /// region where there are so many runs that one call over every page costs less
    /// ([`FENCE_RUNS_PER_PAGE`]) or their splits would crowd the process's mappings
    /// ([`MOST_FENCED_RUNS`]). Without copies no page's state is read: a whole-process
    /// stop fences 100,000 pages at 4 GiB and 10%.
    fn fence_runs(r: &TrackedRegion, bits: &[u64], copied_ahead: bool) -> Result<(), TrackError> {
        let needed = move |run: std::ops::Range<usize>| {
            let mut pages = run.clone();
            let mut whole = (!copied_ahead).then(|| run.clone());
            std::iter::from_fn(move || {
                if !copied_ahead {
                    return whole.take();
                }
                let lo = pages.find(|&p| !r.pages.get(p).released())?;
                let hi = pages
                    .find(|&p| r.pages.get(p).released())
                    .unwrap_or(run.end);
                Some(lo..hi)
            })
        };
        let runs = bitmap::runs(bits, r.npages).flat_map(needed);
        if !Self::fenced_alone(r, runs.clone().count()) {
            return r
                .mem
                .protect(Protection::Tracked)
                .map_err(TrackError::Protect);
        }
        for run in runs {
            r.mem
                .protect_pages(run.start, run.len(), Protection::Tracked)
                .map_err(TrackError::Protect)?;
        }
        Ok(())
    }

    /// Whether `r`'s protection is a fence of ours to lift: not where page protection is the
    /// region's tracking, nor in a forked child (the fence is the parent's).
    fn fence_is_ours(&self, r: &TrackedRegion) -> bool {
        !r.tracked_by_protection() && !self.regions.forked()
    }

    /// Lift the fence over `pages` of `r`, but for an edge page shared with a neighbour
    /// `keep` says must stay fenced.
    fn open_fence(
        r: &TrackedRegion,
        pages: std::ops::Range<usize>,
        keep: impl Fn(&TrackedRegion) -> bool,
    ) {
        let kept = |page: usize| {
            let mut found = false;
            registry::with_regions_containing(r.page_addr(page), |o| {
                found |= !std::ptr::eq(o, r) && keep(o);
            });
            found
        };
        let (lo, hi) = (pages.start, pages.end);
        let lo = lo + usize::from(lo == 0 && kept(0));
        let hi = hi - usize::from(hi == r.npages && hi > lo && kept(r.npages - 1));
        if lo < hi {
            let _ = r.mem.protect_pages(lo, hi - lo, Protection::Open);
        }
    }
}

impl Tracker for UffdAsyncTracker {
    fn backend(&self) -> Backend {
        Backend::UffdAsync
    }

    fn attach(&self, r: &Arc<TrackedRegion>, armed: bool) -> Result<(), TrackError> {
        self.regions.attach(r, armed, &[self.scanner.span()])?;
        r.unarmed.store(!armed, Ordering::SeqCst);
        Ok(())
    }

    fn detach(&self, r: &Arc<TrackedRegion>) -> Result<(), TrackError> {
        self.regions.detach(r)
    }

    fn collect(
        &self,
        r: &TrackedRegion,
        guard: Guard,
        out: &mut Vec<u64>,
        before_rearm: &mut dyn FnMut(&[u64]),
    ) -> Result<(), TrackError> {
        if let Some(done) = self.regions.collect_common(r, out, before_rearm) {
            return done;
        }
        // A fence (async commits) first: from here a write by any other thread traps and
        // waits at the gate, so none lands between the scan and the page states the commit
        // sets. A sync commit's `Check` raises none: whether a write reached a collected page
        // before the commit copied it is asked afterwards (`unwritten_since_collect`), since
        // a whole-region mprotect costs 2-13 ms per 256 MiB each way, most of a small sync
        // checkpoint (docs/benchmarks.md, "The uffd-async fence"). It fences alone the pages
        // the region shares with memory outside it: the commit's own allocations may write
        // there (an unaligned heap buffer's edge pages hold the allocator's headers), which the
        // check would take for a race every time; a write there traps and is decided page by
        // page, after waiting at the gate, and the check leaves those pages out. `Rearm` (a
        // restore) needs none. `FenceWritten` fences after the scan, what it collected:
        // nothing else runs. `FenceWrittenChecked` does too, with the shared edge pages
        // fenced first as under `Check`: the checkpoint then asks whether another thread
        // wrote between the scan and the fence.
        let fence = || match guard {
            Guard::Fence => r
                .mem
                .protect(Protection::Tracked)
                .map_err(TrackError::Protect),
            Guard::Check | Guard::FenceWrittenChecked => {
                Self::fence_pages(r, r.shared_edge_pages())
            }
            Guard::Rearm | Guard::FenceWritten => Ok(()),
        };
        // Without the whole fence the scan passes over an unmapped range silently, where the
        // fence's mprotect would have failed: ask.
        if guard != Guard::Fence && !r.still_mapped() {
            return Err(TrackError::Unmapped);
        }
        let faults_before = r.dirty.faults();
        fence()?;
        // Pages opened through the fence during the last commit, and the bits of a failed
        // commit put back: their pages are written-protected already or reported by the scan.
        // On failure the caller's `release` lifts the fence, keeping an edge page a neighbour
        // tracks by protection fenced (opening the whole region here would not).
        let written = Self::take_written(r, &self.scanner, out, before_rearm)?;
        // This thread's own writes pass the gate. One that landed on a fenced page since the
        // fence (its heap shares a page with a tracked buffer, as `out` may) opened that page
        // with a stale state: fence it again, or other threads' writes to it would reach the
        // version.
        if matches!(guard, Guard::FenceWritten | Guard::FenceWrittenChecked) {
            Self::fence_runs(r, out, guard == Guard::FenceWrittenChecked)?;
        } else if r.dirty.faults() != faults_before {
            fence()?;
        }
        if !Self::take_unarmed(r) && guard != Guard::Rearm {
            r.dirty.count_faults(written);
        }
        Ok(())
    }

    /// Scans without write-protecting: the pages written since the collect are exactly those
    /// the kernel shows writable again.
    fn unwritten_since_collect(&self, r: &TrackedRegion) -> Result<bool, TrackError> {
        if r.tracked_by_protection() {
            return Ok(true);
        }
        self.regions.check_owner()?;
        // Shared edge pages were fenced (`collect`): their writes were decided, not missed.
        let edges = r.shared_edge_pages();
        let mut written = false;
        self.scanner
            .each_written(r, |lo, hi| {
                written |= (lo..hi).any(|p| !edges.contains(&Some(p)));
            })
            .map_err(TrackError::Userfault)?;
        Ok(!written)
    }

    /// Short runs, when copying every one of them leaves the rest few enough to fence
    /// alone: where the whole region is fenced anyway, copying would only add to the stop,
    /// and so it would where the copies cost more than that fence.
    fn copy_ahead_run(&self, r: &TrackedRegion, bits: &[u64], free: usize) -> usize {
        let (mut short_pages, mut long_runs) = (0, 0);
        for run in bitmap::runs(bits, r.npages) {
            match run.len() <= COPY_AHEAD_RUN {
                true => short_pages += run.len(),
                false => long_runs += 1,
            }
        }
        let cheaper = short_pages * FENCED_PAGES_PER_COPY <= r.npages;
        match short_pages > 0 && short_pages <= free && cheaper && Self::fenced_alone(r, long_runs)
        {
            true => COPY_AHEAD_RUN,
            false => 0,
        }
    }

    /// Only writes through the fence (during a commit) do.
    fn sees_every_write(&self) -> bool {
        false
    }

    /// Lifts what the collect raised (the whole fence, or a check's shared edge pages). An
    /// edge page shared with a neighbour that page protection tracks stays fenced: its next
    /// write traps and is marked for both, where opening it would blind the neighbour.
    fn release(&self, r: &TrackedRegion, guard: Guard) {
        if !self.fence_is_ours(r) {
            return;
        }
        let keep = |o: &TrackedRegion| o.tracked_by_protection();
        match guard {
            Guard::Fence | Guard::FenceWritten | Guard::FenceWrittenChecked => {
                Self::open_fence(r, 0..r.npages, keep)
            }
            Guard::Check => {
                for p in r.shared_edge_pages().into_iter().flatten() {
                    Self::open_fence(r, p..p + 1, keep);
                }
            }
            Guard::Rearm => {}
        }
    }

    /// Mid-commit, an edge page shared with any neighbour stays fenced too: the neighbour's
    /// part of the commit may still need it (`release` opens it once the commit ends).
    fn lift(&self, r: &TrackedRegion, pages: std::ops::Range<usize>) {
        Self::open_fence(r, pages, |_| true);
    }

    fn lifts_fence_early(&self, r: &TrackedRegion) -> bool {
        self.fence_is_ours(r)
    }

    /// The dirty bits (pages opened through a fence, bits given back) and what the kernel
    /// shows written, without write-protecting anything.
    fn peek_written(&self, r: &TrackedRegion, out: &mut Vec<u64>) -> Result<(), TrackError> {
        r.dirty.copy_into(out);
        if r.tracked_by_protection() {
            return Ok(());
        }
        self.regions.check_owner()?;
        self.scanner
            .each_written(r, |lo, hi| {
                for p in lo..hi {
                    crate::track::bitmap::set(out, p);
                }
            })
            .map_err(TrackError::Userfault)
    }

    /// The dirty bits of `pages`, and the kernel's written pages among them, write-protected
    /// again in the same scan.
    fn collect_pages(
        &self,
        r: &TrackedRegion,
        pages: std::ops::Range<usize>,
        out: &mut Vec<u64>,
    ) -> Result<(), TrackError> {
        self.regions.collect_pages(r, pages, out, |pages, out| {
            self.scanner.written_in(r, pages, out)
        })
    }

    fn after_restart(&self, r: &TrackedRegion) -> Result<(), TrackError> {
        self.regions.after_restart(r)
    }

    fn disarm(&self, r: &TrackedRegion) -> Result<(), TrackError> {
        self.regions.disarm(r)
    }

    fn handler_intact(&self) -> Result<bool, TrackError> {
        self.regions.fence.handler_intact()
    }
}
