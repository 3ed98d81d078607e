//! Per-page state of one region for the commit protocol (AI-Ckpt Algorithms 1–3), and how
//! each page was first written in the current epoch (for the next flush order).
//! Both live in ickpt's own mappings: the fault handler updates them.

use crate::policy::Access;
use crate::track::memory::own_mem::OwnSlice;
use std::io;
use std::sync::atomic::{
    AtomicU32, AtomicU64, AtomicU8,
    Ordering::{Release, SeqCst},
};

/// Where a page stands in the commit protocol. Every change of state is one of the named
/// transitions of [`PageStates`]; the table in `protocol/mod.rs` says who makes each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PageState {
    /// Not part of the running commit (nor of the last one).
    Idle = 0,
    /// In the running commit, still only in application memory.
    Scheduled = 1,
    /// The committer is copying it out of application memory (PAGE_INPROGRESS).
    Flushing = 2,
    /// A faulting writer is copying it into a copy-on-write slot.
    Copying = 3,
    /// Its bytes are in a copy-on-write slot the committer has not taken yet.
    Copied = 4,
    /// Taken by the running or last commit (PAGE_PROCESSED): it was written last epoch.
    Taken = 5,
}

impl PageState {
    #[inline]
    fn from_code(c: u8) -> PageState {
        match c {
            1 => PageState::Scheduled,
            2 => PageState::Flushing,
            3 => PageState::Copying,
            4 => PageState::Copied,
            5 => PageState::Taken,
            _ => PageState::Idle,
        }
    }

    /// Whether the running commit no longer needs the page read-only: a write may go on.
    pub fn released(self) -> bool {
        matches!(self, PageState::Idle | PageState::Copied | PageState::Taken)
    }
}

/// The access type from the low bits of an access word.
fn access_of(c: u32) -> Access {
    match c {
        1 => Access::Cow,
        2 => Access::Wait,
        3 => Access::Avoided,
        4 => Access::After,
        _ => Access::Untouched,
    }
}

/// Access word: order of the first write in the epoch above the low 3 bits, access type below.
const TYPE_BITS: u32 = 3;
const MAX_ORDER: u64 = (u32::MAX >> TYPE_BITS) as u64;

pub struct PageStates {
    state: OwnSlice<AtomicU8>,
    access: OwnSlice<AtomicU32>,
    /// One bit a page, set where the page may hold a first-write record or a state other
    /// than Idle: scheduling visits those and the written ones, and skips the rest, Idle
    /// with no record, 64 at a time, so that it costs the pages written and not the pages
    /// tracked (visiting all 82,000 pages of a 256 MiB process takes 0.45 ms of its stop).
    /// Set by a first record and by `schedule`, the one way out of Idle: every later state
    /// (copying, copied, flushing, taken) is the scheduled page's, whose bit stays set until
    /// the next scheduling visits it.
    touched: OwnSlice<AtomicU64>,
}

impl PageStates {
    /// States in scratch memory: a whole-process checkpoint leaves them out, as the restart
    /// clears them (`clear`), and a commit changes most of their pages (32 of the 440 pages
    /// of ickpt's own state that changed between two checkpoints of a 256 MiB process).
    pub fn new(npages: usize) -> io::Result<Self> {
        Ok(PageStates {
            state: OwnSlice::scratch(npages)?,
            access: OwnSlice::scratch(npages)?,
            touched: OwnSlice::scratch(npages.div_ceil(64))?,
        })
    }

    /// Where `page` stands now. Signal-safe.
    #[inline]
    pub fn get(&self, page: usize) -> PageState {
        PageState::from_code(self.state[page].load(SeqCst))
    }

    #[inline]
    fn set(&self, page: usize, to: PageState) {
        self.state[page].store(to as u8, SeqCst);
    }

    /// Say that `page` may hold a record or a state other than Idle. Signal-safe.
    #[inline]
    fn touch(&self, page: usize) {
        self.touched[page / 64].fetch_or(1 << (page % 64), SeqCst);
    }

