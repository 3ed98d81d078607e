//! `Engine::checkpoint`: schedule the epoch's dirty pages as a new version and commit it,
//! before returning (sync) or in the background (async).

use super::pending::{self, Launched};
use super::schedule::Schedule;
use super::{CheckpointInfo, Engine};
use crate::error::CheckpointError;
use ickpt_format::CommitMode;
use std::time::Instant;

impl Engine {
    /// Start a new version holding every page written since the previous one (or all pages,
    /// every `full_every`-th time). Sync mode returns once it is committed. Async mode
    /// returns once its pages are scheduled (`pages` counts them; `bytes` is 0 until
    /// [`Engine::wait`] reports the commit); a checkpoint still committing is waited for
    /// first, and if it failed its error is returned here and nothing new starts. On error
    /// nothing committed is touched and the pages stay dirty for the next attempt.
    pub fn checkpoint(&self) -> Result<CheckpointInfo, CheckpointError> {
        self.checkpoint_tagged(0)
    }

    /// [`checkpoint`](Self::checkpoint), the version carrying `tag`: the application's own
    /// value for it (an iteration number, a time step), returned by the restore of that
    /// version and shown by `ickpt ls`.
    pub fn checkpoint_tagged(&self, tag: u64) -> Result<CheckpointInfo, CheckpointError> {
        let started = Instant::now();
        // A pre-copy pass under way stops before its next run of pages.
        let waiting = self.precopier.as_ref().map(|p| p.ctl.checkpoint_waiting());
        let st = self.lock_for_change();
        drop(waiting);
        let mut st = st?;
        self.settle(&mut st);
        if let Some(p) = &mut st.precopy {
            p.called();
        }
        if let Some(e) = st.unreported.take() {
            return Err(e);
        }
        self.sections_before_checkpoint(&mut st)?;
        if !self
            .tracker
            .handler_intact()
            .map_err(CheckpointError::Tracking)?
        {
            return Err(CheckpointError::HandlerReplaced);
        }
        let _owner = self.protocol.become_owner();
        let mut fence_all = st.fence_next > 0;
        st.fence_next = st.fence_next.saturating_sub(1);
        let mut attempt = 1;
        let scheduled = loop {
            let job = match self.schedule(&mut st, started, fence_all, attempt, tag)? {
                Schedule::Ready(job) => *job,
                Schedule::Raced => {
                    pending::raced(&mut st);
                    (fence_all, attempt) = (true, attempt + 1);
                    continue;
                }
            };
            let scheduled = CheckpointInfo {
                version: job.version,
                tag,
                kind: job.kind,
                parent: job.parent,
                pages: job.total,
                bytes: 0,
                duration: std::time::Duration::ZERO,
                phases: job.phases.clone(),
                commit: job.stats,
                precopy: job.precopy.clone(),
            };
            // Async: the pages are scheduled and fenced; whoever stopped the program for this
            // checkpoint lets it go on now, before the committer starts (`ickpt run`).
            if self.cfg.mode == CommitMode::Async {
                if let Some(go) = &self.scheduled {
                    go();
                }
            }
            match self.launch(&mut st, job)? {
                Launched::Raced => (fence_all, attempt) = (true, attempt + 1),
                Launched::Started => break scheduled,
            }
        };
        match self.cfg.mode {
            CommitMode::Sync => {
                let mut info = st
                    .stats
                    .last_checkpoint
                    .clone()
                    .expect("a successful sync commit is recorded");
                info.duration = started.elapsed();
                Ok(info)
            }
            CommitMode::Async => Ok(CheckpointInfo {
                duration: started.elapsed(),
                ..scheduled
            }),
        }
    }
}
