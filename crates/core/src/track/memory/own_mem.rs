//! Memory the fault handler writes, kept in anonymous mappings ickpt makes itself.
//!
//! The handler must never write to a page the application protected: it would fault inside
//! the handler with SIGSEGV blocked, and the kernel would kill the process. Heap memory is
//! not safe for this (ickpt's own allocations share pages with small application buffers
//! that get protected), so counters, bitmaps, page states and copy-on-write slots live in
//! mappings of their own, and the registry refuses to protect any range that covers one.

// Unsafe allowed here (lib.rs fences it): ickpt's own mappings, which the signal handler writes.
#![allow(unsafe_code)]

use crate::sys::mem::Mapping;
use crate::sys::page_size;
use std::io;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8};

/// Types whose all-zero bytes are a valid value and that are shared only through `&`.
///
/// # Safety
/// Implementors must be valid when zero-initialised and sound to share between threads.
pub unsafe trait ZeroValid: Sync {}
// SAFETY: atomics are valid at zero and designed for shared access.
unsafe impl ZeroValid for AtomicU8 {}
// SAFETY: as above.
unsafe impl ZeroValid for AtomicU32 {}
// SAFETY: as above.
unsafe impl ZeroValid for AtomicU64 {}

/// A zeroed slice of `T` in a private mapping of its own.
pub struct OwnSlice<T: ZeroValid> {
    map: Mapping,
    len: usize,
    _t: PhantomData<T>,
}

// SAFETY: the mapping is plain memory; `T: ZeroValid` is `Sync` and accessed only through `&`.
unsafe impl<T: ZeroValid> Send for OwnSlice<T> {}
// SAFETY: as above.
unsafe impl<T: ZeroValid> Sync for OwnSlice<T> {}

impl<T: ZeroValid> OwnSlice<T> {
    pub fn new(len: usize) -> io::Result<Self> {
        Ok(OwnSlice {
            map: map_bytes(len.max(1).checked_mul(size_of::<T>()))?,
            len,
            _t: PhantomData,
        })
    }

    /// As `new`, for state a whole-process restart clears before it is used again, which
    /// that checkpoint therefore need not store (`own_spans::mark_scratch`).
    pub fn scratch(len: usize) -> io::Result<Self> {
        let s = Self::new(len)?;
        crate::sys::own_spans::mark_scratch(s.map.ptr() as usize);
        Ok(s)
    }

    /// The mapping's address range, which no protected region may cover.
    pub fn span(&self) -> (usize, usize) {
        span(&self.map)
    }
}

impl<T: ZeroValid> std::ops::Deref for OwnSlice<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: the mapping holds `len` zero-initialised (valid, per ZeroValid) `T`s,
        // lives as long as `self`, and is only accessed through shared references.
        unsafe { std::slice::from_raw_parts(self.map.ptr().cast::<T>(), self.len) }
    }
}

/// Raw bytes in a private mapping of their own (copy-on-write slots).
pub struct OwnBytes {
    map: Mapping,
}

impl OwnBytes {
    pub fn new(len: usize) -> io::Result<Self> {
        Ok(OwnBytes {
            map: map_bytes(Some(len.max(1)))?,
        })
    }

    /// `len` bytes whose content means nothing between two checkpoints (copy-on-write
    /// slots, staging and scan buffers): a whole-process checkpoint does not store them.
    pub fn scratch(len: usize) -> io::Result<Self> {
        let b = Self::new(len)?;
        crate::sys::own_spans::mark_scratch(b.as_ptr() as usize);
        Ok(b)
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.map.ptr()
    }

    pub fn span(&self) -> (usize, usize) {
        span(&self.map)
    }

    /// The whole mapping (a multiple of the page size), for its one owner.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is live and `map.len()` bytes long; &mut self makes it exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.map.ptr(), self.map.len()) }
    }
}

/// A growable vector of plain values in scratch memory (`OwnBytes::scratch`): state that
/// lives only until the next checkpoint's commit, which a whole-process checkpoint need not
/// store, and which on ickpt's heap would be copied by every capture. An [`OwnArray`] that
/// grows by moving into one twice as large.
pub struct ScratchVec<T: Copy> {
    arr: Option<OwnArray<T>>,
}

impl<T: Copy> Default for ScratchVec<T> {
    fn default() -> Self {
        ScratchVec { arr: None }
    }
}

impl<T: Copy> ScratchVec<T> {
    pub fn push(&mut self, v: T) -> io::Result<()> {
        if let Some(a) = &mut self.arr {
            if a.push(v) {
                return Ok(());
            }
        }
        let cap = self.arr.as_ref().map_or(0, |a| a.capacity());
        self.grow((cap * 2).max(page_size() / size_of::<T>().max(1)))?;
        let pushed = self.arr.as_mut().is_some_and(|a| a.push(v));
        debug_assert!(pushed, "room was made above");
        Ok(())
    }

