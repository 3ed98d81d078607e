//! Futexes, thread ids and a clock, all async-signal-safe: the fault handler waits on pages
//! with them.

use std::sync::atomic::AtomicU32;

/// Sleep while `*word == expected` (returns at once otherwise, or on any wake or signal).
pub fn futex_wait(word: &AtomicU32, expected: u32) {
    wait(word, expected, std::ptr::null());
}

/// Sleep while `*word == expected`, at most `ms` milliseconds.
pub fn futex_wait_for(word: &AtomicU32, expected: u32, ms: u64) {
    let ts = libc::timespec {
        tv_sec: (ms / 1000) as libc::time_t,
        tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long,
    };
    wait(word, expected, &ts);
}

/// FUTEX_WAIT with `timeout` (NULL: without limit).
fn wait(word: &AtomicU32, expected: u32, timeout: *const libc::timespec) {
    // SAFETY: `word` is a live, aligned 32-bit atomic for the whole call; FUTEX_WAIT only
    // reads it, and `timeout` is NULL or a timespec its callers keep alive for the call.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            timeout,
        );
    }
}

/// Wake every thread sleeping in [`futex_wait`] on `word`.
pub fn futex_wake_all(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE only uses the address as a key; the word is live and aligned.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
        );
    }
}

/// The calling thread's kernel id.
pub fn tid() -> u64 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() as u64 }
}

/// Give the CPU to another thread (a short wait for a peer that is mid-copy).
pub fn yield_now() {
    // SAFETY: sched_yield has no preconditions.
    unsafe { libc::sched_yield() };
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Run `handler` in the child after every fork (pthread_atfork's child handler); it must be
/// async-signal-safe.
pub fn at_fork_child(handler: extern "C" fn()) {
    // SAFETY: registering a plain extern "C" function; the caller vouches it is safe to run
    // in a forked child.
    unsafe { libc::pthread_atfork(None, None, Some(handler)) };
}