    /// Pages `64 * word ..` that may hold a record or a state other than Idle, one bit each,
    /// cleared: the caller visits each of them now (a record made meanwhile sets its bit
    /// again, for the next scheduling).
    #[inline]
    pub(in crate::track::protocol) fn take_touched(&self, word: usize) -> u64 {
        self.touched[word].swap(0, SeqCst)
    }

    #[inline]
    fn change(&self, page: usize, from: PageState, to: PageState) -> bool {
        self.state[page]
            .compare_exchange(from as u8, to as u8, SeqCst, SeqCst)
            .is_ok()
    }

    // ---- scheduling (gate closed) ----

    /// The commit being scheduled stores `page`.
    #[inline]
    pub(in crate::track::protocol) fn schedule(&self, page: usize) {
        self.set(page, PageState::Scheduled);
        self.touch(page);
    }

    /// The commit being scheduled does not store `page` (or the commit was abandoned).
    ///
    /// A release store, not a sequentially consistent one (a locked instruction on x86): it
    /// is made with the gate closed, which no writer passes before the gate's reopening
    /// (itself sequentially consistent) publishes it, or by a failed commit after every
    /// page still Scheduled was abandoned, when a writer reading Idle or the state before
    /// opens the page alike. After a full version every page is left out at the next
    /// checkpoint: 65,536 stores at 256 MiB, 0.25 ms of its stop.
    #[inline]
    pub(in crate::track::protocol) fn leave_out(&self, page: usize) {
        self.state[page].store(PageState::Idle as u8, Release);
    }

    /// A failed commit gives up `page` if it is still Scheduled, so no writer can start
    /// copying it aside from now on.
    #[inline]
    pub(in crate::track::protocol) fn abandon(&self, page: usize) {
        self.change(page, PageState::Scheduled, PageState::Idle);
    }

    // ---- a first write (signal-safe) ----

    /// A writer claims scheduled `page` to copy it aside. False: someone changed it first.
    #[inline]
    pub(in crate::track::protocol) fn start_copy(&self, page: usize) -> bool {
        self.change(page, PageState::Scheduled, PageState::Copying)
    }

    /// The writer's copy of `page` is in its slot.
    #[inline]
    pub(in crate::track::protocol) fn copied(&self, page: usize) {
        self.set(page, PageState::Copied);
    }

    // ---- the committer ----

    /// The committer claims scheduled `page` to copy it from application memory. False:
    /// a writer copied it aside, or it was taken by another route, first.
    #[inline]
    pub(in crate::track::protocol) fn claim(&self, page: usize) -> bool {
        self.change(page, PageState::Scheduled, PageState::Flushing)
    }

    /// The committer has the bytes of `page` (claimed, or from its slot).
    #[inline]
    pub(in crate::track::protocol) fn taken(&self, page: usize) {
        self.set(page, PageState::Taken);
    }

    /// Record the epoch's first write to `page`, `order`-th first write of the epoch.
    /// Later writers of the same page leave the first record alone. Signal-safe.
    #[inline]
    pub(in crate::track::protocol) fn record(
        &self,
        page: usize,
        access: Access,
        order: u64,
    ) -> bool {
        let word = ((order.min(MAX_ORDER) as u32) << TYPE_BITS) | access as u32;
        let first = self.access[page]
            .compare_exchange(0, word, SeqCst, SeqCst)
            .is_ok();
        if first {
            self.touch(page);
        }
        first
    }

    /// The epoch's record for `page` (type, order), cleared for the next epoch.
    #[inline]
    pub(in crate::track::protocol) fn take_access(&self, page: usize) -> (Access, u32) {
        let a = &self.access[page];
        if a.load(SeqCst) == 0 {
            return (Access::Untouched, 0);
        }
        let w = a.swap(0, SeqCst);
        (access_of(w & ((1 << TYPE_BITS) - 1)), w >> TYPE_BITS)
    }

