//! The pre-copier thread: a pass every period over the engine's state, held off while a
//! commit runs or a section is open, and stepping aside for a checkpoint call that waits.

use super::super::State;
use crate::policy::prwip::Strategy;
use crate::store::Store;
use crate::track::Tracker;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The pre-copier thread and how to reach it.
pub(crate) struct Precopier {
    pub ctl: Arc<Control>,
    handle: Option<std::thread::JoinHandle<()>>,
}

/// Shared with the pre-copier thread.
#[derive(Default)]
pub(crate) struct Control {
    stop: Mutex<bool>,
    wake: Condvar,
    /// Checkpoint calls waiting for the engine lock: a pass stops before its next run.
    waiting: AtomicU32,
}

impl Control {
    /// A checkpoint call is about to wait for the engine lock; dropping the guard once it
    /// holds the lock.
    pub fn checkpoint_waiting(&self) -> Waiting<'_> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        Waiting(self)
    }
}

/// A checkpoint call waiting for the engine (`Control::checkpoint_waiting`).
pub(crate) struct Waiting<'a>(&'a Control);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether a pass may run: no commit running (its pages are the commit's as they are) and no
/// section open (its diffs take the same bits).
fn idle(st: &State) -> bool {
    let running = st.pending.as_ref().is_some_and(|h| !h.is_finished());
    !running && st.sections.open_index().is_none()
}

/// One pass now, unless a commit is running (its pages are the commit's as they are) or a
/// section is open (its diffs take the same bits). Whether a pass ran. `ctl`: the thread's
/// control, whose waiting checkpoint calls cut the pass short; None for a pass on the
/// caller's own thread (`Engine::precopy_pass`).
pub(crate) fn pass_if_idle(
    st: &mut State,
    tracker: &dyn Tracker,
    store: &dyn Store,
    ctl: Option<&Control>,
) -> bool {
    if !idle(st) {
        return false;
    }
    let Some(p) = &mut st.precopy else {
        return false;
    };
    let urgent = || ctl.is_some_and(|c| c.waiting.load(Ordering::Relaxed) > 0);
    p.pass(&st.regions, tracker, store, st.next_version, &urgent);
    true
}

impl crate::engine::Engine {
    /// Copy every page written since the last checkpoint into the next version's file now,
    /// while the program runs, so that the checkpoint that follows has only the pages
    /// written from here on to fence and store (`ickpt run` calls it before it stops the
    /// program). The version is still memory as it stands at the checkpoint: each page is
    /// write-protected again before it is copied, and one written after that is stored
    /// again by the checkpoint (pre-copy's conflict). Copied pages are stored raw, where a
    /// compressed commit would have compressed them. Returns how many pages were copied:
    /// 0 while a commit runs or a section is open; a failure stops pre-copy until the
    /// checkpoint, which stores the pages itself and reports why in its pre-copy figures.
    ///
    /// Nothing is copied for a version that will be full (the restart bound decides it so
    /// from the pages written): it stores and fences every page anyway, and a copy would be
    /// thrown away, its file deleted while the program is stopped.
    ///
    /// The kind is decided here, from the pages written before the copy, and the checkpoint
    /// takes it (`PreCopy::decided`). Pre-copy state is made where pre-copy is off (its
    /// versions record the strategy as blind: every written page, copied as it is found).
    pub fn precopy_written(&self) -> u64 {
        let mut st = self.lock();
        self.poll(&mut st);
        if !idle(&st) {
            return 0;
        }
        let version = st.next_version;
        let kind = self.kind_of(&st, version);
        let st = &mut *st;
        let p = st
            .precopy
            .get_or_insert_with(|| super::PreCopy::new(Strategy::Blind, None));
        p.decided(version, kind);
        if kind == ickpt_format::Kind::Full {
            return 0;
        }
        p.copy_written(&st.regions, &*self.tracker, &*self.store, version)
    }
}

impl Precopier {
    /// Start the thread over the engine's state.
    pub fn start(
        state: Arc<Mutex<State>>,
        tracker: Arc<dyn Tracker>,
        store: Arc<dyn Store>,
    ) -> std::io::Result<Precopier> {
        let ctl = Arc::new(Control::default());
        let c = ctl.clone();
        let handle = std::thread::Builder::new()
            .name("ickpt-precopy".into())
            .spawn(move || run(&state, &*tracker, &*store, &c))?;
        Ok(Precopier {
            ctl,
            handle: Some(handle),
        })
    }

    /// Stop the thread and wait for it.
    pub fn stop(&mut self) {
        *self.ctl.stop.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.ctl.wake.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }

    /// Forget the thread without joining it (a forked child: it stayed with the parent).
    pub fn forget(&mut self) {
        std::mem::forget(self.handle.take());
    }
}

fn run(state: &Mutex<State>, tracker: &dyn Tracker, store: &dyn Store, ctl: &Control) {
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let period = lock()
            .precopy
            .as_ref()
            .map_or(Duration::from_millis(100), |p| p.period());
        let stop = ctl.stop.lock().unwrap_or_else(|e| e.into_inner());
        let (stop, _) = ctl
            .wake
            .wait_timeout_while(stop, period, |s| !*s)
            .unwrap_or_else(|e| e.into_inner());
        if *stop {
            return;
        }
        drop(stop);
        pass_if_idle(&mut lock(), tracker, store, Some(ctl));
    }
}
