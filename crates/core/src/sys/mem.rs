//! Anonymous mappings, protection changes and raw copies into application memory.

use std::io;

/// Protection for tracked pages between checkpoints: reads free, first write traps.
pub const PROT_TRACKED: i32 = libc::PROT_READ;
pub const PROT_OPEN: i32 = libc::PROT_READ | libc::PROT_WRITE;

/// Map `len` bytes of zeroed, private, anonymous memory (page-aligned).
pub fn map_anonymous(len: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh anonymous private mapping with a NULL hint aliases no existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

/// Unmap a mapping made by [`map_anonymous`].
///
/// # Safety
/// `ptr..ptr+len` must be a mapping this process owns and nothing may use it afterwards.
pub unsafe fn unmap(ptr: *mut u8, len: usize) -> io::Result<()> {
    // SAFETY: the caller guarantees the range is ours and unused from now on.
    if unsafe { libc::munmap(ptr.cast(), len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Change protection of whole pages. Only the protection bits change: no memory is
/// freed or aliased, so this is safe for any page-aligned range the caller tracks.
pub fn protect(addr: usize, len: usize, prot: i32) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    // SAFETY: mprotect on a range of our own mapped pages alters permissions only; a bad
    // range yields an error (ENOMEM/EINVAL), never undefined behaviour in this process.
    if unsafe { libc::mprotect(addr as *mut libc::c_void, len, prot) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `MADV_COLLAPSE` (Linux 6.1+): collapse the range into huge pages now.
pub const MADV_COLLAPSE: i32 = 25;

/// madvise(2) on whole pages of the application's tracked memory. Only advice that keeps
/// the contents is used (huge page hints), so no byte changes.
pub fn advise(addr: usize, len: usize, advice: i32) -> io::Result<()> {
    // SAFETY: madvise with THP advice on our own mapped pages changes how they are backed,
    // never what they hold; a bad range is an error.
    if unsafe { libc::madvise(addr as *mut libc::c_void, len, advice) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Copy `src` into application memory at `dst`.
///
/// # Safety
/// `dst..dst+src.len()` must be writable memory the application handed to ickpt, and not
/// overlap `src`.
pub unsafe fn copy_in(dst: usize, src: &[u8]) {
    // SAFETY: the caller guarantees the destination is valid, writable and disjoint.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len()) }
}

/// Copy application memory at `src` into `dst`.
///
/// # Safety
/// `src..src+dst.len()` must be readable memory that stays mapped during the call.
pub unsafe fn copy_out(dst: &mut [u8], src: usize) {
    // SAFETY: the caller guarantees the source range is mapped and readable.
    unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) }
}

/// Fail unless every page of `addr..addr+len` (page-aligned) is mapped. msync(MS_ASYNC) on
/// anonymous memory does no I/O and reports ENOMEM for any hole.
pub fn check_mapped(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: msync with MS_ASYNC only inspects the range; a bad range is an error.
    if unsafe { libc::msync(addr as *mut libc::c_void, len, libc::MS_ASYNC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
