//! Words the fault handler writes, kept in anonymous mappings ickpt makes itself.
//!
//! The handler must never write to a page the application protected: it would fault inside
//! the handler with SIGSEGV blocked, and the kernel would kill the process. Heap memory is
//! not safe for this (ickpt's own allocations share pages with small application buffers
//! that get protected), so counters and dirty bitmaps live in mappings of their own, and
//! the registry refuses to protect any range that covers one of them.

use crate::sys::{mem, page_size};
use std::io;
use std::sync::atomic::AtomicU64;

pub struct OwnWords {
    ptr: *mut AtomicU64,
    len: usize,
    map_len: usize,
}

// SAFETY: the mapping is plain memory accessed only through atomics.
unsafe impl Send for OwnWords {}
// SAFETY: as above.
unsafe impl Sync for OwnWords {}

impl OwnWords {
    /// `len` zeroed words in a fresh private mapping.
    pub fn new(len: usize) -> io::Result<OwnWords> {
        let bytes = len
            .max(1)
            .checked_mul(8)
            .and_then(|b| b.checked_next_multiple_of(page_size()))
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        let ptr = mem::map_anonymous(bytes)?;
        Ok(OwnWords {
            ptr: ptr.cast(),
            len,
            map_len: bytes,
        })
    }

    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: the mapping holds `len` zero-initialised (valid) AtomicU64s, lives as long
        // as `self`, and is only accessed through atomics.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The mapping's address range, which no protected region may cover.
    pub fn span(&self) -> (usize, usize) {
        (self.ptr as usize, self.ptr as usize + self.map_len)
    }
}

impl Drop for OwnWords {
    fn drop(&mut self) {
        // SAFETY: the mapping was made in `new` and is released once, here.
        let _ = unsafe { mem::unmap(self.ptr.cast(), self.map_len) };
    }
}
