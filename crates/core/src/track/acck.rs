//! Coarse-grained monitoring (ACCK, §3.2–3.3). Applications write contiguous runs
//! whose length grows with the allocation, so once the start of a piece of a region is being
//! written, the rest of it (and the pieces after it) will be too: stop trapping there.
//!
//! Each region is cut into 2^n pieces (at least one page each). A piece is potentially hot
//! when more than 80% of its first 10% of pages were written in the epoch. A hot piece is
//! released, with the pieces after it, at the pace 1, 2, 4 … 2^(n−3) pieces (per region, then
//! from 1 again): released pages are opened and marked dirty, so they are stored whole at the
//! next checkpoint whether written or not. `collect` protects everything again, so every piece
//! is monitored anew each epoch. Released 2 MiB-aligned spans are queued to become huge pages
//! (§3.3, `huge.rs`); the kernel splits them back into 4 KiB pages at the first write after
//! the checkpoint, when one page of them changes protection.
//!
//! Releases happen only while no commit runs: a running commit needs its scheduled pages
//! decided one by one. A region's first and last page are never released (they may hold a
//! neighbour's bytes, whose tracking this region cannot speak for).

use crate::track::memory::own_mem::OwnSlice;
use crate::track::protocol::first_write::Catch;
use crate::track::region::TrackedRegion;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// Per-region state, in ickpt's own memory (the fault handler writes it).
pub struct AcckState {
    /// Word 0: pace step; word 1: pages released, since the start; then one bit per piece
    /// released in this epoch.
    w: OwnSlice<AtomicU64>,
    /// The region's own n: the configured one, or less for a region with fewer pages than
    /// 2^n (so that there are 2^n pieces of at least a page each, and the pace fits them).
    n: u32,
    pieces: usize,
    npages: usize,
}

const W_PACE: usize = 0;
const W_RELEASED: usize = 1;
const W_BITS: usize = 2;

impl AcckState {
    /// `n`: log2 of the pieces (0: ACCK off, nothing allocated beyond the counters).
    pub fn new(npages: usize, n: u32) -> io::Result<Self> {
        let n = if n == 0 {
            0
        } else {
            n.min(20).min(npages.max(1).ilog2())
        };
        // A one-page region has nothing to release (its only page is an edge page).
        let pieces = if n == 0 { 0 } else { 1usize << n };
        Ok(AcckState {
            w: OwnSlice::new(W_BITS + pieces.div_ceil(64))?,
            n,
            pieces,
            npages,
        })
    }

    pub fn span(&self) -> (usize, usize) {
        self.w.span()
    }

    /// Pages of piece `i`, as `start..end`.
    fn piece(&self, i: usize) -> (usize, usize) {
        (
            i * self.npages / self.pieces,
            (i + 1) * self.npages / self.pieces,
        )
    }

    fn piece_of(&self, page: usize) -> usize {
        // The largest i with piece(i).0 <= page.
        let mut i = (page * self.pieces) / self.npages;
        while i + 1 < self.pieces && self.piece(i + 1).0 <= page {
            i += 1;
        }
        while self.piece(i).0 > page {
            i -= 1;
        }
        i
    }

    /// Claim piece `i` for release; false if it was released already this epoch.
    fn claim(&self, i: usize) -> bool {
        let bit = 1u64 << (i % 64);
        self.w[W_BITS + i / 64].fetch_or(bit, SeqCst) & bit == 0
    }

    fn released(&self, i: usize) -> bool {
        self.w[W_BITS + i / 64].load(SeqCst) & (1 << (i % 64)) != 0
    }

    /// Pages released (stored whole without a trap per page) since the start.
    pub fn released_pages(&self) -> u64 {
        self.w[W_RELEASED].load(SeqCst)
    }

    /// Start a new epoch: every piece monitored again, the pace from 1.
    pub fn reset(&self) {
        for w in &self.w[W_BITS..] {
            w.store(0, SeqCst);
        }
        self.w[W_PACE].store(0, SeqCst);
    }
}

/// After a first write to `page` of `r` opened it: if that made its piece potentially hot,
/// release the piece and the ones after it at the region's pace. Signal-safe. Returns the
/// pages released.
pub(crate) fn after_write(r: &TrackedRegion, page: usize, c: &mut impl Catch) -> u64 {
    let a = &r.acck;
    if a.pieces == 0 || r.protocol.acck_n() == 0 || r.protocol.committing() {
        return 0;
    }
    let i = a.piece_of(page);
    if a.released(i) {
        return 0;
    }
    let (start, end) = a.piece(i);
    let head = (end - start).div_ceil(10).max(1);
    // Only a write in the piece's first 10% can change whether it is hot.
    if page >= start + head {
        return 0;
    }
    let written = (start..start + head).filter(|&p| r.dirty.is_set(p)).count();
    if written * 10 <= head * 8 {
        return 0;
    }
    // Two writers may find the same piece hot: the one that claims it releases the run.
    if !a.claim(i) {
        return 0;
    }
    // Pace 2^0 … 2^(n−3), then 1 again.
    let steps = a.n.saturating_sub(2).max(1) as u64;
    let step = a.w[W_PACE].fetch_add(1, SeqCst) % steps;
    let last = (i + (1usize << step)).min(a.pieces);
    let mut released = 0u64;
    let (mut run_lo, mut run_hi) = (usize::MAX, 0);
    for q in i..last {
        if q != i && !a.claim(q) {
            continue;
        }
        let (mut lo, mut hi) = a.piece(q);
        lo = lo.max(1);
        hi = hi.min(r.npages - 1);
        if lo >= hi || !c.open(r, lo, hi) {
            continue;
        }
        for p in lo..hi {
            if r.dirty.test_and_set(p) {
                continue;
            }
            released += 1;
        }
        run_lo = run_lo.min(lo);
        run_hi = run_hi.max(hi);
    }
    // Every piece between run_lo and run_hi is open: released now or earlier this epoch.
    if let (true, Some(q)) = (run_lo < run_hi, r.protocol.huge_queue()) {
        q.request(r.page_addr(run_lo), r.page_addr(run_hi));
    }
    a.w[W_RELEASED].fetch_add(released, SeqCst);
    released
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_region_exactly_once() {
        for npages in [2usize, 5, 63, 64, 65, 1000, 65536] {
            let a = AcckState::new(npages, 6).unwrap();
            assert_eq!(a.pieces, 1 << 6u32.min(npages.ilog2()));
            assert!(a.pieces <= npages);
            let mut next = 0;
            for i in 0..a.pieces {
                let (s, e) = a.piece(i);
                assert_eq!(s, next);
                assert!(e > s, "every piece has a page");
                for p in s..e {
                    assert_eq!(a.piece_of(p), i, "npages {npages} page {p}");
                }
                next = e;
            }
            assert_eq!(next, npages);
        }
    }
}