    /// Room for `more` values past the ones held, in one move at most.
    pub fn reserve(&mut self, more: usize) -> io::Result<()> {
        let (len, cap) = self
            .arr
            .as_ref()
            .map_or((0, 0), |a| (a.len(), a.capacity()));
        let want = len
            .checked_add(more)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        if want > cap {
            self.grow(want.max(cap * 2))?;
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.arr.as_ref().map_or(0, |a| a.len())
    }

    pub fn as_slice(&self) -> &[T] {
        self.arr.as_ref().map_or(&[], |a| a.as_slice())
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.arr.as_mut().map_or(&mut [], |a| a.as_mut_slice())
    }

    /// Move into a scratch array with room for `cap` values (more than held).
    fn grow(&mut self, cap: usize) -> io::Result<()> {
        let mut new = OwnArray::scratch(cap.max(1))?;
        for &v in self.as_slice() {
            new.push(v);
        }
        self.arr = Some(new);
        Ok(())
    }
}

/// A mapping of `bytes` rounded up to whole pages (unmapped when dropped).
fn map_bytes(bytes: Option<usize>) -> io::Result<Mapping> {
    let map_len = bytes
        .and_then(|b| b.checked_next_multiple_of(page_size()))
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
    Mapping::new(map_len)
}

fn span(m: &Mapping) -> (usize, usize) {
    (m.ptr() as usize, m.ptr() as usize + m.len())
}

/// A fixed-capacity vector of plain values in a mapping of its own, for a thread of ickpt's
/// that must never write a page the application may protect (the userfaultfd handler: a
/// fault of its own would wait for itself). It never reallocates.
pub struct OwnArray<T: Copy> {
    mem: OwnBytes,
    cap: usize,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Copy> OwnArray<T> {
    pub fn new(cap: usize) -> io::Result<Self> {
        let bytes = cap
            .checked_mul(size_of::<T>())
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        Ok(OwnArray {
            mem: OwnBytes::new(bytes)?,
            cap,
            len: 0,
            _t: PhantomData,
        })
    }

    /// As `new`, in scratch memory (`OwnBytes::scratch`).
    pub fn scratch(cap: usize) -> io::Result<Self> {
        let a = Self::new(cap)?;
        crate::sys::own_spans::mark_scratch(a.mem.as_ptr() as usize);
        Ok(a)
    }

    pub fn span(&self) -> (usize, usize) {
        self.mem.span()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn as_slice(&self) -> &[T] {
        // SAFETY: the first `len` values were written by `push`, inside the mapping, which
        // is page-aligned (aligned for any T) and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.mem.as_ptr().cast::<T>(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as `as_slice`; &mut self makes it exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.mem.as_ptr().cast::<T>(), self.len) }
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Append `v`; false when full.
    pub fn push(&mut self, v: T) -> bool {
        if self.len == self.cap {
            return false;
        }
        // SAFETY: `len < cap`, so the slot lies inside the mapping, which is page-aligned
        // (aligned for any T) and written only through `&mut self`.
        unsafe { self.mem.as_ptr().cast::<T>().add(self.len).write(v) };
        self.len += 1;
        true
    }

    /// Keep the elements for which `keep` returns true (order not kept).
    pub fn retain(&mut self, mut keep: impl FnMut(&mut T) -> bool) {
        let mut i = 0;
        while i < self.len {
            let base = self.mem.as_ptr().cast::<T>();
            // SAFETY: `i < len`: an initialised element inside the mapping.
            let item = unsafe { &mut *base.add(i) };
            if keep(item) {
                i += 1;
            } else {
                self.len -= 1;
                // SAFETY: both indices are below the old length, so initialised.
                unsafe { base.add(i).write(base.add(self.len).read()) };
            }
        }
    }

    /// The whole capacity as a writable buffer (for the kernel to fill).
    ///
    /// # Safety
    /// `T` must be valid for any bytes, zero included (plain integer records).
    pub unsafe fn buffer(&mut self) -> &mut [T] {
        // SAFETY: the mapping holds `cap` T-sized, T-aligned slots, zeroed at creation,
        // and the caller guarantees any bytes are a valid T.
        unsafe { std::slice::from_raw_parts_mut(self.mem.as_ptr().cast::<T>(), self.cap) }
    }
}

#[cfg(test)]
mod tests {
    use super::ScratchVec;

    /// Values pushed past several moves into larger mappings read back in order, and the
    /// mapping they end in is scratch memory, which a whole-process checkpoint does not
    /// store.
    #[test]
    fn a_scratch_vector_keeps_its_values_as_it_grows() {
        let mut v: ScratchVec<(u64, u32)> = ScratchVec::default();
        assert!(v.as_slice().is_empty());
        for i in 0..5000u32 {
            v.push((u64::from(i) * 3, i)).unwrap();
        }
        v.as_mut_slice()[7].1 = 70;
        assert_eq!(v.len(), 5000);
        assert!(v
            .as_slice()
            .iter()
            .enumerate()
            .all(|(i, &(a, b))| a == i as u64 * 3 && b == if i == 7 { 70 } else { i as u32 }));
        assert!(crate::sys::own_spans::in_scratch(
            v.as_slice().as_ptr() as usize
        ));
    }
}
