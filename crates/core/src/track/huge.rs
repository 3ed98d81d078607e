//! Turning ACCK's released spans into huge pages (ACCK §3.3), off the fault path.
//! `MADV_COLLAPSE` copies 2 MiB per block and may compact memory: too slow for a fault
//! handler that holds the epoch (a checkpoint's gate waits for it) or for the single uffd
//! handler thread. The fault path only queues the span (signal-safe: atomics in ickpt's own
//! memory and a futex wake); a worker thread of the engine collapses it.

use crate::sys::{mem, page_size, thread};
use crate::track::memory::own_mem::OwnSlice;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

/// Spans queued at once; more are dropped (they stay 4 KiB pages, which is only slower).
const SLOTS: usize = 64;
const HUGE: usize = 2 << 20;

const W_HEAD: usize = 0;
const W_TAIL: usize = 1;
const W_COLLAPSED: usize = 2;
const W_STOP: usize = 3;
const W_BUSY: usize = 4;
/// Then (start, len) per slot; len 0 while the slot is empty or being filled.
const W_SLOTS: usize = 5;

pub struct HugeQueue {
    w: OwnSlice<AtomicU64>,
    wake: OwnSlice<AtomicU32>,
}

impl HugeQueue {
    pub fn new() -> io::Result<Self> {
        Ok(HugeQueue {
            w: OwnSlice::new(W_SLOTS + 2 * SLOTS)?,
            wake: OwnSlice::new(1)?,
        })
    }

    pub fn spans(&self) -> [(usize, usize); 2] {
        [self.w.span(), self.wake.span()]
    }

    /// Ask for the 2 MiB-aligned part of `start..end` to become huge pages. Signal-safe.
    pub fn request(&self, start: usize, end: usize) {
        let lo = start.next_multiple_of(HUGE);
        let hi = end & !(HUGE - 1);
        if hi <= lo || page_size() >= HUGE {
            return;
        }
        loop {
            let head = self.w[W_HEAD].load(SeqCst);
            if head - self.w[W_TAIL].load(SeqCst) >= SLOTS as u64 {
                return;
            }
            if self.w[W_HEAD]
                .compare_exchange(head, head + 1, SeqCst, SeqCst)
                .is_ok()
            {
                let s = W_SLOTS + 2 * (head as usize % SLOTS);
                self.w[s].store(lo as u64, SeqCst);
                self.w[s + 1].store((hi - lo) as u64, SeqCst);
                self.wake[0].fetch_add(1, SeqCst);
                thread::futex_wake_all(&self.wake[0]);
                return;
            }
        }
    }

    /// The worker's loop: collapse queued spans until `stop`.
    pub fn run(&self) {
        loop {
            let seen = self.wake[0].load(SeqCst);
            if self.w[W_STOP].load(SeqCst) != 0 {
                return;
            }
            let tail = self.w[W_TAIL].load(SeqCst);
            if tail == self.w[W_HEAD].load(SeqCst) {
                thread::futex_wait(&self.wake[0], seen);
                continue;
            }
            let s = W_SLOTS + 2 * (tail as usize % SLOTS);
            // The producer claimed the slot and is filling it: a few stores away.
            let len = loop {
                match self.w[s + 1].load(SeqCst) {
                    0 => thread::yield_now(),
                    len => break len as usize,
                }
            };
            let start = self.w[s].load(SeqCst) as usize;
            self.w[s + 1].store(0, SeqCst);
            // Busy before the slot is given back, so `wait_idle` never sees an empty queue
            // while a collapse is still running.
            self.w[W_BUSY].store(1, SeqCst);
            self.w[W_TAIL].store(tail + 1, SeqCst);
            let _ = mem::advise(start, len, mem::Advice::HugePages);
            let done = (start..start + len)
                .step_by(HUGE)
                .filter(|&b| mem::advise(b, HUGE, mem::Advice::Collapse).is_ok())
                .count();
            self.w[W_COLLAPSED].fetch_add(done as u64, SeqCst);
            self.w[W_BUSY].store(0, SeqCst);
        }
    }

    pub fn stop(&self) {
        self.w[W_STOP].store(1, SeqCst);
        self.wake[0].fetch_add(1, SeqCst);
        thread::futex_wake_all(&self.wake[0]);
    }

    /// Block until every queued span has been handled (tests, and a caller that wants the
    /// huge pages in place now).
    pub fn wait_idle(&self) {
        while self.w[W_STOP].load(SeqCst) == 0
            && (self.w[W_TAIL].load(SeqCst) != self.w[W_HEAD].load(SeqCst)
                || self.w[W_BUSY].load(SeqCst) != 0)
        {
            std::thread::yield_now();
        }
    }

    /// 2 MiB blocks collapsed into huge pages since the start.
    pub fn collapsed(&self) -> u64 {
        self.w[W_COLLAPSED].load(SeqCst)
    }
}
