//! What a first write to a tracked page does, whichever mechanism caught it. [`action`] says
//! it by the page's state (AI-Ckpt Algorithm 2: copy aside, wait, or go);
//! [`Protocol::decide`] carries it out for one region; [`first_write`] runs the decision for
//! every region containing the page, then opens the page (with its fault-around run) and
//! marks it dirty. The SIGSEGV handler runs this on the faulting thread and may block; the
//! userfaultfd handler thread runs it for another thread and must not, so it parks the fault
//! and tries again later.

// Unsafe allowed here (lib.rs fences it): the fault path enters and leaves protocols through
// raw pointers, and fills a copy-on-write slot from the application's page.
#![allow(unsafe_code)]

use super::pages::PageState;
use super::{Protocol, C_IN_PROGRESS, C_ORPHANED};
use crate::policy::Access;
use crate::sys::{page_size, thread};
use crate::track::acck;
use crate::track::region::TrackedRegion;
use crate::track::registry;
use std::sync::atomic::Ordering::SeqCst;

/// What a first write to a page does before the page opens, by the page's state: the whole
/// of the decision, in one table ([`action`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// The running commit does not need the page's bytes (any more): record the write and
    /// let it through.
    Open,
    /// The commit still needs the bytes: copy them into a free copy-on-write slot, then let
    /// the write through; with no slot free, wait for the committer.
    CopyAside,
    /// The committer is copying the page right now: wait for it, briefly.
    WaitForCommitter,
    /// Another writer is copying it aside, a memcpy from done: look again.
    LookAgain,
}

/// The first-write action for a page in state `s`.
pub(crate) fn action(s: PageState) -> Action {
    match s {
        PageState::Scheduled => Action::CopyAside,
        PageState::Flushing => Action::WaitForCommitter,
        PageState::Copying => Action::LookAgain,
        PageState::Idle | PageState::Copied | PageState::Taken => Action::Open,
    }
}

/// What a first write must do before its page opens, as [`Protocol::decide`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Go,
    /// Wait for the committer to take the page. `brief`: it is copying it right now.
    Wait {
        brief: bool,
    },
}

impl Protocol {
    /// Algorithm 2's decision for a first write by thread `tid` to `page`, carried out:
    /// copied into a free slot (COW) or not needed by the running commit (AVOIDED/AFTER),
    /// so the page may open; or it must wait for the committer. The write is classified
    /// and counted as soon as its fate is decided (before any waiting), so a commit's
    /// counts are complete when its last page is taken. Deciding again for the same write
    /// counts nothing twice.
    pub fn decide(&self, r: &TrackedRegion, page: usize, tid: u64) -> Decision {
        if self.c[C_ORPHANED].load(SeqCst) != 0 {
            return Decision::Go;
        }
        let wait = |brief| {
            self.record(r, page, Access::Wait);
            if self.may_wait(tid) {
                Decision::Wait { brief }
            } else {
                Decision::Go
            }
        };
        loop {
            match action(r.pages.get(page)) {
                Action::CopyAside => {
                    match self.copy_aside(r, page, self.is_checkpoint_thread(tid)) {
                        Some(true) => return Decision::Go,
                        Some(false) => continue,
                        None => return wait(false),
                    }
                }
                Action::WaitForCommitter => return wait(true),
                Action::LookAgain => thread::yield_now(),
                Action::Open => {
                    self.record(r, page, self.late_access());
                    return Decision::Go;
                }
            }
        }
    }

    /// Copy scheduled `page` into a free copy-on-write slot (COW), `reserve`: one kept for the
    /// checkpoint's own threads if need be. None: no slot is free; Some(false): another
    /// thread changed the page's state first.
    fn copy_aside(&self, r: &TrackedRegion, page: usize, reserve: bool) -> Option<bool> {
        let slot = if reserve {
            self.cow.claim_for_checkpoint()?
        } else {
            self.cow.claim()?
        };
        Some(self.copy_into(r, page, slot, Some(Access::Cow)))
    }

    /// Copy scheduled `page` into `slot`, claimed by the caller, and record `access` for
    /// it. False: another thread changed the page's state first, and the slot is free again.
    /// Signal-safe.
    pub(crate) fn copy_into(
        &self,
        r: &TrackedRegion,
        page: usize,
        slot: usize,
        access: Option<Access>,
    ) -> bool {
        if !r.pages.start_copy(page) {
            self.cow.free(slot);
            return false;
        }
        if let Some(a) = access {
            self.record(r, page, a);
        }
        // SAFETY: the page belongs to a tracked region (mapped, readable) and the slot was
        // claimed by the caller.
        unsafe { self.cow.fill(slot, r.id, page, r.page_addr(page)) };
        r.pages.copied(page);
        true
    }

    /// How a first write to a page the running commit does not need is classified.
    pub(crate) fn late_access(&self) -> Access {
        if self.c[C_IN_PROGRESS].load(SeqCst) != 0 {
            Access::Avoided
        } else {
            Access::After
        }
    }

