//! A region of application memory whose pages are tracked.

use super::bitmap::AtomicBitmap;
use crate::sys::page_size;
use std::io;

/// One protected region. The fault handler reaches it through the registry and touches
/// only its atomics.
pub struct TrackedRegion {
    pub id: u64,
    /// The application's pointer and length, any alignment.
    pub user_ptr: usize,
    pub user_len: usize,
    /// First byte of the first covering page.
    pub base: usize,
    pub npages: usize,
    /// Pages written since the last collection, and the count of write faults taken.
    pub dirty: AtomicBitmap,
}

impl TrackedRegion {
    pub fn new(id: u64, ptr: usize, len: usize) -> io::Result<Self> {
        let ps = page_size();
        let base = ptr & !(ps - 1);
        let npages = (ptr + len - base).div_ceil(ps);
        Ok(TrackedRegion {
            id,
            user_ptr: ptr,
            user_len: len,
            base,
            npages,
            dirty: AtomicBitmap::new(npages)?,
        })
    }

    /// Offset of the region's first byte within its first page.
    pub fn page_offset(&self) -> usize {
        self.user_ptr - self.base
    }

    /// Length of the covering pages in bytes.
    pub fn span_len(&self) -> usize {
        self.npages * page_size()
    }

    /// One past the last covering byte.
    pub fn span_end(&self) -> usize {
        self.base + self.span_len()
    }

    pub fn page_addr(&self, page: usize) -> usize {
        self.base + page * page_size()
    }

    pub fn contains(&self, addr: usize) -> bool {
        addr >= self.base && addr < self.span_end()
    }
}
