//! A pause in the first-write path, between its registry lookups, for tests: a handler held
//! there is inside its protocols but outside the registry, the window in which dropping the engine
//! once freed the protocol under it. Off unless a test arms it: one atomic load per first
//! write, in builds with the `testing` feature only. Signal-safe (atomics and a futex). Also
//! a hook a checkpoint calls between two regions' collects.

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

/// Whether an engine's drop is waiting for the paused handler to leave its protocol.
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

/// An engine is about to wait for handlers inside its protocol.
pub(crate) fn waiting_for_handlers() {
    let _ = STATE.compare_exchange(PAUSED, DRAINING, SeqCst, SeqCst);
}

/// A function a checkpoint calls once, with the region's id, after it has collected a
/// region (gate closed): tests place another thread's writes between two regions'
/// collects there. Taken before the gate closes, so the lock is never taken under it.
static AFTER_COLLECT: std::sync::Mutex<Option<fn(u64)>> = std::sync::Mutex::new(None);

/// The next checkpoint calls `f` after collecting each region, then forgets it.
pub fn after_next_collects(f: fn(u64)) {
    *AFTER_COLLECT.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
}

/// The function set for this checkpoint, taken (so a checkpoint that fails half-way
/// leaves none behind for the next).
pub(crate) fn take_after_collect() -> Option<fn(u64)> {
    AFTER_COLLECT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
}
