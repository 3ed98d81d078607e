//! The committer's side of the page protocol (AI-Ckpt Algorithms 3 and 4): the pages one
//! commit stores, the order it takes them in, taking each exactly once, and, whatever
//! happens, releasing every page so no writer waits forever. Pages a commit collected but
//! did not store go back to their regions' dirty bits here and nowhere else.

use super::{AccessCounts, Protocol};
use crate::sys::thread;
use crate::track::memory::bitmap;
use crate::track::protocol::pages::PageState;
use crate::track::region::TrackedRegion;
use crate::track::{Guard, Tracker};
use std::sync::Arc;

/// One region's part in a commit.
pub(crate) struct Scheduled {
    pub tr: Arc<TrackedRegion>,
    /// The dirty pages collected for this version (given back if the commit fails).
    pub bits: Vec<u64>,
    /// Store every page (full version, or the region's first).
    pub whole: bool,
    /// How its collect kept other threads' writes out (`Check`: ask after the copy).
    pub guard: Guard,
}

/// The region `id` of a commit's `regions` (sorted by id, as `Selector::new` wants them).
pub(crate) fn scheduled(regions: &[Scheduled], id: u64) -> Option<usize> {
    regions.binary_search_by_key(&id, |r| r.tr.id).ok()
}

/// Pages whose dirty bits were collected but whose bytes were not stored go back to the
/// region, so the next checkpoint stores them: after a failed collect, a checkpoint that
/// could not be scheduled, or a commit that did not commit. (Trackers leave a failed
/// collect's bits in `out` for this.)
pub(crate) fn give_back(tr: &TrackedRegion, bits: &[u64]) {
    tr.dirty.merge(bits);
}

/// One page of `tr` goes back to its dirty bits: the pre-copier did not copy it, or gave up
/// a copy (`engine::precopy`).
pub(crate) fn give_back_page(tr: &TrackedRegion, page: usize) {
    tr.dirty.set(page);
}

/// Where the committer takes a page's bytes from.
pub(crate) enum Take {
    /// From application memory, as (region index, page): it is Flushing.
    Memory(usize, usize),
    /// From a copy-on-write slot, as (slot, region index, page).
    Slot(usize, usize, usize),
}

impl Take {
    /// The page taken, as (region index, page).
    pub fn page(&self) -> (usize, usize) {
        match *self {
            Take::Memory(ri, page) | Take::Slot(_, ri, page) => (ri, page),
        }
    }
}

/// Algorithm 4: the waited page, then copied pages, then the adaptive priority, then the
/// remaining pages by address. Each step is O(1) amortised: cursors only move forward and a
/// page that was taken by another route fails its claim and is skipped.
pub(crate) struct Selector<'a> {
    regions: &'a [Scheduled],
    /// The regions' ids, sorted as `regions` (by id): waited and copied pages name theirs.
    ids: Vec<u64>,
    priority: Vec<(u32, usize)>,
    next_priority: usize,
    by_address: Vec<usize>,
    region: usize,
    page: usize,
}

impl<'a> Selector<'a> {
    /// `regions` sorted by id; `priority`: pages the adaptive order takes before the rest,
    /// as (region index, page).
    pub fn new(regions: &'a [Scheduled], priority: Vec<(u32, usize)>) -> Self {
        let mut by_address: Vec<usize> = (0..regions.len()).collect();
        by_address.sort_unstable_by_key(|&i| regions[i].tr.base());
        Selector {
            regions,
            ids: regions.iter().map(|r| r.tr.id).collect(),
            priority,
            next_priority: 0,
            by_address,
            region: 0,
            page: 0,
        }
    }

    /// The next page to take, claimed. None: only pages a writer is still copying aside are
    /// left (a memcpy away), or none at all.
    pub fn next(&mut self, p: &Protocol) -> Option<Take> {
        let (regions, ids) = (self.regions, &self.ids);
        let claim = |ri: usize, page: usize| regions[ri].tr.pages.claim(page);
        if p.has_waiters() {
            let mut found = None;
            p.waited_pages(|id, page| {
                if found.is_none() {
                    if let Ok(ri) = ids.binary_search(&id) {
                        if page < regions[ri].tr.npages && claim(ri, page) {
                            found = Some(Take::Memory(ri, page));
                        }
                    }
                }
            });
            if found.is_some() {
                return found;
            }
        }
        if let Some((slot, id, page)) = p.cow.pop() {
            let ri = ids
                .binary_search(&id)
                .expect("a copied page belongs to a region of the running commit");
            return Some(Take::Slot(slot, ri, page));
        }
        while let Some(&(ri, page)) = self.priority.get(self.next_priority) {
            self.next_priority += 1;
            if claim(ri as usize, page) {
                return Some(Take::Memory(ri as usize, page));
            }
        }
        while let Some(&ri) = self.by_address.get(self.region) {
            let r = &regions[ri];
            let next = if r.whole {
                (self.page < r.tr.npages).then_some(self.page)
            } else {
                bitmap::next_set(&r.bits, self.page, r.tr.npages)
            };
            match next {
                Some(page) => {
                    self.page = page + 1;
                    if claim(ri, page) {
                        return Some(Take::Memory(ri, page));
                    }
                }
                None => {
                    self.region += 1;
                    self.page = 0;
                }
            }
        }
        None
    }
}

