//! The bounded copy-on-write buffer (AI-Ckpt §3.1): preallocated page slots a faulting
//! writer copies a scheduled page into, so it can go on writing before the committer has
//! taken the page. Claiming and filling are lock-free and signal-safe; the committer, a
//! single thread, drains filled slots in the order they were filled. Beside it, slots an
//! async call copies pages into ahead of its commit (`schedule::copy_ahead`), which no
//! writer ever claims.

// Unsafe allowed here (lib.rs fences it): the pool's slots are raw memory the fault path fills
// from application pages.
#![allow(unsafe_code)]

use crate::sys::page_size;
use crate::track::memory::own_mem::{OwnBytes, OwnSlice};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// Control words: where claiming starts looking, ring tail (writers), ring head
/// (committer), slots in use, most slots in use since the last reset, whether the slots are
/// backed, where claiming ahead starts looking, slots ahead in use, and one past the highest
/// slot ahead claimed since they were last given back.
const HINT: usize = 0;
const TAIL: usize = 1;
const HEAD: usize = 2;
const IN_USE: usize = 3;
const PEAK: usize = 4;
/// Non-zero once the slots are backed (`back`).
const BACKED: usize = 5;
const AHEAD_HINT: usize = 6;
const AHEAD_IN_USE: usize = 7;
const AHEAD_HIGH: usize = 8;
const CONTROL_WORDS: usize = 9;

/// Slots beyond `cow_bytes` that only the checkpoint's own threads may claim. The thread
/// checkpointing and the committer can never wait for a page (only they could release it), so
/// without a slot their write to a scheduled page aborts the commit. They write such pages
/// only where protected memory shares a page with their own data: the frames of the calling
/// thread when a region lies on its stack, small heap buffers next to ickpt's allocations.
/// With `cow_bytes = 0` that aborted every commit of a program protecting stack memory.
const RESERVED: usize = 16;

pub struct CowPool {
    /// Slots ordinary writers may claim (`cow_bytes / page_size`).
    slots: usize,
    /// The first slot ahead: the ordinary slots, then the reserved ones, then those ahead.
    ahead: usize,
    /// All slots.
    total: usize,
    mem: OwnBytes,
    /// One bit per slot, set while the slot is claimed.
    used: OwnSlice<AtomicU64>,
    /// Filled slots (slot + 1; 0 = empty) in fill order. At most `total` are ever filled and
    /// not yet released, so the ring never overruns.
    ring: OwnSlice<AtomicU64>,
    /// Region id and page of each filled slot.
    owner: OwnSlice<AtomicU64>,
    ctl: OwnSlice<AtomicU64>,
}

impl CowPool {
    /// A pool of `bytes / page_size` slots (0 allowed: every conflict then waits),
    /// [`RESERVED`] more for the checkpoint's own threads, and `ahead_bytes / page_size` to
    /// copy pages into ahead of a commit. Slots take memory only once touched.
    pub fn new(bytes: usize, ahead_bytes: usize) -> io::Result<Self> {
        let slots = bytes / page_size();
        let ahead = slots + RESERVED;
        let total = ahead + ahead_bytes / page_size();
        Ok(CowPool {
            slots,
            ahead,
            total,
            mem: OwnBytes::scratch(total * page_size())?,
            used: OwnSlice::new(total.div_ceil(64))?,
            ring: OwnSlice::new(total)?,
            owner: OwnSlice::new(2 * total)?,
            ctl: OwnSlice::new(CONTROL_WORDS)?,
        })
    }

    /// Slots ordinary writers may claim.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Slots ahead free now.
    pub fn ahead_free(&self) -> usize {
        (self.total - self.ahead).saturating_sub(self.ctl[AHEAD_IN_USE].load(SeqCst) as usize)
    }

