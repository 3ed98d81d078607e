//! The page protocol (AI-Ckpt Algorithms 1–4): what happens to a tracked page from the
//! moment a checkpoint schedules it until the committer has taken it, and what a first write
//! to it does meanwhile. It owns the page states and every transition between them, the
//! copy-on-write pool, the gate that holds writers while a checkpoint schedules, the waits,
//! the order the committer takes pages in, and handing a failed commit's pages back.
//! Trackers (`track/backends`) catch first writes and call in here; the engine schedules and
//! commits through here. Everything the fault path writes lives in ickpt's own mappings.
//!
//! | transition (`PageStates`) | from → to | who | where |
//! |---|---|---|---|
//! | `schedule` / `leave_out` | any → Scheduled / Idle | the checkpoint, gate closed | `schedule.rs` |
//! | `start_copy`, `copied` | Scheduled → Copying → Copied | a first write, a slot free; an async call copying a short run ahead, gate closed | `first_write.rs`, `schedule.rs` (`copy_ahead`) |
//! | `claim` | Scheduled → Flushing | the committer | `committer.rs` |
//! | `taken` | Flushing or Copied → Taken | the committer | `committer.rs` |
//! | `abandon`, then `leave_out` | Scheduled → Idle, then any → Idle | a failed commit | `committer.rs` (`Drain`) |
//!
//! A first write's action by state is `first_write::action`, the whole of that decision.
//! Program sections and pre-copy add no action of their own: a section's twins are copied
//! whole when it starts (`engine/section/twins.rs`), and a page pre-copied ahead of its
//! checkpoint is armed again before it is copied, so a rewrite shows as a written page at the
//! next pass or at the checkpoint, which copy it again (`engine/precopy`).
//!
//! Files: `mod.rs` the shared state (`Protocol`): gate, waits, counters; `pages.rs` the
//! states; `schedule.rs` marking pages for a commit; `first_write.rs` the decision and the
//! fault path across regions; `cow.rs` the copy-on-write pool; `committer.rs` the
//! committer's side.

pub(crate) mod committer;
pub(crate) mod cow;
pub(crate) mod first_write;
pub(crate) mod pages;
pub(crate) mod schedule;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod test_pause;

use crate::policy::Access;
use crate::sys::thread;
use crate::track::huge::HugeQueue;
use crate::track::memory::own_mem::OwnSlice;
use crate::track::region::TrackedRegion;
use cow::CowPool;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

/// Pages writers can publish as waited-for at once; more waiters still wait, unpublished.
const WAITED: usize = 32;
/// Spins (about 10 ns each) a writer waits for a page the committer is copying before it
/// sleeps: several page copies' worth.
const SPINS: u32 = 2000;

/// Futex words.
const F_GATE: usize = 0;
const F_PROGRESS: usize = 1;

/// Counter words.
const C_IN_FLIGHT: usize = 0;
const C_WAITERS: usize = 1;
const C_IN_PROGRESS: usize = 2;
const C_ORDER: usize = 3;
/// The thread running checkpoint code (scheduling, or a synchronous commit), and the async
/// committer thread: they must never wait for a page, which only they could release.
const C_OWNER_TID: usize = 4;
const C_COMMITTER_TID: usize = 5;
const C_POISONED: usize = 6;
const C_COW: usize = 7;
const C_WAIT: usize = 8;
const C_AVOIDED: usize = 9;
const C_AFTER: usize = 10;
const C_WAIT_NS: usize = 11;
/// Pages opened around a faulting one (see `open_run`).
const C_AROUND: usize = 12;
/// Set in a forked child: its copy of a commit has no committer (see `orphan`).
const C_ORPHANED: usize = 13;
/// ACCK: log2 of the pieces a region is cut into, 0 when off; and nanoseconds
/// spent deciding first writes, since the start.
const C_ACCK_N: usize = 14;
const C_MONITOR_NS: usize = 15;
const C_WAITED: usize = 16;
/// Non-zero: regions keep the instruction of each page's last first write (pre-copy's
/// execution context, on backends whose faults report it).
const C_WRITERS: usize = C_WAITED + 2 * WAITED;
const COUNTERS: usize = C_WRITERS + 1;

