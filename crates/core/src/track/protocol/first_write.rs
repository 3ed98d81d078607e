//! A first write to a tracked page, whichever mechanism caught it: every region containing
//! the page decides (AI-Ckpt Algorithm 2: copy aside, wait, or go), then the page (with its
//! fault-around run) opens and is marked dirty. The SIGSEGV handler runs this on the faulting
//! thread and may block; the userfaultfd handler thread runs it for another thread and must
//! not, so it parks the fault and tries again later.

// Unsafe allowed here (lib.rs fences it): the fault path enters and leaves epochs through raw
// pointers.
#![allow(unsafe_code)]

use crate::sys::{page_size, thread};
use crate::track::acck;
use crate::track::memory::region::TrackedRegion;
use crate::track::memory::registry;
use crate::track::protocol::{Decision, Epoch};

/// What the mechanism that caught the fault does at the points it differs.
pub(crate) trait Catch {
    /// Whether this thread may sleep (at the gate, or for a page).
    fn blocking(&self) -> bool;
    /// The write must wait until the committer takes `page`. True when it has (blocking);
    /// false to park the fault and try again later.
    fn wait(&mut self, r: &TrackedRegion, page: usize, brief: bool) -> bool;
    /// Make pages `lo..hi` of `r` writable.
    fn open(&mut self, r: &TrackedRegion, lo: usize, hi: usize) -> bool;
    /// Make all of `r` writable (page granularity is lost until the next checkpoint).
    fn open_whole(&mut self, r: &TrackedRegion) -> bool;
    /// Every region has opened and marked the page of `addr`: let the writer go on.
    fn finish(&mut self, _addr: usize) {}
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Decided, opened and marked: the write can be retried.
    Done,
    /// A checkpoint is scheduling: try again once the gate opens.
    Gate,
    /// A page must be taken by the committer first: try again later.
    Wait,
    /// The page could not be opened.
    Failed,
    /// The address was tracked until an unprotect that raced this fault: retry the write.
    Retry,
    NotOurs,
}

/// Epochs a fault has entered (a page shared by regions of several engines enters each).
struct Entered {
    epochs: [*const Epoch; 8],
    n: usize,
}

enum Enter {
    Yes,
    Gate,
    Full,
}

impl Entered {
    fn enter(&mut self, e: &Epoch, tid: u64, blocking: bool) -> Enter {
        if self.epochs[..self.n].iter().any(|&p| std::ptr::eq(p, e)) {
            return Enter::Yes;
        }
        if self.n == self.epochs.len() {
            return Enter::Full;
        }
        if blocking {
            e.enter();
        } else if !e.try_enter(tid) {
            return Enter::Gate;
        }
        self.epochs[self.n] = e;
        self.n += 1;
        Enter::Yes
    }

    fn add_monitor_ns(&self, ns: u64) {
        for &e in &self.epochs[..self.n] {
            // SAFETY: as in `leave_all`.
            unsafe { (*e).add_monitor_ns(ns) };
        }
    }

    fn leave_all(&self) {
        for &e in &self.epochs[..self.n] {
            // SAFETY: each epoch is owned by its engine, which outlives its regions' faults.
            unsafe { (*e).leave() };
        }
    }
}

