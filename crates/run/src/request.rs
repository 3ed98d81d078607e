//! The program's own `ickpt_checkpoint()` under `ickpt run`: libickpt.so finds these
//! functions in the process and hands the call to the checkpointing thread, which then
//! checkpoints the whole process. The calling thread waits here, and is stopped like every
//! other thread; after a restart from that version it is resumed still waiting here, and the
//! restarted checkpointing thread answers it.
//!
//! Called on the program's threads: atomics and futexes only, nothing that allocates (a
//! thread stopped while holding ickpt's heap lock would stop the checkpoint with it).
//!
//! This library carries the core, C API included, and a preloaded library's symbols come
//! before those of the program's own libickpt.so: the program's `ickpt_*` calls reach this
//! copy of the same code, which finds these functions the same way.

// Exported C functions; the out-pointer is the caller's.
#![allow(unsafe_code)]

use crate::checkpointer::TRIGGER;
use crate::park::{futex_wait, futex_wake};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::SeqCst};

/// Requests made so far (a ticket each).
static REQUESTED: AtomicU32 = AtomicU32::new(0);
/// Futex word: requests answered so far.
static ANSWERED: AtomicU32 = AtomicU32::new(0);
/// The tag the newest request asked for.
static TAG: AtomicU64 = AtomicU64::new(0);
/// The answer: the version committed, and whether it was.
static VERSION: AtomicU64 = AtomicU64::new(0);
static OK: AtomicBool = AtomicBool::new(false);
/// How many times this process was brought back by `ickpt restart`.
pub static RESTARTS: AtomicU32 = AtomicU32::new(0);
/// Whether the library acts in this process (`ickpt run` started it here).
pub static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Requests not answered yet, and the tag to checkpoint with; None when there are none.
pub fn pending() -> Option<(u32, u64)> {
    let want = REQUESTED.load(SeqCst);
    (want != ANSWERED.load(SeqCst)).then(|| (want, TAG.load(SeqCst)))
}

/// Answer every request up to `upto` with `version` (None: the checkpoint failed).
pub fn answer(upto: u32, version: Option<u64>) {
    VERSION.store(version.unwrap_or(0), SeqCst);
    OK.store(version.is_some(), SeqCst);
    ANSWERED.store(upto, SeqCst);
    futex_wake(&ANSWERED);
}

/// 1 when this process is checkpointed by `ickpt run`, else 0.
#[no_mangle]
pub extern "C" fn ickpt_run_active() -> i32 {
    i32::from(ACTIVE.load(SeqCst))
}

/// How many times `ickpt restart` brought this process back.
#[no_mangle]
pub extern "C" fn ickpt_run_restarts() -> u32 {
    RESTARTS.load(SeqCst)
}

/// Checkpoint the whole process now, the version carrying `tag`; on success write its
/// number to `*version` (if not NULL) and return 0, else -1 (the reason is on stderr).
///
/// # Safety
/// `version` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ickpt_run_checkpoint(tag: u64, version: *mut u64) -> i32 {
    if !ACTIVE.load(SeqCst) {
        return -1;
    }
    TAG.store(tag, SeqCst);
    let ticket = REQUESTED.fetch_add(1, SeqCst).wrapping_add(1);
    TRIGGER.fetch_add(1, SeqCst);
    futex_wake(&TRIGGER);
    loop {
        let answered = ANSWERED.load(SeqCst);
        // Tickets wrap: answered is at or past ticket when their difference is small.
        if answered.wrapping_sub(ticket) < u32::MAX / 2 {
            break;
        }
        futex_wait(&ANSWERED, answered, 1000);
    }
    if !OK.load(SeqCst) {
        return -1;
    }
    if !version.is_null() {
        // SAFETY: the caller's promise.
        unsafe { version.write(VERSION.load(SeqCst)) };
    }
    0
}
