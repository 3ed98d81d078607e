//! Helpers shared by the integration tests.
#![allow(dead_code, unused_imports)]

pub mod between_collects;
pub mod garage;
pub mod hook_store;
pub mod other_user;
pub mod pass_writers;
mod scratch;

pub use scratch::{scratch_dir, Scratch};

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Memory owned by a test, page-aligned, freed on drop.
pub struct Buf {
    pub ptr: *mut u8,
    pub len: usize,
}

impl Buf {
    pub fn new(len: usize) -> Buf {
        let ptr = ickpt::sys::mem::map_anonymous(len.max(1)).expect("mmap");
        Buf { ptr, len }
    }

    pub fn slice(&self) -> &[u8] {
        // SAFETY: the mapping is live and len bytes long.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn slice_mut(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is live and len bytes long; &mut self makes it exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: mapped by `new`; tests unprotect or drop the engine first.
        let _ = unsafe { ickpt::sys::mem::unmap(self.ptr, self.len.max(1)) };
    }
}

// SAFETY: test buffers are plain memory; tests coordinate access explicitly.
unsafe impl Send for Buf {}
// SAFETY: as above.
unsafe impl Sync for Buf {}

/// A numeric test knob from the environment (`ICKPT_CRASH_TRIALS=500`), or `default`.
pub fn env_knob<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// How long a test waits for something another thread must do before it calls that a hang
/// (`ICKPT_TEST_WAIT_SECS`, default 60).
fn wait_limit() -> Duration {
    Duration::from_secs(env_knob("ICKPT_TEST_WAIT_SECS", 60))
}

/// A hang is a failure: prints what never happened and aborts the test binary. Aborts rather
/// than panics because a panic inside `thread::scope` waits for the scope's threads, and the
/// thread that never got on is usually one of them.
fn hung(what: &str) -> ! {
    eprintln!("test hung: {what} did not happen within {:?}", wait_limit());
    std::process::abort();
}

/// Yields until `cond` holds; past the wait limit, aborts naming `what`.
pub fn spin_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + wait_limit();
    while !cond() {
        if Instant::now() >= deadline {
            hung(what);
        }
        std::thread::yield_now();
    }
}

/// Aborts the test binary if the returned guard is still alive after `secs` seconds (at least
/// twice the wait limit, so that a bounded wait inside the test names its hang first): for
/// tests whose failure mode is a call that never returns. Dropping the guard (the test
/// ended) stops it, so it never aborts a later test of the same binary.
#[must_use = "the watchdog stops when its guard drops"]
pub fn watchdog(what: &'static str, secs: u64) -> Watchdog {
    let secs = secs.max(2 * wait_limit().as_secs());
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let thread = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            if d.load(Ordering::SeqCst) {
                return;
            }
            std::thread::park_timeout(left);
        }
        if !d.load(Ordering::SeqCst) {
            eprintln!("test hung: {what} did not finish within {secs} s");
            std::process::abort();
        }
    });
    Watchdog { done, thread }
}

pub struct Watchdog {
    done: std::sync::Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        self.thread.thread().unpark();
    }
}

/// Sets its flag when dropped, also while a failed assertion unwinds: threads in a
/// `thread::scope` that run until the flag is set then stop, and the scope can end, so the
/// failure is reported instead of the test hanging.
pub struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Fill `bytes` with xorshift noise from `seed`: no page of it is all zero and zstd cannot
/// shrink it, so files keep their full size (tests that need big files, or raw frames).
#[allow(dead_code)]
pub fn noise(bytes: &mut [u8], seed: u64) {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for chunk in bytes.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
}