    /// The pages `64 * word ..` the ended commit took that hold no record go back to Idle,
    /// their touched bits cleared, so the next scheduling passes them by. A first write
    /// recorded meanwhile keeps its page's bit, or sets it again: the bit is looked at once
    /// more after it is cleared. For trackers none of whose writes reach ickpt between
    /// commits, where Taken tells no fault anything Idle would not.
    pub(in crate::track::protocol) fn idle_taken(&self, word: usize) {
        let (lo, hi) = (word * 64, (word * 64 + 64).min(self.state.len()));
        let touched = self.touched[word].load(SeqCst);
        let mut idled = 0u64;
        for page in lo..hi {
            let bit = 1u64 << (page - lo);
            if touched & bit != 0
                && self.access[page].load(SeqCst) == 0
                && self.change(page, PageState::Taken, PageState::Idle)
            {
                idled |= bit;
            }
        }
        if idled == 0 {
            return;
        }
        self.touched[word].fetch_and(!idled, SeqCst);
        let recorded = (lo..hi)
            .filter(|&page| idled & (1 << (page - lo)) != 0 && self.access[page].load(SeqCst) != 0)
            .fold(0u64, |m, page| m | 1 << (page - lo));
        if recorded != 0 {
            self.touched[word].fetch_or(recorded, SeqCst);
        }
    }

    /// Every page Idle with no record: no commit is running and none ran in this process
    /// (a restart brought the states back as they stood when a checkpoint began). Not
    /// while a commit may run.
    pub(crate) fn clear(&self) {
        for w in 0..self.touched.len() {
            self.take_touched(w);
        }
        for page in 0..self.state.len() {
            self.set(page, PageState::Idle);
            self.access[page].store(0, SeqCst);
        }
    }

    pub fn spans(&self) -> [(usize, usize); 3] {
        [self.state.span(), self.access.span(), self.touched.span()]
    }
}

#[cfg(test)]
mod tests {
    use super::PageState::{self, *};
    use super::PageStates;
    use crate::policy::Access;

    const ALL: [PageState; 6] = [Idle, Scheduled, Flushing, Copying, Copied, Taken];

    /// A whole-process checkpoint leaves the states out (the restart clears them).
    #[test]
    fn the_states_are_scratch() {
        let s = PageStates::new(100_000).unwrap();
        let mut spans = Vec::new();
        crate::sys::own_spans::spans(&mut spans);
        for (start, end) in s.spans() {
            assert!(spans.contains(&(start, end, true)), "{start:#x}-{end:#x}");
        }
    }

    /// Each named transition from each state: the state it leaves, and what a conditional one
    /// answers (None for the unconditional ones). The table in `protocol/mod.rs` says who
    /// makes each; this is what each does, whatever state it meets.
    type Step = fn(&PageStates, usize) -> Option<bool>;

    fn expected(t: &str, from: PageState) -> (PageState, Option<bool>) {
        match (t, from) {
            ("schedule", _) => (Scheduled, None),
            ("leave_out", _) => (Idle, None),
            ("abandon", Scheduled) => (Idle, None),
            ("abandon", s) => (s, None),
            ("start_copy", Scheduled) => (Copying, Some(true)),
            ("start_copy", s) => (s, Some(false)),
            ("copied", _) => (Copied, None),
            ("claim", Scheduled) => (Flushing, Some(true)),
            ("claim", s) => (s, Some(false)),
            ("taken", _) => (Taken, None),
            _ => unreachable!("{t}"),
        }
    }