/// Most chunks a region's fence is lifted in. Each lift is one mprotect, and lifts out of
/// address order split the region's mapping up to twice per chunk: this bounds what a
/// commit adds to the process's mappings (vm.max_map_count is 65530 by default).
const LIFT_CHUNKS: usize = 256;
/// Fewest pages a chunk holds (a batch's worth): a lift costs a system call and, per page,
/// about what the fence cost to raise.
const LIFT_MIN_PAGES: usize = 64;
/// First writes found behind the committer (AVOIDED) before it starts lifting: a lift takes
/// the address-space lock the application's own faults need, so it only pays where the
/// application writes behind the committer (measured in docs/benchmarks.md, "The fence
/// lifted behind the committer": traps halve where a loop follows the committer; run-time
/// differences were within the VM's noise).
const LIFT_AFTER_AVOIDED: u64 = 64;

/// The fence lifted behind the committer. A fenced region opens chunk by chunk as soon as
/// the commit has taken every page of the chunk it stores, rather than all at once at its
/// end: writes there then cost the tracker's own first write (uffd-async: the kernel's
/// async fault) instead of a trap and a decision, while the commit runs on. Chunks that
/// store nothing open at the start; the others once the application has been seen writing
/// behind the committer ([`LIFT_AFTER_AVOIDED`]). Writes that pass a lifted chunk are not
/// seen, so the adaptive order learns nothing from them (they count as written after the
/// commit, unordered). Only for regions whose fence is not their tracking
/// ([`Tracker::lifts_fence_early`]).
pub(crate) struct LiftBehind<'a> {
    regions: &'a [Scheduled],
    protocol: &'a Protocol,
    tracker: &'a dyn Tracker,
    /// Per region, as `regions`: pages per chunk and each chunk's pages still to take, or
    /// [`LIFTED`] (empty: the region's fence is lifted at the end only). A chunk at 0 is
    /// complete and still fenced, until `armed`.
    chunks: Vec<(usize, Vec<u32>)>,
    armed: bool,
}

/// A chunk of [`LiftBehind`] whose fence is lifted.
const LIFTED: u32 = u32::MAX;

impl<'a> LiftBehind<'a> {
    /// Counts what each chunk of `regions` has to take and lifts the chunks with nothing
    /// to take. Allocates: call before taking pages.
    pub fn start(
        regions: &'a [Scheduled],
        protocol: &'a Protocol,
        tracker: &'a dyn Tracker,
    ) -> Self {
        let chunks: Vec<(usize, Vec<u32>)> = regions
            .iter()
            .map(|r| {
                let n = r.tr.npages;
                if !r.guard.fences() || !tracker.lifts_fence_early(&r.tr) {
                    return (0, Vec::new());
                }
                let size = n.div_ceil(LIFT_CHUNKS).max(LIFT_MIN_PAGES);
                let mut left = vec![0u32; n.div_ceil(size)];
                if r.whole {
                    for (c, l) in left.iter_mut().enumerate() {
                        *l = chunk_range(size, c, n).len() as u32;
                    }
                } else {
                    let mut page = 0;
                    while let Some(p) = bitmap::next_set(&r.bits, page, n) {
                        left[p / size] += 1;
                        page = p + 1;
                    }
                }
                (size, left)
            })
            .collect();
        let mut lift = LiftBehind {
            regions,
            protocol,
            tracker,
            chunks,
            armed: false,
        };
        lift.lift_complete();
        lift
    }

    /// Lift every complete chunk still fenced, consecutive ones in one call (each takes the
    /// address space's lock).
    fn lift_complete(&mut self) {
        for (r, (size, left)) in self.regions.iter().zip(&mut self.chunks) {
            let mut c = 0;
            while c < left.len() {
                if left[c] != 0 {
                    c += 1;
                    continue;
                }
                let first = c;
                while c < left.len() && left[c] == 0 {
                    left[c] = LIFTED;
                    c += 1;
                }
                self.tracker
                    .lift(&r.tr, first * *size..(c * *size).min(r.tr.npages));
            }
        }
    }

    /// Page `page` of region `ri` is taken: its chunk is complete if it was the chunk's
    /// last, and lifted once the application has been seen writing behind the committer
    /// (asked when a chunk completes, not per page: the counter is shared with writers).
    pub fn taken(&mut self, ri: usize, page: usize) {
        let (size, left) = &mut self.chunks[ri];
        if left.is_empty() {
            return;
        }
        let c = page / *size;
        // Each scheduled page is taken once; a miscount must keep the fence, never lift early.
        let counted = left[c] != 0 && left[c] != LIFTED;
        debug_assert!(counted, "page {page} taken twice, or never scheduled");
        if !counted {
            return;
        }
        left[c] -= 1;
        if left[c] != 0 {
            return;
        }
        if self.armed {
            left[c] = LIFTED;
            let tr = &self.regions[ri].tr;
            self.tracker.lift(tr, chunk_range(*size, c, tr.npages));
        } else if self.protocol.avoided_so_far() >= LIFT_AFTER_AVOIDED {
            self.armed = true;
            self.lift_complete();
        }
    }
}

