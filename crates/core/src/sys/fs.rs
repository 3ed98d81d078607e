//! File locking, no-replace renames, and what a forked child must let go of.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Once;

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

/// Rename `from` to `to`, failing with EEXIST rather than replacing an existing `to`: a
/// committed version is never overwritten.
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other);
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: both paths are valid NUL-terminated strings for the duration of the call.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Store lock descriptors a forked child must close, so that a child outliving its parent
/// does not keep the parent's store locked (the child shares the parent's open file).
const LOCK_SLOTS: usize = 64;
static LOCK_FDS: [AtomicI32; LOCK_SLOTS] = [const { AtomicI32::new(-1) }; LOCK_SLOTS];
static AT_FORK: Once = Once::new();

extern "C" fn in_forked_child() {
    for slot in &LOCK_FDS {
        let fd = slot.swap(-1, Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: close(2) is async-signal-safe, as an atfork child handler requires.
            unsafe { libc::close(fd) };
        }
    }
    crate::track::reset_after_fork();
}

/// Install the handler forked children run (once per process): it releases store locks and
/// resets tracking state the child's other, vanished threads held.
pub fn ensure_fork_handler() {
    AT_FORK.call_once(|| {
        // SAFETY: registering a plain extern "C" function with no preconditions.
        unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) };
    });
}

/// Remember `fd` as a store lock to close in forked children.
pub fn register_lock(fd: i32) {
    ensure_fork_handler();
    for slot in &LOCK_FDS {
        if slot
            .compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return;
        }
    }
}

pub fn unregister_lock(fd: i32) {
    for slot in &LOCK_FDS {
        let _ = slot.compare_exchange(fd, -1, Ordering::SeqCst, Ordering::SeqCst);
    }
}