/// Reopens the gate when dropped.
pub struct GateGuard<'a>(&'a Protocol);

impl Drop for GateGuard<'_> {
    fn drop(&mut self) {
        self.0.futex[F_GATE].store(0, SeqCst);
        thread::futex_wake_all(&self.0.futex[F_GATE]);
    }
}

/// Ends the owner's term when dropped.
pub struct OwnerGuard<'a>(&'a Protocol);

impl Drop for OwnerGuard<'_> {
    fn drop(&mut self) {
        self.0.c[C_OWNER_TID].store(0, SeqCst);
    }
}

/// A writer counted as waiting (see `Protocol::begin_wait`). Plain data, so the userfaultfd
/// handler can keep it in its own mapping.
#[derive(Debug, Clone, Copy)]
pub struct WaitTicket {
    published: Option<usize>,
    started: u64,
}

/// A commit's first writes by access type, and the time writers spent waiting. (AFTER
/// writes come after the commit; `begin_commit` of the next one returns them.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccessCounts {
    pub cow: u64,
    pub wait: u64,
    pub avoided: u64,
    pub wait_ns: u64,
}

/// The protocol's shared state, one per engine, for the engine's lifetime: what the fault
/// path and the committer of every commit share.
pub struct Protocol {
    futex: OwnSlice<AtomicU32>,
    c: OwnSlice<AtomicU64>,
    pub cow: CowPool,
    /// Spans ACCK released, for the engine's worker to turn into huge pages.
    huge: Option<HugeQueue>,
}

impl Protocol {
    /// `fault_around`: a write fault may open up to this many pages (an aligned block) at
    /// once, see [`Protocol::open_run`]; 1 opens only the faulting page.
    /// `acck`: coarse-grained monitoring (ACCK), as log2 of the pieces per region and
    /// whether released spans become huge pages; None monitors every page.
    /// `ahead_bytes`: room to copy pages into ahead of a commit
    /// ([`schedule::ahead_bytes`]).
    pub fn new(
        cow_bytes: usize,
        ahead_bytes: usize,
        fault_around: usize,
        acck: Option<(u32, bool)>,
    ) -> io::Result<Self> {
        let e = Protocol {
            futex: OwnSlice::new(2)?,
            c: OwnSlice::new(COUNTERS)?,
            cow: CowPool::new(cow_bytes, ahead_bytes)?,
            huge: match acck {
                Some((_, true)) => Some(HugeQueue::new()?),
                _ => None,
            },
        };
        e.c[C_AROUND].store(fault_around.max(1) as u64, SeqCst);
        if let Some((n, _)) = acck {
            e.c[C_ACCK_N].store(n.max(1) as u64, SeqCst);
        }
        Ok(e)
    }

    /// Pages a write fault may open at once (see `open_run`).
    fn fault_around(&self) -> usize {
        self.c[C_AROUND].load(SeqCst) as usize
    }

    /// Regions made from now on keep, per page, the instruction that last wrote it first
    /// (`TrackedRegion::writer`): 8 bytes a page, for pre-copy's per-function history.
    pub fn record_writers(&self) {
        self.c[C_WRITERS].store(1, SeqCst);
    }

    pub fn records_writers(&self) -> bool {
        self.c[C_WRITERS].load(SeqCst) != 0
    }

    /// ACCK's log2 of pieces per region; 0: every page is monitored.
    pub fn acck_n(&self) -> u32 {
        self.c[C_ACCK_N].load(SeqCst) as u32
    }

    /// Where ACCK queues released spans for huge pages; None when that is off.
    pub(crate) fn huge_queue(&self) -> Option<&HugeQueue> {
        self.huge.as_ref()
    }

