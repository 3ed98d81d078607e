//! The system calls the capture makes that `std` has no call for, each raw or a libc
//! wrapper that allocates nothing: the capture runs while another thread may hold malloc's
//! lock. The only unsafe code of the crate.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Read directory entries of `dir` into `buf` with `getdents64`; 0 at the end. `read_dir`
/// is not used because glibc's `opendir` allocates its buffer with malloc.
pub fn getdents64(dir: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of its length, which is the count passed; the
    // descriptor is borrowed, so open for the call's duration.
    let n = unsafe {
        libc::syscall(
            libc::SYS_getdents64,
            dir.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// The kernel's `struct sigaction` (x86-64, and aarch64 alike).
#[repr(C)]
#[derive(Default)]
struct KernelSigaction {
    handler: u64,
    flags: u64,
    restorer: u64,
    mask: u64,
}

/// Signal `sig`'s action as the kernel holds it: `rt_sigaction` with no new action and the
/// kernel's 8-byte mask. Not libc's `sigaction`, which hides the restorer.
pub fn sigaction(sig: i32) -> io::Result<[u64; 4]> {
    let mut old = KernelSigaction::default();
    // SAFETY: a NULL new action only reads; `old` is a valid, writable kernel sigaction of
    // the size the kernel expects for a sigsetsize of 8.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            std::ptr::null::<KernelSigaction>(),
            &mut old as *mut KernelSigaction,
            8usize,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok([old.handler, old.flags, old.restorer, old.mask])
}

/// `uname`'s release and version strings.
pub fn uname() -> io::Result<(String, String)> {
    // SAFETY: utsname is plain character arrays, for which all zeros is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((c_chars(&u.release), c_chars(&u.version)))
}

/// A NUL-terminated field of a C struct (the whole array if it has no NUL).
fn c_chars(field: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = field
        .iter()
        .map(|&c| c as u8)
        .take_while(|&c| c != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The program break now: `brk(0)` returns it without moving it. `/proc/self/stat` has
/// `start_brk` but not the break itself.
pub fn brk() -> u64 {
    // SAFETY: brk with address 0 never changes the break; it only returns it.
    unsafe { libc::syscall(libc::SYS_brk, 0usize) as u64 }
}

/// The base page size (glibc reads it from the auxiliary vector, without allocating).
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 }
}

/// `getitimer(which)` as (interval, value) in microseconds; zeros when it fails.
pub fn getitimer_us(which: libc::c_int) -> (u64, u64) {
    // SAFETY: a zeroed itimerval is valid; getitimer only writes it.
    let mut t: libc::itimerval = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    if unsafe { libc::getitimer(which, &mut t) } != 0 {
        return (0, 0);
    }
    let us = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
    (us(t.it_interval), us(t.it_value))
}

/// `timer_gettime(id)` as (interval, time left) in nanoseconds.
pub fn timer_gettime_ns(id: u32) -> std::io::Result<(u64, u64)> {
    // SAFETY: a zeroed itimerspec is valid; the kernel only writes it.
    let mut t: libc::itimerspec = unsafe { std::mem::zeroed() };
    // SAFETY: the raw call takes the kernel's int id (glibc's wrapper takes its own
    // `timer_t`, a pointer for SIGEV_THREAD timers) and a valid out-pointer.
    if unsafe { libc::syscall(libc::SYS_timer_gettime, id as libc::c_int, &mut t) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let ns = |ts: libc::timespec| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    Ok((ns(t.it_interval), ns(t.it_value)))
}

/// `prctl(PR_TIMER_CREATE_RESTORE_IDS, PR_TIMER_CREATE_RESTORE_IDS_GET)` answers (Linux
/// 6.15 on): `timer_create` can be told the id to give.
pub fn timer_restore_ids_known() -> bool {
    // SAFETY: a query of integers; it changes nothing.
    unsafe { libc::prctl(crate::capture::PR_TIMER_CREATE_RESTORE_IDS, 2, 0, 0, 0) >= 0 }
}

/// `readlinkat(dir, name)`: where the link `name` in `dir` points, as bytes.
pub fn readlinkat(dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: `name` is NUL-terminated; `buf` is valid for writes of its length, which is
    // the size passed; the descriptor is borrowed, so open for the call's duration.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // The call fills the buffer when the target is longer: refuse rather than record a
    // path cut short.
    if n as usize == buf.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{name:?} points to a path of {} bytes or more", buf.len()),
        ));
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// `openat(dir, name, O_RDONLY | O_CLOEXEC)`.
pub fn openat(dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> io::Result<std::fs::File> {
    // SAFETY: `name` is NUL-terminated; the descriptor is borrowed, so open for the call.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// What `fd` refers to, by `fstat`: its device, inode, and type and mode (`st_mode`).
pub fn fstat_identity(fd: i32) -> io::Result<(u64, u64, u32)> {
    // SAFETY: stat is plain integers, for which all zeros is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat; a closed `fd` is an error, not undefined.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.st_dev, st.st_ino, st.st_mode))
}

/// The flags fdinfo shows for `fd` (its open file's status flags, with O_CLOEXEC when the
/// descriptor is closed on exec) and its file position (0 where it cannot seek).
pub fn flags_and_offset(fd: i32) -> io::Result<(i32, u64)> {
    // Each call checked before the next, so that the error is its own.
    // SAFETY: fcntl and lseek on a descriptor number; a closed one is EBADF, not undefined.
    let status = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if status < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    let fdflags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if fdflags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    let pos = unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) };
    if pos < 0 {
        // ESPIPE: nothing to seek (a userfaultfd, a pipe), which fdinfo shows as 0.
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ESPIPE) {
            return Err(e);
        }
    }
    let cloexec = if fdflags & libc::FD_CLOEXEC != 0 {
        libc::O_CLOEXEC
    } else {
        0
    };
    Ok((status | cloexec, pos.max(0) as u64))
}