/// Handle a first write by thread `tid` at `addr`. Signal-safe when `c` is.
///
/// Every region decides first, and only then is the page opened: a page shared by two
/// regions must not become writable while the second still needs its bytes. The epochs are
/// entered once for the whole fault, so no checkpoint can schedule between the decisions and
/// the opening.
///
/// Open first, mark second: if a checkpoint's `collect` (take bits, then re-protect) ran in
/// between, either it re-protects the page after we opened it and our bit lands in the new
/// epoch (the retried write faults again), or it took the bits before we set ours. Marking
/// first would let `collect` take the bit and re-protect before we open the page, leaving it
/// writable with no bit: every later write to it in the epoch would be lost. (The gate makes
/// this moot today; the order keeps it safe without.)
pub(crate) fn first_write(addr: usize, tid: u64, c: &mut impl Catch) -> Outcome {
    let started = thread::monotonic_ns();
    let ps = page_size();
    let mut entered = Entered {
        epochs: [std::ptr::null(); 8],
        n: 0,
    };
    let mut regions = 0usize;
    let mut stop = None;
    let blocking = c.blocking();
    let found = registry::with_regions_containing(addr, |r| {
        if stop.is_some() {
            return;
        }
        regions += 1;
        match entered.enter(&r.epoch, tid, blocking) {
            Enter::Yes => {}
            Enter::Gate => return stop = Some(Outcome::Gate),
            Enter::Full => return stop = Some(Outcome::Failed),
        }
        let page = (addr - r.base) / ps;
        if let Decision::Wait { brief } = r.epoch.decide(r, page, tid) {
            if !c.wait(r, page, brief) {
                stop = Some(Outcome::Wait);
            }
        }
    });
    test_pause::point();
    let outcome = match (found, stop) {
        (registry::Lookup::Retry, _) => Outcome::Retry,
        (registry::Lookup::NotOurs, _) => Outcome::NotOurs,
        (registry::Lookup::Tracked, Some(o)) => o,
        (registry::Lookup::Tracked, None) => {
            let shared = regions > 1;
            let mut ok = true;
            registry::with_regions_containing(addr, |r| {
                ok &= open(r, (addr - r.base) / ps, shared, c)
            });
            if ok {
                c.finish(addr);
                Outcome::Done
            } else {
                Outcome::Failed
            }
        }
    };
    if outcome == Outcome::Done {
        entered.add_monitor_ns(thread::monotonic_ns() - started);
    }
    entered.leave_all();
    outcome
}

/// Open `page` of `r` (with its fault-around run unless the page is shared) and mark it.
fn open(r: &TrackedRegion, page: usize, shared: bool, c: &mut impl Catch) -> bool {
    let (lo, hi) = if shared {
        (page, page + 1)
    } else {
        r.epoch.open_run(r, page)
    };
    let opened = if c.open(r, lo, hi) {
        for p in lo..hi {
            r.dirty.set(p);
        }
        true
    } else {
        let whole = c.open_whole(r);
        if whole {
            r.dirty.set_all();
        }
        whole
    };
    if opened {
        r.dirty.count_fault();
        if !shared {
            acck::after_write(r, page, c);
        }
    }
    opened
}

/// A pause in the first-write path, between its registry lookups, for tests: a handler held
/// there is inside its epochs but outside the registry, the window in which dropping the engine
/// once freed the epoch under it (issue 9). Off unless a test arms it: one atomic load per
/// first write. Signal-safe (atomics and a futex).
#[doc(hidden)]
pub mod test_pause {
    use crate::sys::thread;
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};

    const OFF: u32 = 0;
    const ARMED: u32 = 1;
    const PAUSED: u32 = 2;
    /// The engine being dropped waits for the paused handler.
    const DRAINING: u32 = 3;

    static STATE: AtomicU32 = AtomicU32::new(OFF);

    /// The next first write pauses until [`release`].
    pub fn arm() {
        STATE.store(ARMED, SeqCst);
    }

    pub fn paused() -> bool {
        STATE.load(SeqCst) >= PAUSED
    }

    /// Whether an engine's drop is waiting for the paused handler to leave its epoch.
    pub fn draining() -> bool {
        STATE.load(SeqCst) == DRAINING
    }

    pub fn release() {
        STATE.store(OFF, SeqCst);
        thread::futex_wake_all(&STATE);
    }

    pub(crate) fn point() {
        if STATE.load(SeqCst) == OFF
            || STATE
                .compare_exchange(ARMED, PAUSED, SeqCst, SeqCst)
                .is_err()
        {
            return;
        }
        loop {
            let s = STATE.load(SeqCst);
            if s == OFF {
                return;
            }
            thread::futex_wait(&STATE, s);
        }
    }

    /// An engine is about to wait for handlers inside its epoch.
    pub(crate) fn waiting_for_handlers() {
        let _ = STATE.compare_exchange(PAUSED, DRAINING, SeqCst, SeqCst);
    }
}
