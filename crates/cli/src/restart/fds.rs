//! Stage A's descriptors: everything of the `ickpt` process closed but 0-2 (which the
//! restarted program inherits, as from a shell), then each recorded descriptor opened again
//! at its number: files and directories by path at their offset, a lock held through one
//! taken again, ickpt's own userfaultfd and pagemap made anew for this process.

use ickpt_process::{FdKind, FdRecord, ProcessRecord};
use std::ffi::CString;
use std::os::fd::IntoRawFd;

fn os(what: String) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// Put `fd` at `target` (closing what was there), keeping close-on-exec as recorded.
fn place(fd: i32, target: i32, cloexec: bool) -> Result<(), String> {
    if fd != target {
        let flags = if cloexec { libc::O_CLOEXEC } else { 0 };
        // SAFETY: dup3 of a descriptor we own onto a number we are setting up.
        if unsafe { libc::dup3(fd, target, flags) } < 0 {
            return Err(os(format!("placing descriptor {target}")));
        }
        // SAFETY: the temporary descriptor, ours and no longer needed.
        unsafe { libc::close(fd) };
    } else if !cloexec {
        // SAFETY: clears FD_CLOEXEC on a descriptor we own.
        unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    }
    Ok(())
}

/// Make again what the store held open inside the local directory `store` when that
/// directory is gone (a restart on another node, from a lower tier): the directory itself
/// (owner-only) and its lock file.
fn recreate_in_store(r: &FdRecord, store: Option<&std::path::Path>) -> Result<(), String> {
    let path = std::path::Path::new(&r.path);
    let Some(store) = store else {
        return Ok(());
    };
    if path.exists() || !path.starts_with(store) {
        return Ok(());
    }
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let made = match r.kind {
        FdKind::Directory => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path),
        FdKind::File if r.locked => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map(drop),
        _ => return Ok(()),
    };
    made.map_err(|e| format!("making {} again: {e}", path.display()))
}

fn open_path(r: &FdRecord) -> Result<i32, String> {
    let path =
        CString::new(r.path.as_bytes()).map_err(|_| format!("descriptor {}: bad path", r.fd))?;
    let flags = r.flags & !(libc::O_CREAT | libc::O_TRUNC | libc::O_EXCL) | libc::O_CLOEXEC;
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), flags, 0) };
    if fd < 0 {
        return Err(os(format!("reopening descriptor {} ({})", r.fd, r.path)));
    }
    if r.offset != 0 && r.flags & libc::O_PATH == 0 {
        // SAFETY: lseek on a descriptor we own.
        if unsafe { libc::lseek(fd, r.offset as libc::off_t, libc::SEEK_SET) } < 0 {
            return Err(os(format!(
                "seeking descriptor {} ({}) to {}",
                r.fd, r.path, r.offset
            )));
        }
    }
    if r.locked && !lock(fd) {
        return Err(os(format!(
            "taking the lock again through descriptor {} ({}); is the program still running",
            r.fd, r.path
        )));
    }
    Ok(fd)
}

/// How long the lock of a program that is still ending is waited for: killing `ickpt run`'s
/// supervisor kills the program through its namespace, a moment after the supervisor is gone.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Take the store's lock through `fd`, waiting up to [`LOCK_WAIT`] for a holder to end.
fn lock(fd: i32) -> bool {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return true;
        }
        let busy = std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK);
        if !busy || std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn open_one(r: &FdRecord) -> Result<i32, String> {
    match r.kind {
        FdKind::File | FdKind::Directory | FdKind::Device => open_path(r),
        FdKind::Pagemap => std::fs::File::open("/proc/self/pagemap")
            .map(|f| f.into_raw_fd())
            .map_err(|e| format!("reopening /proc/self/pagemap: {e}")),
        FdKind::Userfaultfd => {
            // fdinfo shows the kernel's own "API done" bit (UFFD_FEATURE_INITIALIZED, bit 31)
            // among the features; UFFDIO_API refuses it.
            let features = r.uffd_features & !(1 << 31);
            let u = ickpt::sys::userfault::Userfault::open(features)
                .map_err(|e| format!("making the userfaultfd again: {e}"))?;
            // SAFETY: F_DUPFD_CLOEXEC of a descriptor we own; `u` closes its own on drop.
            let fd = unsafe { libc::fcntl(u.raw(), libc::F_DUPFD_CLOEXEC, 0) };
            if fd < 0 {
                return Err(os("duplicating the userfaultfd".into()));
            }
            Ok(fd)
        }
        FdKind::Other => Err(format!(
            "descriptor {} ({}) cannot be restored",
            r.fd, r.path
        )),
    }
}

/// Make the local store directory `store` again, with its lock file and the identity `id` of
/// the tiers it was read from, if it is gone and the program had them open (a restart from a
/// lower tier, on another node).
pub fn recreate_store(
    record: &ProcessRecord,
    store: Option<&std::path::Path>,
    id: Option<ickpt::store::StoreId>,
) -> Result<(), String> {
    // The record's paths are absolute (as /proc/self/fd reads them).
    let store = store.and_then(|s| std::path::absolute(s).ok());
    // A store made as its writer makes one (its marker and lock file), then let go; in an
    // empty directory too (the object tier's drain watches it from the start).
    let made = |d: &&std::path::Path| d.join(ickpt::store::MARKER).exists();
    if let Some(dir) = store.as_deref().filter(|d| !made(d)) {
        let held = record
            .fds
            .iter()
            .any(|r| std::path::Path::new(&r.path) == dir);
        if held {
            use ickpt::store::Store;
            let again = |e: String| format!("making the local store {} again: {e}", dir.display());
            let local =
                ickpt::store::DirStore::open_write(dir).map_err(|e| again(e.to_string()))?;
            if let Some(id) = id {
                local.set_identity(id).map_err(|e| again(e.to_string()))?;
            }
        }
    }
    record
        .fds
        .iter()
        .try_for_each(|r| recreate_in_store(r, store.as_deref()))
}

/// Close everything but 0-2, then open every recorded descriptor above 2 at its number.
pub fn reopen(record: &ProcessRecord) -> Result<(), String> {
    // SAFETY: closes descriptors of this process only; nothing holds them any more (the
    // store and the scan are done).
    unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    let mut fds: Vec<&FdRecord> = record.fds.iter().filter(|r| r.fd > 2).collect();
    fds.sort_by_key(|r| r.fd);
    for r in fds {
        let fd = open_one(r)?;
        place(fd, r.fd, r.flags & libc::O_CLOEXEC != 0)?;
    }
    Ok(())
}

/// The process's working directory and umask as recorded.
pub fn cwd_and_umask(record: &ProcessRecord) -> Result<(), String> {
    std::env::set_current_dir(&record.cwd)
        .map_err(|e| format!("changing to the program's directory {}: {e}", record.cwd))?;
    // SAFETY: umask cannot fail.
    unsafe { libc::umask(record.umask as libc::mode_t) };
    Ok(())
}
