//! System calls into tracked memory from C (see `crate::tracked_io`). The wrappers follow their
//! system call's convention, not ickpt_result: they return what it returns and set errno,
//! so they can replace `read`, `pread` and `recv` in place (docs/abi.md, rule 10).

use super::boundary::guard;
use super::ickpt_result;
use crate::error::Error;
use std::ffi::c_void;

/// Take the first-write fault on every page of `ptr..ptr+len` now, so a system call may write
/// there. Bytes are unchanged. Needed before a system call writes into protected memory with
/// the mprotect backend (or uffd-async while a commit runs); harmless with the others.
#[no_mangle]
pub extern "C" fn ickpt_prepare_write(ptr: *mut c_void, len: usize) -> ickpt_result {
    guard(|| {
        if len == 0 {
            return Ok(());
        }
        if ptr.is_null() {
            return Err(Error::Null {
                what: "ickpt_prepare_write's ptr",
            });
        }
        // SAFETY: the caller passes `len` bytes of its own writable memory (ickpt.h).
        let buf = unsafe { std::slice::from_raw_parts_mut(ptr.cast(), len) };
        crate::tracked_io::prepare_write(buf);
        Ok(())
    })
}

/// Run `call` on the caller's buffer through `wrapped`, or plainly when there is no buffer
/// to prepare (NULL or empty: the system call reports what it reports).
fn syscall(
    buf: *mut c_void,
    count: usize,
    wrapped: impl FnOnce(&mut [u8]) -> std::io::Result<usize>,
    plain: impl FnOnce() -> isize,
) -> isize {
    if buf.is_null() || count == 0 {
        return plain();
    }
    // SAFETY: the caller passes `count` writable bytes, as the system call requires.
    let b = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), count) };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| wrapped(b))) {
        Ok(Ok(n)) => n as isize,
        Ok(Err(e)) => {
            crate::sys::io::set_errno(e.raw_os_error().unwrap_or(libc::EIO));
            -1
        }
        Err(_) => {
            crate::sys::io::set_errno(libc::EIO);
            -1
        }
    }
}

/// read(2) into memory that may be protected. Returns and sets errno as read(2).
#[no_mangle]
pub extern "C" fn ickpt_read(fd: i32, buf: *mut c_void, count: usize) -> isize {
    syscall(
        buf,
        count,
        |b| crate::tracked_io::read(fd, b),
        // SAFETY: the arguments go to read(2) unchanged; it checks them.
        || unsafe { libc::read(fd, buf, count) },
    )
}

/// pread(2) into memory that may be protected. Returns and sets errno as pread(2).
#[no_mangle]
pub extern "C" fn ickpt_pread(fd: i32, buf: *mut c_void, count: usize, offset: i64) -> isize {
    syscall(
        buf,
        count,
        |b| crate::tracked_io::pread(fd, b, offset),
        // SAFETY: as in ickpt_read.
        || unsafe { libc::pread(fd, buf, count, offset) },
    )
}

/// recv(2) into memory that may be protected. Returns and sets errno as recv(2).
#[no_mangle]
pub extern "C" fn ickpt_recv(fd: i32, buf: *mut c_void, len: usize, flags: i32) -> isize {
    syscall(
        buf,
        len,
        |b| crate::tracked_io::recv(fd, b, flags),
        // SAFETY: as in ickpt_read.
        || unsafe { libc::recv(fd, buf, len, flags) },
    )
}