/// Pages of chunk `c` of `size` pages, in a region of `n`.
fn chunk_range(size: usize, c: usize, n: usize) -> std::ops::Range<usize> {
    c * size..((c + 1) * size).min(n)
}

impl Protocol {
    /// The committer has the bytes of `page` (copied from memory or from its slot): the
    /// page is released, and writers waiting for it go on.
    pub(crate) fn taken(&self, r: &TrackedRegion, page: usize) {
        r.pages.taken(page);
        self.page_done();
    }
}

/// Ends a commit however it ends. Once every page is taken, `end_commit` ends it; if the
/// commit unwinds half-way, dropping this releases every page it still held (so no writer
/// waits forever) and ends it. Unless the version was committed, it gives the collected
/// pages back.
pub(crate) struct Drain<'a> {
    regions: &'a [Scheduled],
    protocol: &'a Protocol,
    tracker: &'a dyn Tracker,
    pages_released: bool,
    committed: bool,
}

impl<'a> Drain<'a> {
    pub fn new(regions: &'a [Scheduled], protocol: &'a Protocol, tracker: &'a dyn Tracker) -> Self {
        Drain {
            regions,
            protocol,
            tracker,
            pages_released: false,
            committed: false,
        }
    }

    /// Every page is taken: end the commit, and release the regions to their tracker.
    /// Returns the commit's counts and its peak copy-on-write bytes.
    pub fn end_commit(&mut self) -> (AccessCounts, u64) {
        self.pages_released = true;
        self.release()
    }

    fn release(&self) -> (AccessCounts, u64) {
        let ended = self.protocol.end_commit();
        for r in self.regions {
            self.tracker.release(&r.tr, r.guard);
        }
        ended
    }

    /// The version is committed: its pages are stored, nothing goes back.
    pub fn committed(&mut self) {
        self.committed = true;
    }
}

impl Drop for Drain<'_> {
    fn drop(&mut self) {
        if !self.pages_released {
            // No slot may be left in the ring for the next commit. First no page stays
            // Scheduled, so no writer starts copying one aside from here on (waiting page by
            // page alone let a writer claim a page already passed); then the writers between
            // their Copying claim and Copied finish and queue their slots; then the ring is
            // drained.
            for r in self.regions {
                for page in 0..r.tr.npages {
                    r.tr.pages.abandon(page);
                }
            }
            for r in self.regions {
                for page in 0..r.tr.npages {
                    while r.tr.pages.get(page) == PageState::Copying {
                        thread::yield_now();
                    }
                }
            }
            while let Some((slot, _, _)) = self.protocol.cow.pop() {
                self.protocol.cow.free(slot);
            }
            for r in self.regions {
                leave_out_all(&r.tr);
            }
            self.release();
        }
        if !self.committed {
            for r in self.regions {
                give_back(&r.tr, &r.bits);
            }
        }
    }
}

/// A commit has ended, on a tracker none of whose writes reach ickpt between commits
/// (uffd-async): the pages it took go back to Idle now, on the committer thread, rather than
/// at the next call (after a full version that is every page: 65,536 visits at 256 MiB). Not
/// a region page protection tracks: its faults find Taken neighbours to open with them.
pub(crate) fn idle_taken(regions: &[Scheduled]) {
    for r in regions.iter().filter(|r| !r.tr.tracked_by_protection()) {
        for word in 0..r.tr.npages.div_ceil(64) {
            r.tr.pages.idle_taken(word);
        }
    }
}

/// Every page of `tr` out of the commit (it was abandoned): Idle.
fn leave_out_all(tr: &TrackedRegion) {
    for page in 0..tr.npages {
        tr.pages.leave_out(page);
    }
}

/// A checkpoint that failed or raced while scheduling (gate closed): nothing was scheduled
/// after all. Every page of `all` goes back to Idle, the collected pages (`collected`, and
/// `failed`, what a failing collect had taken) go back to their regions, and the commit
/// ends. Release the collected regions to their tracker once the gate is open.
pub(crate) fn unschedule<'a>(
    p: &Protocol,
    all: impl Iterator<Item = &'a TrackedRegion>,
    collected: &[Scheduled],
    failed: Option<(&TrackedRegion, &[u64])>,
) {
    for tr in all {
        leave_out_all(tr);
    }
    for r in collected {
        give_back(&r.tr, &r.bits);
    }
    if let Some((tr, bits)) = failed {
        give_back(tr, bits);
    }
    // Slots filled while scheduling (pages copied ahead, the checkpointing thread's own
    // write to a scheduled page): nothing takes them now.
    while let Some((slot, _, _)) = p.cow.pop() {
        p.cow.free(slot);
    }
    p.end_commit();
}
