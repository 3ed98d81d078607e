//! System calls that write into tracked memory. With the mprotect backend (and with
//! uffd-async while a commit fences its regions) the kernel cannot take a write fault inside a
//! system call on ickpt's behalf: read(2) into a write-protected buffer fails with EFAULT
//! (AI-Ckpt §3.4 wraps such calls). These helpers make the buffer writable first, through an
//! ordinary write fault, and retry if a checkpoint re-protected it in between. With the uffd
//! backend the kernel delivers such faults to ickpt's handler thread and the plain calls work.

use crate::sys;
use std::io;
use std::os::fd::RawFd;

/// Rounds of prepare-then-call before giving up on EFAULT (each needs a checkpoint from another
/// thread to land exactly between the two).
const ATTEMPTS: usize = 8;

/// Take the first-write fault on every page of `buf` now, from user space, so that a system
/// call may write into it. Changes no byte, even with other threads writing: each page's
/// first byte is rewritten with the value it holds, by compare-and-swap.
pub fn prepare_write(buf: &mut [u8]) {
    let ps = sys::page_size();
    let start = buf.as_ptr() as usize;
    let mut at = 0;
    while at < buf.len() {
        sys::io::rewrite_in_place(&mut buf[at]);
        // The first byte of the next page.
        at = ((start + at) & !(ps - 1)) + ps - start;
    }
}

fn retry_efault(buf: &mut [u8], mut call: impl FnMut(&mut [u8]) -> isize) -> io::Result<usize> {
    for _ in 0..ATTEMPTS {
        prepare_write(buf);
        let n = call(buf);
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EFAULT) {
            // EINTR included: the caller decides, as with the plain call.
            return Err(e);
        }
    }
    Err(io::Error::from_raw_os_error(libc::EFAULT))
}

/// read(2) into `buf`, which may be tracked memory.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    retry_efault(buf, |b| sys::io::read(fd, b))
}

/// pread(2) into `buf`, which may be tracked memory.
pub fn pread(fd: RawFd, buf: &mut [u8], offset: i64) -> io::Result<usize> {
    retry_efault(buf, |b| sys::io::pread(fd, b, offset))
}

/// recv(2) into `buf`, which may be tracked memory.
pub fn recv(fd: RawFd, buf: &mut [u8], flags: i32) -> io::Result<usize> {
    retry_efault(buf, |b| sys::io::recv(fd, b, flags))
}
