//! The commit in flight, and applying a finished commit's outcome to the engine.

use super::commit::{self, Outcome};
use super::{Engine, State};
use crate::error::CheckpointError;
use crate::sys::thread;
use ickpt_format::{CommitMode, Kind};

/// Checkpoints that fence every region after one that met a write where no fence kept it
/// out.
const FENCED_AFTER_A_RACE: u32 = 16;

/// A checkpoint met a write where no fence kept it out (a sync commit's collected page
/// written before it copied it, or another thread's write between an async collect's scan
/// and its fence) and is to be scheduled again with fences. A thread that wrote during this
/// call may well write during the next few: those fence from the start rather than
/// schedule each twice.
pub(super) fn raced(st: &mut State) {
    st.fence_next = FENCED_AFTER_A_RACE;
    st.stats.raced_commits += 1;
}

/// How `launch` left a commit.
pub(super) enum Launched {
    /// Committed here (sync), or running on the committer thread (async).
    Started,
    /// A write raced an unfenced sync commit, which committed nothing: schedule it again
    /// with fences.
    Raced,
}

impl Engine {
    /// Commit `job` as the mode says: here and now (sync), or on a committer thread while
    /// the caller returns (async; falls back to here if no thread can be started).
    pub(super) fn launch(
        &self,
        st: &mut State,
        job: commit::Job,
    ) -> Result<Launched, CheckpointError> {
        if self.cfg.mode == CommitMode::Async {
            let (tx, rx) = std::sync::mpsc::channel();
            let protocol = self.protocol.clone();
            // Only calls whose other threads run on, on a tracker whose writes never reach
            // ickpt, copy pages ahead into the buffer (`schedule::copy_ahead`): elsewhere its
            // slots are touched by writers during a commit alone, and backing all of them
            // would only hold memory.
            let back = !self.cfg.others_stopped && !self.tracker.sees_every_write();
            // Slots ahead for a call that copies 1/64 of the memory tracked (a rewrite of
            // 1.5% of it in lone pages); a larger one backs the rest as it copies.
            let tracked: usize = st.regions.values().map(|s| s.tr.npages).sum();
            let ahead = tracked / 64;
            let spawned = std::thread::Builder::new()
                .name("ickpt-commit".into())
                .spawn(move || {
                    // First: from here on this thread's faults never wait for a page.
                    protocol.set_committer(thread::tid());
                    crate::sys::own_spans::note_this_stack();
                    let job: commit::Job = rx.recv().expect("the job follows the spawn");
                    let outcome = commit::run(job);
                    if back {
                        protocol.cow.back(ahead);
                        protocol.cow.give_back_ahead();
                    }
                    outcome
                });
            // The job is sent only once a thread exists; without one it runs here.
            if let Ok(handle) = spawned {
                tx.send(job).expect("the committer waits for its job");
                st.pending = Some(handle);
                return Ok(Launched::Started);
            }
        }
        self.protocol.set_committer(thread::tid());
        let version = job.version;
        // A panic (a bug, or a store that panics) fails this checkpoint as it would an async
        // one, rather than unwinding through the caller: the commit's guard has released
        // every page and put the dirty bits back by the time it is caught.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| commit::run(job))) {
            Ok(outcome) if outcome.raced => {
                // Nothing was committed and the file is gone: its number is free again.
                st.next_version = version;
                raced(st);
                return Ok(Launched::Raced);
            }
            Ok(outcome) => self.apply(st, outcome),
            Err(panic) => self.fail(st, CheckpointError::commit_panicked(version, &*panic)),
        }
        match st.unreported.take() {
            Some(e) => Err(e),
            None => Ok(Launched::Started),
        }
    }

    /// Wait for the commit in flight, if any, and apply its outcome. A failure is kept for
    /// the next `checkpoint` or `wait` to report.
    pub(super) fn settle(&self, st: &mut State) {
        if let Some(handle) = st.pending.take() {
            match handle.join() {
                Ok(outcome) => self.apply(st, outcome),
                Err(panic) => {
                    let version = st.next_version - 1;
                    self.fail(st, CheckpointError::commit_panicked(version, &*panic))
                }
            }
        }
    }

    /// Apply the commit in flight if it has finished; never blocks.
    pub(super) fn poll(&self, st: &mut State) {
        if st.pending.as_ref().is_some_and(|h| h.is_finished()) {
            self.settle(st);
        }
    }

    fn apply(&self, st: &mut State, outcome: Outcome) {
        match outcome.result {
            Ok(info) => {
                st.previous = Some(info.version);
                for id in &outcome.ids {
                    if let Some(slot) = st.regions.get_mut(id) {
                        slot.born.get_or_insert(info.version);
                    }
                }
                st.head = Some(outcome.head);
                // The commit's own time: the garbage collection after it depends on the
                // retention, not on the kind weighed.
                let cost = crate::policy::Cost {
                    bytes: info.bytes,
                    secs: info.duration.saturating_sub(info.phases.gc).as_secs_f64(),
                };
                st.chain_costs.committed(info.kind, cost);
                st.chain_bytes =
                    crate::policy::ChainBytes::committed(st.chain_bytes, info.kind, info.bytes);
                let s = &mut st.stats;
                s.checkpoints += 1;
                match info.kind {
                    Kind::Full => s.full_checkpoints += 1,
                    Kind::Incremental => s.incremental_checkpoints += 1,
                }
                s.pages_written += info.pages;
                s.bytes_written += info.bytes;
                s.checkpoint_time += info.duration;
                s.cow_pages += info.commit.cow_pages;
                s.wait_pages += info.commit.wait_pages;
                s.avoided_pages += info.commit.avoided_pages;
                s.after_pages += info.commit.after_previous;
                s.wait_time += std::time::Duration::from_nanos(info.commit.wait_ns);
                s.last_checkpoint = Some(info);
            }
            Err(e) => self.fail(st, e),
        }
    }

    /// A commit failed: kept for the next `checkpoint` or `wait` to report.
    fn fail(&self, st: &mut State, e: CheckpointError) {
        st.previous = None;
        st.stats.failed_checkpoints += 1;
        st.unreported = Some(e);
    }

    /// Block until the checkpoint in flight (async mode) is committed; returns the newest
    /// committed checkpoint of this engine, or the error that made the last one fail.
    pub fn wait(&self) -> Result<Option<super::CheckpointInfo>, CheckpointError> {
        let mut st = self.lock_for_change()?;
        self.settle(&mut st);
        match st.unreported.take() {
            Some(e) => Err(e),
            None => Ok(st.stats.last_checkpoint.clone()),
        }
    }
}