    /// Back every slot with memory now, once, off the path of a checkpoint call: an async
    /// call copies pages ahead into slots (`schedule::copy_ahead`), where the first touch of
    /// each costs a page fault, as much again as the copy or more (3.1 µs a page on the
    /// project's VM, `scripts/first-touch-cost.c`). What slots hold is left as it is, so this may run while writers fill
    /// some. Of the slots ahead, only the first `ahead` are backed, and at once given to
    /// the kernel to take back when memory runs short ([`CowPool::give_back_ahead`]). Best
    /// effort: a kernel without `MADV_POPULATE_WRITE` backs them at first touch instead.
    pub fn back(&self, ahead: usize) {
        if self.ctl[BACKED].swap(1, SeqCst) == 0 {
            let ps = page_size();
            let (lo, _) = self.mem.span();
            let ahead = ahead.min(self.total - self.ahead);
            let len = (self.ahead + ahead) * ps;
            let _ = crate::sys::mem::advise(lo, len, crate::sys::mem::Advice::PopulateWrite);
            self.ctl[AHEAD_HIGH].fetch_max((self.ahead + ahead) as u64, SeqCst);
            self.give_back_ahead();
        }
    }

    /// Let the kernel take back the memory of the slots ahead filled (or backed) since the
    /// last call, once none is in use (after a commit): it reclaims them only when memory
    /// runs short, and until then the next call's copies find them backed. Best effort.
    pub fn give_back_ahead(&self) {
        if self.ctl[AHEAD_IN_USE].load(SeqCst) != 0 {
            return;
        }
        let high = self.ctl[AHEAD_HIGH].swap(self.ahead as u64, SeqCst) as usize;
        if high > self.ahead {
            let ps = page_size();
            let lo = self.mem.as_ptr() as usize + self.ahead * ps;
            // SAFETY: the slots ahead are this pool's own memory, none is in use (checked
            // above; only the checkpointing thread claims them, and it waits for this
            // commit), and a slot is always filled before it is read.
            let _ = unsafe { crate::sys::mem::discard_lazily(lo, (high - self.ahead) * ps) };
        }
    }

    /// Take a free slot. Signal-safe; O(words of the bitmap) in the worst case, usually O(1)
    /// since the search starts where the last claim succeeded.
    pub fn claim(&self) -> Option<usize> {
        self.claim_in(0, self.slots, HINT)
    }

    /// Take a free slot for the checkpointing thread or the committer: an ordinary one, or
    /// one of the reserve.
    pub fn claim_for_checkpoint(&self) -> Option<usize> {
        self.claim()
            .or_else(|| self.claim_in(self.slots, self.ahead, HINT))
    }

    /// Take a free slot ahead, the lowest first once none is in use, so that successive
    /// calls reuse the same backed memory. For the checkpointing thread alone.
    pub fn claim_ahead(&self) -> Option<usize> {
        if self.ctl[AHEAD_IN_USE].load(SeqCst) == 0 {
            self.ctl[AHEAD_HINT].store((self.ahead / 64) as u64, SeqCst);
        }
        let slot = self.claim_in(self.ahead, self.total, AHEAD_HINT)?;
        self.ctl[AHEAD_IN_USE].fetch_add(1, SeqCst);
        self.ctl[AHEAD_HIGH].fetch_max(slot as u64 + 1, SeqCst);
        Some(slot)
    }

    /// Claim a slot in `lo..hi`, looking from the word that control word `hint_at` names on.
    fn claim_in(&self, lo: usize, hi: usize, hint_at: usize) -> Option<usize> {
        if lo == hi {
            return None;
        }
        let (first, words) = (lo / 64, hi.div_ceil(64) - lo / 64);
        let hint = (self.ctl[hint_at].load(SeqCst) as usize).clamp(first, first + words - 1);
        for k in 0..words {
            let w = first + (hint - first + k) % words;
            let valid =
                crate::track::bitmap::full_word(hi, w) & !crate::track::bitmap::full_word(lo, w);
            let mut cur = self.used[w].load(SeqCst);
            loop {
                let free = !cur & valid;
                if free == 0 {
                    break;
                }
                let bit = 1u64 << free.trailing_zeros();
                match self.used[w].compare_exchange(cur, cur | bit, SeqCst, SeqCst) {
                    Ok(_) => {
                        self.ctl[hint_at].store(w as u64, SeqCst);
                        let n = self.ctl[IN_USE].fetch_add(1, SeqCst) + 1;
                        self.ctl[PEAK].fetch_max(n, SeqCst);
                        return Some(w * 64 + free.trailing_zeros() as usize);
                    }
                    Err(now) => cur = now,
                }
            }
        }
        None
    }

