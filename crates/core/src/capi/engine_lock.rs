//! The lock around the process's engine, which a forked child can reset.
//!
//! A child forked while another thread was inside an ickpt call inherits the lock as that
//! thread held it, but not the thread, so the hold is never released: with a standard
//! `RwLock` the child's `ickpt_init` (which docs/abi.md rule 11 says it may call) waited
//! forever (found in review). Only the forking thread lives on in the child, so the child
//! handler may simply declare the lock free.

use crate::sys::thread::{futex_wait, futex_wake_all};
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::Once;

/// Set while a writer holds the lock; the other bits count readers.
const WRITER: u32 = 1 << 31;

pub struct EngineLock<T> {
    state: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `state` exactly as an RwLock does: shared refs
// only under a read hold, a mutable ref only under the write hold.
unsafe impl<T: Send + Sync> Sync for EngineLock<T> {}

impl<T> EngineLock<T> {
    pub const fn new(value: T) -> Self {
        EngineLock {
            state: AtomicU32::new(0),
            value: UnsafeCell::new(value),
        }
    }

    pub fn read(&'static self) -> ReadGuard<'static, T> {
        self.reset_in_children();
        loop {
            let s = self.state.load(SeqCst);
            if s & WRITER == 0 {
                if self
                    .state
                    .compare_exchange(s, s + 1, SeqCst, SeqCst)
                    .is_ok()
                {
                    return ReadGuard(self);
                }
                continue;
            }
            futex_wait(&self.state, s);
        }
    }

    pub fn write(&'static self) -> WriteGuard<'static, T> {
        self.reset_in_children();
        loop {
            match self.state.compare_exchange(0, WRITER, SeqCst, SeqCst) {
                Ok(_) => return WriteGuard(self),
                Err(s) => futex_wait(&self.state, s),
            }
        }
    }

    /// Register, once, the fork handler that frees the lock in a child.
    fn reset_in_children(&'static self) {
        static AT_FORK: Once = Once::new();
        AT_FORK.call_once(|| crate::sys::thread::at_fork_child(reset_engine_lock));
    }

    fn release(&self, held: u32) {
        // A hold from before a fork, released by a thread that no longer exists in this
        // process, cannot come here: only the forking thread lives on, and its own holds
        // ended before fork returned (no ickpt call forks).
        if self.state.fetch_sub(held, SeqCst) == held {
            futex_wake_all(&self.state);
        }
    }
}

/// The child side of fork: every other thread is gone, and with them their holds.
extern "C" fn reset_engine_lock() {
    // Async-signal-safe: one atomic store.
    super::ENGINE.state.store(0, SeqCst);
}

pub struct ReadGuard<'a, T>(&'a EngineLock<T>);
pub struct WriteGuard<'a, T>(&'a EngineLock<T>);

impl<T> Deref for ReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a read hold: no writer holds the lock while this guard lives.
        unsafe { &*self.0.value.get() }
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    fn drop(&mut self) {
        self.0.release(1);
    }
}

impl<T> Deref for WriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the write hold: no other guard lives.
        unsafe { &*self.0.value.get() }
    }
}

impl<T> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the write hold, and `&mut self`: this is the only reference.
        unsafe { &mut *self.0.value.get() }
    }
}

impl<T> Drop for WriteGuard<'_, T> {
    fn drop(&mut self) {
        self.0.release(WRITER);
    }
}
