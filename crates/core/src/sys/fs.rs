//! Files relative to an open directory (never following links), file locking, and what a
//! forked child must let go of.

use ickpt_format::Piece;
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
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

/// Release a lock taken with [`try_lock_exclusive`] now, not when the last copy of the
/// descriptor closes: a child spawned by another thread shares that copy until it execs.
/// Only the process that took the lock may call this (a child would release its parent's).
pub fn unlock(f: &File) -> io::Result<()> {
    // SAFETY: flock on a file descriptor we own has no memory-safety preconditions.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_UN) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What a directory entry is, seen without following links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

impl FileKind {
    fn of_mode(mode: libc::mode_t) -> FileKind {
        match mode & libc::S_IFMT {
            libc::S_IFREG => FileKind::File,
            libc::S_IFDIR => FileKind::Dir,
            libc::S_IFLNK => FileKind::Symlink,
            _ => FileKind::Other,
        }
    }

    fn of_dirent_type(t: u8) -> Option<FileKind> {
        match t {
            libc::DT_REG => Some(FileKind::File),
            libc::DT_DIR => Some(FileKind::Dir),
            libc::DT_LNK => Some(FileKind::Symlink),
            libc::DT_UNKNOWN => None,
            _ => Some(FileKind::Other),
        }
    }
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// openat(2) relative to the directory `dir`. The caller chooses the flags (O_CLOEXEC is
/// always added); `mode` applies when O_CREAT creates the file.
pub fn open_at(dir: &File, name: &OsStr, flags: i32, mode: u32) -> io::Result<File> {
    let n = c_name(name)?;
    // SAFETY: `n` is a valid NUL-terminated string for the duration of the call; the
    // descriptor returned is owned by nobody else, so handing it to File is sound.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), n.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and is open and owned by us alone.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// What `name` in `dir` is, without following a link; None when there is no such entry.
pub fn kind_at(dir: &File, name: &OsStr) -> io::Result<Option<FileKind>> {
    let n = c_name(name)?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `n` is NUL-terminated and `st` is writable memory of the size fstatat fills.
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            n.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: fstatat succeeded, so it filled `st`.
    Ok(Some(FileKind::of_mode(unsafe { st.assume_init() }.st_mode)))
}

/// renameat2(2) within `dir`; with `noreplace`, fails with EEXIST rather than replace `to`
/// (and with EINVAL on file systems without RENAME_NOREPLACE: FUSE, NFS).
pub fn rename_at(dir: &File, from: &OsStr, to: &OsStr, noreplace: bool) -> io::Result<()> {
    let (f, t) = (c_name(from)?, c_name(to)?);
    let flags = if noreplace { libc::RENAME_NOREPLACE } else { 0 };
    let d = dir.as_raw_fd();
    // SAFETY: both names are valid NUL-terminated strings for the duration of the call.
    check(unsafe { libc::renameat2(d, f.as_ptr(), d, t.as_ptr(), flags) })
}

/// Start writing `len` bytes of `f` at `offset` to the device without waiting for them
/// (sync_file_range, SYNC_FILE_RANGE_WRITE). Only a hint: it makes nothing durable.
pub fn start_writeback(f: &File, offset: u64, len: u64) -> io::Result<()> {
    let (offset, len) = (offset as libc::off64_t, len as libc::off64_t);
    // SAFETY: a plain system call on an open descriptor; no memory is passed.
    check(unsafe { libc::sync_file_range(f.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE) })
}

/// Tell the kernel `f` is about to be read front to back (posix_fadvise SEQUENTIAL, which
/// widens its readahead). Only a hint.
pub fn advise_sequential(f: &File) -> io::Result<()> {
    // SAFETY: a plain system call on an open descriptor; no memory is passed.
    match unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL) } {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Skipped bytes land here, at most this many per `iovec`.
const DISCARD: usize = 64 << 10;
/// The kernel's limit on `iovec`s per call (`IOV_MAX`).
const IOV_MAX: usize = 1024;

/// Read `pieces` back to back from `offset` of `f`, each in full, with as few `preadv` calls as
/// the kernel's `IOV_MAX` allows: a kept piece's bytes into its buffer, a skipped piece's into
/// one scratch buffer that every skip shares and nothing reads. A short read continues where
/// it stopped; end of file before the last piece is `UnexpectedEof`.
pub fn read_pieces_at(f: &File, pieces: &mut [Piece<'_>], offset: u64) -> io::Result<()> {
    let longest_skip = pieces
        .iter()
        .filter_map(|p| match p {
            Piece::Skip(n) => Some(*n),
            Piece::Keep(_) => None,
        })
        .max()
        .unwrap_or(0);
    let mut discard = vec![0u8; longest_skip.min(DISCARD)];
    let scratch = discard.as_mut_ptr();
    let mut iov = Vec::with_capacity(pieces.len());
    for p in pieces.iter_mut() {
        match p {
            Piece::Keep(b) => iov.push(libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            }),
            Piece::Skip(n) => {
                let mut left = *n;
                while left > 0 {
                    let k = left.min(DISCARD);
                    iov.push(libc::iovec {
                        iov_base: scratch.cast(),
                        iov_len: k,
                    });
                    left -= k;
                }
            }
        }
    }
    iov.retain(|v| v.iov_len > 0);
    let (mut first, mut at) = (0usize, offset);
    while first < iov.len() {
        let count = (iov.len() - first).min(IOV_MAX) as libc::c_int;
        let pos = libc::off64_t::try_from(at).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        // SAFETY: each iovec points into a buffer borrowed mutably for this call, no longer
        // than it: a kept piece's (`pieces` is borrowed for the call), or `discard`, which only
        // the kernel writes while it lives and nothing reads.
        let n = unsafe { libc::preadv64(f.as_raw_fd(), iov[first..].as_ptr(), count, pos) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        at += n as u64;
        let mut n = n as usize;
        while n > 0 {
            let v = &mut iov[first];
            if n >= v.iov_len {
                n -= v.iov_len;
                first += 1;
            } else {
                // SAFETY: `n` is less than the iovec's length, so the pointer stays inside it.
                v.iov_base = unsafe { v.iov_base.cast::<u8>().add(n) }.cast();
                v.iov_len -= n;
                n = 0;
            }
        }
    }
    drop(discard);
    Ok(())
}

/// linkat(2) within `dir`, never following a link at `from`; EEXIST when `to` exists.
pub fn link_at(dir: &File, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let (f, t) = (c_name(from)?, c_name(to)?);
    let d = dir.as_raw_fd();
    // SAFETY: both names are valid NUL-terminated strings for the duration of the call.
    check(unsafe { libc::linkat(d, f.as_ptr(), d, t.as_ptr(), 0) })
}

/// unlinkat(2) of a non-directory in `dir` (a link itself, never its target).
pub fn unlink_at(dir: &File, name: &OsStr) -> io::Result<()> {
    let n = c_name(name)?;
    // SAFETY: `n` is a valid NUL-terminated string for the duration of the call.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), n.as_ptr(), 0) })
}

/// The entries of the open directory `dir` (without `.` and `..`), each with its kind when
/// the file system reports it in the listing. Read with getdents64 into a buffer of our own,
/// not readdir: a whole-process checkpoint (`ickpt run`) lists the store while the program's
/// threads are stopped anywhere, perhaps inside malloc, which opendir would call.
pub fn list_at(dir: &File) -> io::Result<Vec<(OsString, Option<FileKind>)>> {
    // A fresh open description of the directory: `dir`'s offset, shared with every
    // duplicate, stays where it is.
    let dot = c_name(OsStr::new("."))?;
    // SAFETY: a valid NUL-terminated name, relative to a directory we hold open.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            dot.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let listing = unsafe { File::from_raw_fd(fd) };
    let mut out = Vec::new();
    let mut buf = vec![0u8; 32 << 10];
    loop {
        // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                listing.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(out);
        }
        let mut at = 0usize;
        let n = n as usize;
        // struct linux_dirent64: ino u64, off i64, reclen u16, type u8, name NUL-terminated.
        while at + 19 <= n {
            let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
            if reclen < 20 || at + reclen > n {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            let t = buf[at + 18];
            let name = &buf[at + 19..at + reclen];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            let name = OsStr::from_bytes(name);
            if name != "." && name != ".." {
                out.push((name.to_os_string(), FileKind::of_dirent_type(t)));
            }
            at += reclen;
        }
    }
}

/// The effective user id, whom a store directory must belong to.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and has no preconditions.
    unsafe { libc::geteuid() }
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
}

/// Install the handler forked children run (once per process): it releases store locks.
/// (Tracking resets its own state in children: `track::ensure_fork_reset`.)
fn ensure_fork_handler() {
    AT_FORK.call_once(|| super::thread::at_fork_child(in_forked_child));
}

/// Remember `fd` as a store lock to close in forked children.
/// False when every slot is taken (the descriptor then stays open in children).
pub fn register_lock(fd: i32) -> bool {
    ensure_fork_handler();
    LOCK_FDS.iter().any(|slot| {
        slot.compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    })
}

/// Forget `fd` as a store lock. False when it was not registered any more: in a forked
/// child the fork handler has closed it, and its number may since name another file.
pub fn unregister_lock(fd: i32) -> bool {
    LOCK_FDS.iter().any(|slot| {
        slot.compare_exchange(fd, -1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn byte(i: usize) -> u8 {
        (i * 7 % 251) as u8
    }

    /// A file of `len` known bytes, removed when the test ends.
    fn known_file(name: &str, len: usize) -> (File, std::path::PathBuf) {
        let path = std::env::temp_dir().join(format!("ickpt-{name}-{}", std::process::id()));
        let mut f = File::create(&path).unwrap();
        f.write_all(&(0..len).map(byte).collect::<Vec<_>>())
            .unwrap();
        (File::open(&path).unwrap(), path)
    }

    /// More pieces than one preadv takes (IOV_MAX), skips longer than the discard buffer,
    /// empty pieces, from an offset: every kept piece gets exactly its bytes.
    #[test]
    fn pieces_past_one_call_and_long_skips_land_where_they_belong() {
        let (f, path) = known_file("pieces", 16 << 20);
        let offset = 12_345usize;
        let shapes: Vec<(usize, usize)> = (0..3000)
            .map(|i| {
                let skip = if i % 40 == 39 {
                    DISCARD + 77
                } else {
                    [0, 1, 4096][i % 3]
                };
                (1 + i * 13 % 900, skip)
            })
            .collect();
        let mut bufs: Vec<Vec<u8>> = shapes.iter().map(|&(keep, _)| vec![0; keep]).collect();
        let mut pieces = Vec::new();
        for (b, &(_, skip)) in bufs.iter_mut().zip(&shapes) {
            pieces.push(Piece::Keep(b));
            pieces.push(Piece::Skip(skip));
        }
        read_pieces_at(&f, &mut pieces, offset as u64).unwrap();
        drop(pieces);
        let mut at = offset;
        for (b, &(keep, skip)) in bufs.iter().zip(&shapes) {
            let want: Vec<u8> = (at..at + keep).map(byte).collect();
            assert!(b[..] == want[..], "the piece at {at} holds other bytes");
            at += keep + skip;
        }
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn pieces_past_the_end_of_the_file_are_unexpected_eof() {
        let (f, path) = known_file("pieces-eof", 10_000);
        let mut b = vec![0u8; 100];
        let mut pieces = [Piece::Skip(9_950), Piece::Keep(&mut b)];
        let e = read_pieces_at(&f, &mut pieces, 0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let _ = std::fs::remove_file(path);
    }
}
