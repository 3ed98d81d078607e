//! read(2), pread(2) and recv(2) into a buffer the caller lends, and the one-byte
//! compare-and-swap that takes a page's write fault from user space (`crate::tracked_io`
//! builds the EFAULT-retrying wrappers on these).

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU8, Ordering::SeqCst};

/// Rewrite `*byte` with the value it holds, by compare-and-swap: a write the CPU performs
/// (so a write-protected page faults and is opened) that changes nothing, even with other
/// threads writing the byte; the compiler may not turn it into a plain read.
pub fn rewrite_in_place(byte: &mut u8) {
    // AtomicU8::from_mut is not stable; this is its body.
    // SAFETY: `byte` is a unique reference, valid for the call; AtomicU8 has u8's layout.
    let a = unsafe { AtomicU8::from_ptr(byte) };
    let mut v = a.load(SeqCst);
    while let Err(now) = a.compare_exchange_weak(v, v, SeqCst, SeqCst) {
        v = now;
    }
}

/// read(2) into `buf`: what it returns (-1 with errno set on failure).
pub fn read(fd: RawFd, buf: &mut [u8]) -> isize {
    // SAFETY: `buf` is writable for `buf.len()` bytes for the whole call.
    unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) }
}

/// pread(2) into `buf`, as `read`.
pub fn pread(fd: RawFd, buf: &mut [u8], offset: i64) -> isize {
    // SAFETY: as in `read`.
    unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), offset) }
}

/// recv(2) into `buf`, as `read`.
pub fn recv(fd: RawFd, buf: &mut [u8], flags: i32) -> isize {
    // SAFETY: as in `read`.
    unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), flags) }
}

/// This thread's errno. Async-signal-safe.
pub fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    unsafe { *libc::__errno_location() }
}

/// Set this thread's errno. Async-signal-safe.
pub fn set_errno(value: i32) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = value };
}
