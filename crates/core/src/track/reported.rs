//! Regions whose writes their owner reports (`Engine::protect_reported`), put in front of
//! whichever backend tracks the others.
//!
//! `ickpt run` keeps two buffers of its own as regions: the process record and the snapshot
//! of ickpt's state. Only its capture writes them, while every thread of the program is
//! stopped, page by page where the bytes changed, and only once the commit before has ended.
//! Tracked like program memory, each page it changes costs a write-protect fault (about 2 µs
//! on this project's VM, a few hundred pages a checkpoint), and a fence the collect raises
//! and lifts again. The capture knows exactly which pages it changed: it says so, and the
//! commit copies them unfenced, since nothing writes them while it runs.

use super::{Backend, Guard, TrackError, TrackedRegion, Tracker};
use std::sync::Arc;

/// `inner` for every region but those whose writes are reported, which it leaves alone.
pub struct WithReported {
    pub inner: Arc<dyn Tracker>,
}

impl Tracker for WithReported {
    fn backend(&self) -> Backend {
        self.inner.backend()
    }

    fn attach(&self, r: &Arc<TrackedRegion>, armed: bool) -> Result<(), TrackError> {
        match r.writes_reported() {
            true => Ok(()),
            false => self.inner.attach(r, armed),
        }
    }

    fn detach(&self, r: &Arc<TrackedRegion>) -> Result<(), TrackError> {
        match r.writes_reported() {
            true => Ok(()),
            false => self.inner.detach(r),
        }
    }

    /// A reported region's bits are what its owner reported; no fence, whatever `guard`.
    fn collect(
        &self,
        r: &TrackedRegion,
        guard: Guard,
        out: &mut Vec<u64>,
        before_rearm: &mut dyn FnMut(&[u64]),
    ) -> Result<(), TrackError> {
        if !r.writes_reported() {
            return self.inner.collect(r, guard, out, before_rearm);
        }
        r.dirty.take_into(out);
        before_rearm(out);
        Ok(())
    }

    fn unwritten_since_collect(&self, r: &TrackedRegion) -> Result<bool, TrackError> {
        match r.writes_reported() {
            true => Ok(true),
            false => self.inner.unwritten_since_collect(r),
        }
    }

    fn copy_ahead_run(&self, r: &TrackedRegion, bits: &[u64], free: usize) -> usize {
        match r.writes_reported() {
            true => 0,
            false => self.inner.copy_ahead_run(r, bits, free),
        }
    }

    fn before_collect(&self) {
        self.inner.before_collect()
    }

    fn sees_every_write(&self) -> bool {
        self.inner.sees_every_write()
    }

    fn release(&self, r: &TrackedRegion, guard: Guard) {
        if !r.writes_reported() {
            self.inner.release(r, guard)
        }
    }

    fn lift(&self, r: &TrackedRegion, pages: std::ops::Range<usize>) {
        if !r.writes_reported() {
            self.inner.lift(r, pages)
        }
    }

    fn lifts_fence_early(&self, r: &TrackedRegion) -> bool {
        !r.writes_reported() && self.inner.lifts_fence_early(r)
    }

    fn disarm(&self, r: &TrackedRegion) -> Result<(), TrackError> {
        match r.writes_reported() {
            true => Ok(()),
            false => self.inner.disarm(r),
        }
    }

    fn after_restart(&self, r: &TrackedRegion) -> Result<(), TrackError> {
        match r.writes_reported() {
            true => Ok(()),
            false => self.inner.after_restart(r),
        }
    }

    fn rearm(
        &self,
        r: &TrackedRegion,
        out: &mut Vec<u64>,
        before_rearm: &mut dyn FnMut(&[u64]),
    ) -> Result<(), TrackError> {
        match r.writes_reported() {
            true => self.collect(r, Guard::Rearm, out, before_rearm),
            false => self.inner.rearm(r, out, before_rearm),
        }
    }

    fn peek_written(&self, r: &TrackedRegion, out: &mut Vec<u64>) -> Result<(), TrackError> {
        match r.writes_reported() {
            true => {
                r.dirty.copy_into(out);
                Ok(())
            }
            false => self.inner.peek_written(r, out),
        }
    }

    fn collect_pages(
        &self,
        r: &TrackedRegion,
        pages: std::ops::Range<usize>,
        out: &mut Vec<u64>,
    ) -> Result<(), TrackError> {
        match r.writes_reported() {
            true => {
                r.dirty.take_range(pages.start, pages.end, out);
                Ok(())
            }
            false => self.inner.collect_pages(r, pages, out),
        }
    }

    fn handler_intact(&self) -> Result<bool, TrackError> {
        self.inner.handler_intact()
    }
}
