//! An engine's end: in the process that opened it, its threads stop and its regions leave
//! tracking; in a child forked from it, it lets go of the parent's regions without touching
//! the parent's store or threads.

use super::{Engine, State};
use crate::track::Tracker;
use std::sync::Arc;

impl Engine {
    /// In a child forked from the process that made this engine: stop tracking the parent's
    /// regions here (their memory stays mapped and becomes writable) and let go of the engine
    /// without touching the parent's store or unmapping memory the child may still use.
    /// (Dropping it in a child does the same.)
    pub fn abandon_after_fork(self) {
        drop(self);
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if self.forked() {
            // The committer and the huge page worker stayed with the parent (joining them
            // would wait for ever); `alloc`'s mappings are the child's to keep using; the
            // store's descriptors were closed at fork (sys/fs.rs), and closing them again
            // could close files the child opened since, so the store is never dropped here.
            if let Some(p) = &mut self.precopier {
                p.forget();
            }
            std::mem::forget(self.huge_worker.take());
            std::mem::forget(self.drain.take());
            std::mem::forget(self.tiered.take());
            std::mem::forget(self.local.clone());
            std::mem::forget(self.store.clone());
            // The state is the child's alone (the threads sharing it stayed with the parent),
            // but one of them may have held its lock at the fork: reached without the lock
            // when nothing else holds the Arc (no pre-copier), else only if the lock is free.
            // If neither, the pre-copier's clone, never dropped, keeps the state, and the
            // memory `alloc` mapped, alive: left tracked, never unmapped.
            if let Some(m) = Arc::get_mut(&mut self.state) {
                let st = m.get_mut().unwrap_or_else(|e| e.into_inner());
                forget_in_child(st, &*self.tracker);
            } else if let Ok(mut st) = self.state.try_lock() {
                forget_in_child(&mut st, &*self.tracker);
            }
            return;
        }
        if let Some(p) = &mut self.precopier {
            p.stop();
        }
        if let (Some(q), Some(h)) = (self.protocol.huge_queue(), self.huge_worker.take()) {
            q.stop();
            let _ = h.join();
        }
        let mut st = std::mem::take(&mut *self.lock());
        self.settle(&mut st);
        // What is left undrained is copied at the next start (`ickpt_finalize` waits for it).
        if let Some(d) = self.drain.take() {
            d.stop();
        }
        for (_, slot) in std::mem::take(&mut st.regions) {
            let _ = self.tracker.detach(&slot.tr);
            // Mappings from `alloc` are released with the engine (documented in
            // ickpt_finalize): `slot.owned` unmaps as it drops here.
            drop(slot);
        }
        // The protocol is freed with the engine: not under a handler still leaving it.
        self.protocol.wait_for_handlers();
    }
}

/// A forked child's engine lets go of the parent's regions: tracking stops, the memory stays
/// mapped (the child keeps using it), the commit in flight is not waited for.
fn forget_in_child(st: &mut State, tracker: &dyn Tracker) {
    std::mem::forget(st.pending.take());
    for slot in st.regions.values_mut() {
        let _ = tracker.detach(&slot.tr);
        // Not unmapped when the slot drops: the child keeps using it.
        std::mem::forget(slot.owned.take());
    }
}
