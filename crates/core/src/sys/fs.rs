//! File locking.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Take an exclusive advisory lock without blocking. Ok(false) when another process holds it.
/// The lock is released when the file is closed, including when the process is killed.
pub fn try_lock_exclusive(f: &File) -> io::Result<bool> {
    // SAFETY: flock on a file descriptor we own has no memory-safety preconditions.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}