    /// Count time spent handling a first write. Signal-safe.
    pub fn add_monitor_ns(&self, ns: u64) {
        self.c[C_MONITOR_NS].fetch_add(ns, SeqCst);
    }

    /// Nanoseconds spent handling first writes since the engine started.
    pub fn monitor_ns(&self) -> u64 {
        self.c[C_MONITOR_NS].load(SeqCst)
    }

    pub fn spans(&self) -> Vec<(usize, usize)> {
        let mut v = vec![self.futex.span(), self.c.span()];
        v.extend(self.cow.spans());
        v.extend(self.huge.iter().flat_map(|h| h.spans()));
        v
    }

    // ---- fault handler side (all signal-safe) ----

    /// Enter the handler's critical part; waits while a checkpoint is scheduling, except on
    /// the thread doing the scheduling (its own heap writes may land on protected pages).
    pub fn enter(&self) {
        let me = thread::tid();
        while !self.try_enter(me) {
            thread::futex_wait(&self.futex[F_GATE], 1);
        }
    }

    /// Enter on behalf of thread `tid` unless the gate holds it (a fault-handling thread
    /// must not sleep at the gate: the owner's own faults may be queued behind).
    pub fn try_enter(&self, tid: u64) -> bool {
        self.c[C_IN_FLIGHT].fetch_add(1, SeqCst);
        if self.futex[F_GATE].load(SeqCst) == 0 || tid == self.c[C_OWNER_TID].load(SeqCst) {
            return true;
        }
        self.c[C_IN_FLIGHT].fetch_sub(1, SeqCst);
        false
    }

    pub fn leave(&self) {
        self.c[C_IN_FLIGHT].fetch_sub(1, SeqCst);
    }

    /// Record the epoch's first write of `page` and count it (later writers of the same
    /// page in the epoch are not counted again).
    pub(crate) fn record(&self, r: &TrackedRegion, page: usize, access: Access) {
        let order = self.c[C_ORDER].fetch_add(1, SeqCst) + 1;
        if r.pages.record(page, access, order) {
            let c = match access {
                Access::Cow => C_COW,
                Access::Wait => C_WAIT,
                Access::Avoided => C_AVOIDED,
                Access::After | Access::Untouched => C_AFTER,
            };
            self.c[c].fetch_add(1, SeqCst);
        }
    }

    /// First writes the running commit found behind itself so far (AVOIDED: the page was
    /// taken already).
    pub(crate) fn avoided_so_far(&self) -> u64 {
        self.c[C_AVOIDED].load(SeqCst)
    }

    /// Block until the committer has taken `page`. `brief`: it is copying the page right
    /// now, a memcpy from done, so spin a little before sleeping: a futex sleep and wake-up
    /// costs tens of microseconds on a VM, and a writer following the committer through the
    /// same pages (the adaptive order makes them meet) would pay it on every page.
    pub fn wait_for(&self, r: &TrackedRegion, page: usize, brief: bool) {
        let started = thread::monotonic_ns();
        let taken = || r.pages.get(page).released();
        if brief {
            for _ in 0..SPINS {
                if taken() {
                    self.c[C_WAIT_NS].fetch_add(thread::monotonic_ns() - started, SeqCst);
                    return;
                }
                std::hint::spin_loop();
            }
        }
        let ticket = self.begin_wait(r.id, page);
        self.sleep_until(taken);
        self.end_wait(ticket);
    }

    /// Count a writer as waiting for `page` from now on, and ask the committer to take the
    /// page next (if a published slot is free). `end_wait` with the ticket when it is taken.
    pub fn begin_wait(&self, region: u64, page: usize) -> WaitTicket {
        let ticket = WaitTicket {
            published: self.publish_waited(region, page),
            started: thread::monotonic_ns(),
        };
        self.c[C_WAITERS].fetch_add(1, SeqCst);
        ticket
    }