    /// Copy the page at `src` into claimed `slot` and queue it for the committer.
    /// Signal-safe (memcpy and atomics).
    ///
    /// # Safety
    /// `src` must be a readable page of a tracked region; `slot` must have been claimed by
    /// the caller and not filled yet.
    pub unsafe fn fill(&self, slot: usize, region: u64, page: usize, src: usize) {
        let ps = page_size();
        // SAFETY: the slot lies inside our mapping (slot < total, reserved and ahead slots included) and is ours alone until
        // released; the caller guarantees `src` is a readable page.
        unsafe {
            std::ptr::copy_nonoverlapping(src as *const u8, self.mem.as_ptr().add(slot * ps), ps)
        };
        self.owner[2 * slot].store(region, SeqCst);
        self.owner[2 * slot + 1].store(page as u64, SeqCst);
        let pos = self.ctl[TAIL].fetch_add(1, SeqCst) as usize % self.total;
        self.ring[pos].store(slot as u64 + 1, SeqCst);
    }

    /// Give back a claimed slot: never filled, or popped and read. Signal-safe.
    pub fn free(&self, slot: usize) {
        self.used[slot / 64].fetch_and(!(1u64 << (slot % 64)), SeqCst);
        self.ctl[IN_USE].fetch_sub(1, SeqCst);
        if slot >= self.ahead {
            self.ctl[AHEAD_IN_USE].fetch_sub(1, SeqCst);
        }
    }

    /// The oldest filled slot: (slot, region id, page). Committer only. None when no slot is
    /// ready (a writer may still be between queueing and publishing; it shows up soon).
    pub fn pop(&self) -> Option<(usize, u64, usize)> {
        let head = self.ctl[HEAD].load(SeqCst) as usize;
        let cell = &self.ring[head % self.total];
        let v = cell.load(SeqCst);
        if v == 0 {
            return None;
        }
        cell.store(0, SeqCst);
        self.ctl[HEAD].store(head as u64 + 1, SeqCst);
        let slot = v as usize - 1;
        Some((
            slot,
            self.owner[2 * slot].load(SeqCst),
            self.owner[2 * slot + 1].load(SeqCst) as usize,
        ))
    }

    /// The bytes of a popped slot, valid until it is freed.
    pub fn bytes(&self, slot: usize) -> &[u8] {
        let ps = page_size();
        assert!(slot < self.total);
        // SAFETY: in bounds (asserted); a popped slot is written by nobody until freed.
        unsafe { std::slice::from_raw_parts(self.mem.as_ptr().add(slot * ps), ps) }
    }

    /// Bytes of the most slots in use at once since the last call; restarts from now.
    pub fn take_peak_bytes(&self) -> u64 {
        let now = self.ctl[IN_USE].load(SeqCst);
        self.ctl[PEAK].swap(now, SeqCst) * page_size() as u64
    }

    pub fn bytes_limit(&self) -> u64 {
        (self.slots * page_size()) as u64
    }