    #[test]
    fn a_page_given_a_record_or_a_state_but_idle_is_touched_until_taken() {
        let p = PageStates::new(130).unwrap();
        assert_eq!(
            (0..3).map(|w| p.take_touched(w)).collect::<Vec<_>>(),
            [0, 0, 0]
        );
        p.schedule(1);
        assert!(p.record(64, Access::Cow, 1));
        // A second record of the page changes nothing.
        assert!(!p.record(64, Access::Wait, 2));
        // Every state but Idle comes from Scheduled, so the page stays touched through them.
        p.schedule(129);
        p.copied(129);
        p.schedule(63);
        assert!(p.claim(63));
        p.taken(63);
        assert_eq!(p.take_touched(0), 1 << 1 | 1 << 63);
        assert_eq!(p.take_touched(1), 1);
        assert_eq!(p.take_touched(2), 1 << 1);
        // Taken means cleared; leaving a page out or abandoning it touches nothing.
        p.leave_out(5);
        p.abandon(1);
        assert_eq!(
            (0..3).map(|w| p.take_touched(w)).collect::<Vec<_>>(),
            [0, 0, 0]
        );
        // Cleared: Idle, no record, nothing touched.
        p.schedule(7);
        assert!(p.record(8, Access::Cow, 3));
        p.clear();
        assert_eq!((p.get(7), p.take_access(8)), (Idle, (Access::Untouched, 0)));
        assert_eq!(p.take_touched(0), 0);
    }

    /// After a commit: taken pages without a record go Idle and untouched; a taken page
    /// with a record (a write during the commit), and pages in any other state, keep their
    /// state and their touched bit, for the next scheduling to visit.
    #[test]
    fn taken_pages_without_a_record_go_idle_and_untouched() {
        let p = PageStates::new(70).unwrap();
        for page in [0, 3, 64, 69] {
            p.schedule(page);
            assert!(p.claim(page));
            p.taken(page);
        }
        assert!(p.record(3, Access::Cow, 1));
        p.schedule(10);
        p.schedule(65);
        p.copied(65);
        p.idle_taken(0);
        p.idle_taken(1);
        assert_eq!(
            [0, 3, 10, 64, 65, 69].map(|page| p.get(page)),
            [Idle, Taken, Scheduled, Idle, Copied, Idle]
        );
        assert_eq!(p.take_touched(0), 1 << 3 | 1 << 10);
        assert_eq!(p.take_touched(1), 1 << 1);
    }

    #[test]
    fn every_transition_from_every_state_does_what_the_table_says() {
        let steps: [(&str, Step); 7] = [
            ("schedule", |p, i| {
                p.schedule(i);
                None
            }),
            ("leave_out", |p, i| {
                p.leave_out(i);
                None
            }),
            ("abandon", |p, i| {
                p.abandon(i);
                None
            }),
            ("start_copy", |p, i| Some(p.start_copy(i))),
            ("copied", |p, i| {
                p.copied(i);
                None
            }),
            ("claim", |p, i| Some(p.claim(i))),
            ("taken", |p, i| {
                p.taken(i);
                None
            }),
        ];
        let p = PageStates::new(2).unwrap();
        for (name, step) in steps {
            for from in ALL {
                p.set(1, from);
                p.set(0, Idle);
                let answer = step(&p, 1);
                let (to, said) = expected(name, from);
                assert_eq!((p.get(1), answer), (to, said), "{name} from {from:?}");
                assert_eq!(p.get(0), Idle, "{name} from {from:?} touched another page");
            }
        }
    }

    #[test]
    fn the_first_record_of_an_epoch_stands_until_taken() {
        let p = PageStates::new(1).unwrap();
        assert_eq!(p.take_access(0), (Access::Untouched, 0));
        assert!(p.record(0, Access::Wait, 7));
        assert!(
            !p.record(0, Access::Cow, 9),
            "a later writer replaced the first record"
        );
        assert_eq!(p.take_access(0), (Access::Wait, 7));
        assert_eq!(
            p.take_access(0),
            (Access::Untouched, 0),
            "taken records are cleared"
        );
        for a in [Access::Cow, Access::Wait, Access::Avoided, Access::After] {
            assert!(p.record(0, a, u64::MAX));
            assert_eq!(p.take_access(0), (a, super::MAX_ORDER as u32), "{a:?}");
        }
    }
}