    pub fn end_wait(&self, t: WaitTicket) {
        if let Some(i) = t.published {
            self.c[C_WAITED + 2 * i].store(0, SeqCst);
        }
        // Before leaving the waiters, so the commit's end (which waits for them) counts it.
        self.c[C_WAIT_NS].fetch_add(thread::monotonic_ns() - t.started, SeqCst);
        self.c[C_WAITERS].fetch_sub(1, SeqCst);
    }

    fn publish_waited(&self, region: u64, page: usize) -> Option<usize> {
        for i in 0..WAITED {
            let key = &self.c[C_WAITED + 2 * i];
            // The page word first (claims the entry), then the region: the committer reads
            // the region after seeing the page, and re-checks state before using either.
            if key
                .compare_exchange(0, page as u64 + 1, SeqCst, SeqCst)
                .is_ok()
            {
                self.c[C_WAITED + 2 * i + 1].store(region, SeqCst);
                return Some(i);
            }
        }
        None
    }

    /// In a child forked while this protocol was in use (atfork handler; signal-safe). The
    /// child has none of the parent's other threads: no committer will take its scheduled
    /// pages and no checkpoint will reopen the gate. Its writes must not wait for them (the
    /// child cannot commit into its parent's store anyway; `ickpt_init` there starts over).
    pub fn orphan(&self) {
        self.c[C_ORPHANED].store(1, SeqCst);
        self.c[C_IN_FLIGHT].store(0, SeqCst);
        self.c[C_IN_PROGRESS].store(0, SeqCst);
        self.futex[F_GATE].store(0, SeqCst);
    }

    /// Wait until no commit is running (used before giving up page granularity).
    pub fn wait_until_committed(&self) {
        if !self.may_wait(thread::tid()) {
            return;
        }
        self.c[C_WAITERS].fetch_add(1, SeqCst);
        self.sleep_until(|| self.c[C_IN_PROGRESS].load(SeqCst) == 0);
        self.c[C_WAITERS].fetch_sub(1, SeqCst);
    }

    /// Whether this thread may wait for the committer. Not the checkpoint's own threads:
    /// only they could release the page, so the write goes through and the commit fails
    /// instead of deadlocking (docs/design.md, "committer faults"). Not a forked child's
    /// copy of a commit: no committer came along.
    fn may_wait(&self, me: u64) -> bool {
        if self.c[C_ORPHANED].load(SeqCst) != 0 {
            return false;
        }
        if self.is_checkpoint_thread(me) {
            self.c[C_POISONED].store(1, SeqCst);
            return false;
        }
        true
    }

    /// The thread checkpointing, or the committer.
    fn is_checkpoint_thread(&self, tid: u64) -> bool {
        tid == self.c[C_OWNER_TID].load(SeqCst) || tid == self.c[C_COMMITTER_TID].load(SeqCst)
    }

    /// Sleep on the progress futex until `done`; the caller is counted in the waiters, so
    /// every change that could make `done` true wakes it (`page_done`).
    fn sleep_until(&self, done: impl Fn() -> bool) {
        loop {
            let seen = self.futex[F_PROGRESS].load(SeqCst);
            if done() {
                return;
            }
            thread::futex_wait(&self.futex[F_PROGRESS], seen);
        }
    }

    // ---- checkpoint side (ordinary code) ----