    pub fn spans(&self) -> [(usize, usize); 5] {
        [
            self.mem.span(),
            self.used.span(),
            self.ring.span(),
            self.owner.span(),
            self.ctl.span(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of `pool`'s mapping resident now.
    fn resident(pool: &CowPool) -> usize {
        let (lo, hi) = pool.mem.span();
        let mut vec = vec![0u8; (hi - lo) / page_size()];
        // SAFETY: the span is our live mapping, and `vec` has a byte per page of it.
        let rc = unsafe { libc::mincore(lo as *mut libc::c_void, hi - lo, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", io::Error::last_os_error());
        vec.iter().filter(|&&b| b & 1 != 0).count()
    }

    /// Backing the slots leaves a filled one as it was, and makes every slot resident: the
    /// next copies into them fault no more.
    #[test]
    fn backing_the_slots_keeps_what_they_hold() {
        let ps = page_size();
        let pool = CowPool::new(48 * ps, 0).unwrap();
        let src = vec![5u8; ps];
        let a = pool.claim().unwrap();
        // SAFETY: `src` is a readable page's worth of bytes; the slot was claimed above.
        unsafe { pool.fill(a, 1, 2, src.as_ptr() as usize) };
        assert!(resident(&pool) < 48 + RESERVED);
        pool.back(0);
        assert_eq!(resident(&pool), 48 + RESERVED);
        let (s, _, _) = pool.pop().unwrap();
        assert!(pool.bytes(s).iter().all(|&x| x == 5));
    }

    #[test]
    fn slots_are_claimed_once_and_drained_in_fill_order() {
        let ps = page_size();
        let pool = CowPool::new(3 * ps + 100, 0).unwrap();
        assert_eq!(pool.slots(), 3);
        let src: Vec<u8> = (0..3 * ps).map(|i| (i / ps) as u8 + 1).collect();
        let a = pool.claim().unwrap();
        let b = pool.claim().unwrap();
        let c = pool.claim().unwrap();
        assert!(pool.claim().is_none(), "only three slots");
        assert!(a != b && b != c && a != c);
        // SAFETY: `src` holds three readable pages' worth of bytes; slots claimed above.
        unsafe {
            pool.fill(b, 7, 11, src.as_ptr() as usize + ps);
            pool.fill(a, 7, 10, src.as_ptr() as usize);
        }
        pool.free(c);
        let (s, id, page) = pool.pop().unwrap();
        assert_eq!((s, id, page), (b, 7, 11));
        assert!(pool.bytes(s).iter().all(|&x| x == 2));
        pool.free(s);
        let (s, _, page) = pool.pop().unwrap();
        assert_eq!((s, page), (a, 10));
        assert!(pool.bytes(s).iter().all(|&x| x == 1));
        pool.free(s);
        assert!(pool.pop().is_none());
        assert_eq!(pool.take_peak_bytes(), 3 * ps as u64);
        assert!(pool.claim().is_some(), "released slots are reusable");
    }

    #[test]
    fn an_empty_pool_keeps_its_reserve_for_the_checkpoint() {
        let pool = CowPool::new(0, 0).unwrap();
        assert!(pool.claim().is_none());
        assert!(pool.pop().is_none());
        let reserved: Vec<usize> = (0..RESERVED)
            .map(|_| pool.claim_for_checkpoint().unwrap())
            .collect();
        assert!(pool.claim_for_checkpoint().is_none());
        assert!(
            pool.claim().is_none(),
            "ordinary writers never get the reserve"
        );
        pool.free(reserved[3]);
        assert_eq!(pool.claim_for_checkpoint(), Some(reserved[3]));
    }

    #[test]
    fn the_checkpoint_takes_ordinary_slots_before_the_reserve() {
        let ps = page_size();
        let pool = CowPool::new(70 * ps, 0).unwrap();
        let mut got: Vec<usize> = (0..70).map(|_| pool.claim().unwrap()).collect();
        assert!(pool.claim().is_none());
        got.extend((0..RESERVED).map(|_| pool.claim_for_checkpoint().unwrap()));
        got.sort_unstable();
        assert_eq!(got, (0..70 + RESERVED).collect::<Vec<_>>());
    }

    /// Slots ahead are claimed by nobody else, lowest first once all are free, and counted
    /// apart; given back, their memory may be reclaimed, and they are claimed again from
    /// the lowest.
    #[test]
    fn slots_ahead_are_apart_and_reused_from_the_lowest() {
        let ps = page_size();
        let pool = CowPool::new(2 * ps, 3 * ps).unwrap();
        assert_eq!(pool.ahead_free(), 3);
        let ahead: Vec<usize> = (0..3).map(|_| pool.claim_ahead().unwrap()).collect();
        assert_eq!(ahead, [2 + RESERVED, 3 + RESERVED, 4 + RESERVED]);
        assert!(pool.claim_ahead().is_none());
        assert_eq!(pool.ahead_free(), 0);
        let mut others: Vec<usize> = std::iter::from_fn(|| pool.claim_for_checkpoint()).collect();
        others.sort_unstable();
        assert_eq!(others, (0..2 + RESERVED).collect::<Vec<_>>());
        let src = vec![9u8; ps];
        // SAFETY: `src` is a readable page's worth of bytes; the slot was claimed above.
        unsafe { pool.fill(ahead[1], 4, 5, src.as_ptr() as usize) };
        pool.free(ahead[0]);
        pool.free(ahead[2]);
        assert_eq!(pool.ahead_free(), 2);
        pool.give_back_ahead();
        let (s, id, page) = pool.pop().unwrap();
        assert_eq!((s, id, page), (ahead[1], 4, 5));
        assert!(
            pool.bytes(s).iter().all(|&x| x == 9),
            "a slot in use is kept"
        );
        pool.free(s);
        pool.give_back_ahead();
        assert_eq!(pool.claim_ahead(), Some(2 + RESERVED));
    }
}
