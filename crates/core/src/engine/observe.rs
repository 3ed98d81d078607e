//! What a running engine reports: its statistics, and state that callers and tests wait on.

use super::{precopy, Engine, Stats};
use crate::track::TrackedRegion;

impl Engine {
    pub fn stats(&self) -> Stats {
        let mut st = self.lock();
        self.poll(&mut st);
        let mut s = st.stats.clone();
        s.regions = st.regions.len() as u64;
        s.protected_bytes = st.regions.values().map(|r| r.tr.user_len as u64).sum();
        let sum = |f: fn(&TrackedRegion) -> u64| st.regions.values().map(|r| f(&r.tr)).sum::<u64>();
        s.faults = sum(|r| r.faults()) + st.stats.faults_of_removed;
        s.backend = self.backend().as_str();
        s.monitor_time = std::time::Duration::from_nanos(self.protocol.monitor_ns());
        s.acck_released_pages =
            sum(|r| r.acck_released_pages()) + st.stats.acck_released_of_removed;
        s.acck_huge_spans = self.protocol.huge_queue().map_or(0, |q| q.collapsed());
        s.regions_by_protection = sum(|r| r.tracked_by_protection() as u64);
        if let Some(t) = st.precopy.as_ref().map(|p| p.totals) {
            s.precopy_passes = t.passes;
            s.precopy_pages = t.pages;
            s.precopy_conflicts = t.conflicts;
            s.precopy_copies = t.copies;
            s.precopy_rewritten_bytes = t.rewritten_bytes;
        }
        s
    }

    /// Block until the spans adaptive granularity released so far are huge pages (or the
    /// kernel refused). Collapsing runs on a thread of ickpt's; this is for callers (and
    /// tests) that want it done now.
    pub fn wait_huge_pages(&self) {
        if self.forked() {
            return; // the worker stayed with the parent
        }
        if let Some(q) = self.protocol.huge_queue() {
            q.wait_idle();
        }
    }

    /// Whether application threads are blocked right now waiting for the committer to take
    /// a page (diagnostics, and a condition tests can wait for).
    pub fn writers_waiting(&self) -> bool {
        self.protocol.has_waiters()
    }

    /// Run one pre-copy pass now, on this thread, as the pre-copier's thread does every
    /// period (tests that count what a pass did turn the thread off). False when pre-copy is
    /// off, or a commit or a section would have kept the thread from passing.
    #[doc(hidden)]
    pub fn precopy_pass(&self) -> bool {
        let mut st = self.lock();
        self.poll(&mut st);
        precopy::pass_if_idle(&mut st, &*self.tracker, &*self.store, None)
    }

    /// The execution context pre-copy would learn page `page` of region `id` under now:
    /// the writing function's address where the backend reports the writer, the region's
    /// id otherwise (tests). None when pre-copy is off or the region unknown.
    #[doc(hidden)]
    pub fn precopy_context(&self, id: u64, page: usize) -> Option<u64> {
        let mut st = self.lock();
        let tr = st.regions.get(&id)?.tr.clone();
        Some(st.precopy.as_mut()?.context_of(&tr, page))
    }

    /// How many regions pre-copy keeps page histories for (tests: a freed region's go with it).
    #[doc(hidden)]
    pub fn precopy_known_regions(&self) -> usize {
        self.lock()
            .precopy
            .as_ref()
            .map_or(0, |p| p.known_regions())
    }
}