    /// Make the calling thread the owner until the guard drops: its own faults pass the
    /// gate and never wait for a page (until its checkpoint call returns it may be the only
    /// thread able to release one).
    pub fn become_owner(&self) -> OwnerGuard<'_> {
        self.c[C_OWNER_TID].store(thread::tid(), SeqCst);
        OwnerGuard(self)
    }

    /// Hold new faults at the gate (except the owner's) and wait for handlers already past
    /// it: while closed, page states and protections change without any writer deciding on
    /// a stale view. The gate reopens when the guard drops, whatever happens in between.
    pub fn close_gate(&self) -> GateGuard<'_> {
        self.futex[F_GATE].store(1, SeqCst);
        while self.c[C_IN_FLIGHT].load(SeqCst) != 0 {
            std::thread::yield_now();
        }
        GateGuard(self)
    }

    /// Wait for fault handlers still inside this protocol. Once every region of the engine has
    /// left the registry no handler can enter it, but one may still be leaving: `first_write`
    /// leaves after its registry lookups, so the registry's own wait does not cover it.
    pub fn wait_for_handlers(&self) {
        #[cfg(feature = "testing")]
        test_pause::waiting_for_handlers();
        while self.c[C_IN_FLIGHT].load(SeqCst) != 0 {
            std::thread::yield_now();
        }
    }

    /// Start a commit (gate closed): counts restart for its writers. Returns the first
    /// writes since the previous commit ended (its AFTER, plus any write that was being
    /// classified against it as it ended).
    pub fn begin_commit(&self) -> u64 {
        let take = |i: usize| self.c[i].swap(0, SeqCst);
        let after = take(C_AFTER) + take(C_COW) + take(C_WAIT) + take(C_AVOIDED);
        take(C_WAIT_NS);
        self.c[C_ORDER].store(0, SeqCst);
        self.c[C_POISONED].store(0, SeqCst);
        self.cow.take_peak_bytes();
        self.c[C_IN_PROGRESS].store(1, SeqCst);
        after
    }

    /// The thread that will take the pages (a synchronous commit runs on the caller).
    pub fn set_committer(&self, tid: u64) {
        self.c[C_COMMITTER_TID].store(tid, SeqCst);
    }

    /// Every scheduled page has been taken: later first writes are AFTER, not AVOIDED.
    /// Returns the commit's counts and its peak copy-on-write bytes. Waits for writers still
    /// waking from their wait, so their time is counted.
    pub fn end_commit(&self) -> (AccessCounts, u64) {
        self.c[C_IN_PROGRESS].store(0, SeqCst);
        self.c[C_COMMITTER_TID].store(0, SeqCst);
        self.page_done();
        while self.c[C_WAITERS].load(SeqCst) != 0 {
            std::thread::yield_now();
        }
        let take = |i: usize| self.c[i].swap(0, SeqCst);
        (
            AccessCounts {
                cow: take(C_COW),
                wait: take(C_WAIT),
                avoided: take(C_AVOIDED),
                wait_ns: take(C_WAIT_NS),
            },
            self.cow.take_peak_bytes(),
        )
    }

    /// A page left SCHEDULED/FLUSHING/COPIED for TAKEN: wake writers waiting on pages.
    pub fn page_done(&self) {
        self.futex[F_PROGRESS].fetch_add(1, SeqCst);
        if self.c[C_WAITERS].load(SeqCst) != 0 {
            thread::futex_wake_all(&self.futex[F_PROGRESS]);
        }
    }

    /// Whether a commit is running (its scheduled pages are not all taken yet).
    pub fn committing(&self) -> bool {
        self.c[C_IN_PROGRESS].load(SeqCst) != 0
    }

    pub fn has_waiters(&self) -> bool {
        self.c[C_WAITERS].load(SeqCst) != 0
    }

    /// Pages writers are waiting for, as (region id, page).
    pub fn waited_pages(&self, mut f: impl FnMut(u64, usize)) {
        for i in 0..WAITED {
            let p = self.c[C_WAITED + 2 * i].load(SeqCst);
            if p != 0 {
                f(self.c[C_WAITED + 2 * i + 1].load(SeqCst), p as usize - 1);
            }
        }
    }

    /// True if a checkpoint thread had to let a write through a page it could not copy.
    pub fn poisoned(&self) -> bool {
        self.c[C_POISONED].load(SeqCst) != 0
    }
}
