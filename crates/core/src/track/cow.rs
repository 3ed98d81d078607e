//! The bounded copy-on-write buffer (AI-Ckpt §3.1): preallocated page slots a faulting
//! writer copies a scheduled page into, so it can go on writing before the committer has
//! taken the page. Claiming and filling are lock-free and signal-safe; the committer, a
//! single thread, drains filled slots in the order they were filled.

use super::own_mem::{OwnBytes, OwnSlice};
use crate::sys::page_size;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// Control words: where claiming starts looking, ring tail (writers), ring head
/// (committer), slots in use, most slots in use since the last reset.
const HINT: usize = 0;
const TAIL: usize = 1;
const HEAD: usize = 2;
const IN_USE: usize = 3;
const PEAK: usize = 4;

pub struct CowPool {
    slots: usize,
    mem: OwnBytes,
    /// One bit per slot, set while the slot is claimed.
    used: OwnSlice<AtomicU64>,
    /// Filled slots (slot + 1; 0 = empty) in fill order. At most `slots` are ever filled and
    /// not yet released, so the ring never overruns.
    ring: OwnSlice<AtomicU64>,
    /// Region id and page of each filled slot.
    owner: OwnSlice<AtomicU64>,
    ctl: OwnSlice<AtomicU64>,
}

impl CowPool {
    /// A pool of `bytes / page_size` slots (0 allowed: every conflict then waits).
    pub fn new(bytes: usize) -> io::Result<Self> {
        let slots = bytes / page_size();
        Ok(CowPool {
            slots,
            mem: OwnBytes::new(slots * page_size())?,
            used: OwnSlice::new(slots.div_ceil(64))?,
            ring: OwnSlice::new(slots)?,
            owner: OwnSlice::new(2 * slots)?,
            ctl: OwnSlice::new(5)?,
        })
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Take a free slot. Signal-safe; O(words of the bitmap) in the worst case, usually O(1)
    /// since the search starts where the last claim succeeded.
    pub fn claim(&self) -> Option<usize> {
        let words = self.used.len();
        if words == 0 {
            return None;
        }
        let start = self.ctl[HINT].load(SeqCst) as usize;
        for k in 0..words {
            let w = (start + k) % words;
            let valid = super::bitmap::full_word(self.slots, w);
            let mut cur = self.used[w].load(SeqCst);
            loop {
                let free = !cur & valid;
                if free == 0 {
                    break;
                }
                let bit = 1u64 << free.trailing_zeros();
                match self.used[w].compare_exchange(cur, cur | bit, SeqCst, SeqCst) {
                    Ok(_) => {
                        self.ctl[HINT].store(w as u64, SeqCst);
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
        // SAFETY: the slot lies inside our mapping (slot < slots) and is ours alone until
        // released; the caller guarantees `src` is a readable page.
        unsafe {
            std::ptr::copy_nonoverlapping(src as *const u8, self.mem.as_ptr().add(slot * ps), ps)
        };
        self.owner[2 * slot].store(region, SeqCst);
        self.owner[2 * slot + 1].store(page as u64, SeqCst);
        let pos = self.ctl[TAIL].fetch_add(1, SeqCst) as usize % self.slots;
        self.ring[pos].store(slot as u64 + 1, SeqCst);
    }

    /// Give back a claimed slot: never filled, or popped and read. Signal-safe.
    pub fn free(&self, slot: usize) {
        self.used[slot / 64].fetch_and(!(1u64 << (slot % 64)), SeqCst);
        self.ctl[IN_USE].fetch_sub(1, SeqCst);
    }

    /// The oldest filled slot: (slot, region id, page). Committer only. None when no slot is
    /// ready (a writer may still be between queueing and publishing; it shows up soon).
    pub fn pop(&self) -> Option<(usize, u64, usize)> {
        if self.slots == 0 {
            return None;
        }
        let head = self.ctl[HEAD].load(SeqCst) as usize;
        let cell = &self.ring[head % self.slots];
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
        assert!(slot < self.slots);
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

    #[test]
    fn slots_are_claimed_once_and_drained_in_fill_order() {
        let ps = page_size();
        let pool = CowPool::new(3 * ps + 100).unwrap();
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
    fn an_empty_pool_never_hands_out_a_slot() {
        let pool = CowPool::new(0).unwrap();
        assert!(pool.claim().is_none());
        assert!(pool.pop().is_none());
    }
}