    /// The pages to open with faulting `page` (already decided), as `lo..hi`: the
    /// contiguous pages around it, within its aligned block of `fault_around` pages, that
    /// the last epoch wrote (they are in, or were taken by, the running or last commit) and
    /// that can be opened now: taken or copied ones as they are, scheduled ones once copied
    /// into a free slot. Iterative codes rewrite the same pages every epoch, so one trap
    /// then serves a block instead of a page; a neighbour that is not written after all is
    /// only stored once more than needed. Each is recorded as first written.
    pub fn open_run(&self, r: &TrackedRegion, page: usize) -> (usize, usize) {
        let k = self.fault_around();
        if k <= 1 {
            return (page, page + 1);
        }
        let block = page - page % k;
        let end = (block + k).min(r.npages);
        let mut hi = page + 1;
        while hi < end && self.take_neighbour(r, hi) {
            hi += 1;
        }
        let mut lo = page;
        while lo > block && self.take_neighbour(r, lo - 1) {
            lo -= 1;
        }
        (lo, hi)
    }

    /// A neighbour opens only if the last epoch wrote it and it can open without waiting.
    fn take_neighbour(&self, r: &TrackedRegion, page: usize) -> bool {
        // A region's first and last page may hold another region's bytes too, whose state
        // this region does not know: those open only when written themselves.
        if page == 0 || page + 1 == r.npages {
            return false;
        }
        // As a write to it would, by the one table, except that an Idle page (not written
        // last epoch) stays closed and nothing waits.
        let state = r.pages.get(page);
        match action(state) {
            Action::Open => {
                if state == PageState::Idle {
                    return false;
                }
                self.record(r, page, self.late_access());
                true
            }
            Action::CopyAside => self.copy_aside(r, page, false) == Some(true),
            Action::WaitForCommitter | Action::LookAgain => false,
        }
    }
}

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
    /// The instruction that wrote, where the mechanism reports it; 0 otherwise.
    fn writer(&self) -> usize {
        0
    }
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

/// Protocols a fault has entered (a page shared by regions of several engines enters each).
struct Entered {
    protocols: [*const Protocol; 8],
    n: usize,
}

enum Enter {
    Yes,
    Gate,
    Full,
}

impl Entered {
    fn enter(&mut self, e: &Protocol, tid: u64, blocking: bool) -> Enter {
        if self.protocols[..self.n].iter().any(|&p| std::ptr::eq(p, e)) {
            return Enter::Yes;
        }
        if self.n == self.protocols.len() {
            return Enter::Full;
        }
        if blocking {
            e.enter();
        } else if !e.try_enter(tid) {
            return Enter::Gate;
        }
        self.protocols[self.n] = e;
        self.n += 1;
        Enter::Yes
    }

    fn add_monitor_ns(&self, ns: u64) {
        for &e in &self.protocols[..self.n] {
            // SAFETY: as in `leave_all`.
            unsafe { (*e).add_monitor_ns(ns) };
        }
    }

    fn leave_all(&self) {
        for &e in &self.protocols[..self.n] {
            // SAFETY: each protocol is owned by its engine, which outlives its regions' faults.
            unsafe { (*e).leave() };
        }
    }
}

/// Handle a first write by thread `tid` at `addr`. Signal-safe when `c` is.
///
/// Every region decides first, and only then is the page opened: a page shared by two
/// regions must not become writable while the second still needs its bytes. The protocols are
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
        protocols: [std::ptr::null(); 8],
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
        match entered.enter(&r.protocol, tid, blocking) {
            Enter::Yes => {}
            Enter::Gate => return stop = Some(Outcome::Gate),
            Enter::Full => return stop = Some(Outcome::Failed),
        }
        let page = (addr - r.base()) / ps;
        if let Decision::Wait { brief } = r.protocol.decide(r, page, tid) {
            if !c.wait(r, page, brief) {
                stop = Some(Outcome::Wait);
            }
        }
    });
    #[cfg(feature = "testing")]
    super::test_pause::point();
    let outcome = match (found, stop) {
        (registry::Lookup::Retry, _) => Outcome::Retry,
        (registry::Lookup::NotOurs, _) => Outcome::NotOurs,
        (registry::Lookup::Tracked, Some(o)) => o,
        (registry::Lookup::Tracked, None) => {
            let shared = regions > 1;
            let mut ok = true;
            registry::with_regions_containing(addr, |r| {
                ok &= open(r, (addr - r.base()) / ps, shared, c)
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
        r.protocol.open_run(r, page)
    };
    let opened = if c.open(r, lo, hi) {
        // Before the bits: whoever sees a page written sees who wrote it.
        r.set_writer(lo, hi, c.writer());
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

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [PageState; 6] = [
        PageState::Idle,
        PageState::Scheduled,
        PageState::Flushing,
        PageState::Copying,
        PageState::Copied,
        PageState::Taken,
    ];

    #[test]
    fn a_first_write_opens_a_page_at_once_exactly_when_the_commit_has_released_it() {
        for s in ALL {
            assert_eq!(action(s) == Action::Open, s.released(), "{s:?}");
        }
        assert_eq!(action(PageState::Scheduled), Action::CopyAside);
        assert_eq!(action(PageState::Flushing), Action::WaitForCommitter);
        assert_eq!(action(PageState::Copying), Action::LookAgain);
    }
}
