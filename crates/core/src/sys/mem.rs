//! Anonymous mappings, protection changes and raw copies into application memory. What can
//! break memory safety is either an `unsafe fn` or a method of a value whose making was the
//! unsafe step ([`TrackedPages`]); flags are types, so no call can pass one that would.

use std::io;

/// What ickpt sets tracked pages to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// Between checkpoints: reads free, the first write traps.
    Tracked,
    /// Readable and writable, as the application had them.
    Open,
}

impl Protection {
    fn bits(self) -> i32 {
        match self {
            Protection::Tracked => libc::PROT_READ,
            Protection::Open => libc::PROT_READ | libc::PROT_WRITE,
        }
    }
}

/// Page-aligned memory whose protection ickpt may change: the pages covering a tracked
/// region (or, in benchmarks, a mapping of their own). Making one is the unsafe step;
/// protecting its pages is then safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackedPages {
    base: usize,
    len: usize,
}

impl TrackedPages {
    /// The whole pages covering `ptr..ptr+len`, all of which must be mapped (checked: a
    /// range with a hole, or past the address space, is an error).
    ///
    /// # Safety
    /// The pages must be read-write memory of this process that stays mapped while this
    /// value is used, whose writes while read-only a fault handler of ickpt's lets through,
    /// which holds nothing that must stay read-only or inaccessible (code, guard pages), and
    /// to which no Rust reference is live while ickpt copies into it (a restore,
    /// through [`bytes_mut`](Self::bytes_mut)).
    pub unsafe fn covering(ptr: usize, len: usize) -> io::Result<TrackedPages> {
        let ps = super::page_size();
        let base = ptr & !(ps - 1);
        let too_big = || io::Error::from_raw_os_error(libc::ENOMEM);
        let len = (ptr.checked_add(len).ok_or_else(too_big)? - base)
            .checked_next_multiple_of(ps)
            .ok_or_else(too_big)?;
        check_mapped(base, len)?;
        Ok(TrackedPages { base, len })
    }

    /// `len` bytes of whole pages at `base`, unchecked (for a fault handler that has only
    /// the address; signal-safe).
    ///
    /// # Safety
    /// As [`covering`](Self::covering), and `base` and `len` are page-aligned.
    pub unsafe fn from_raw_parts(base: usize, len: usize) -> TrackedPages {
        TrackedPages { base, len }
    }

    /// First byte of the first page.
    pub fn base(&self) -> usize {
        self.base
    }

    /// Bytes covered, a whole number of pages.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copy `dst.len()` bytes at byte `offset` of these pages into `dst`.
    pub fn copy_out(&self, offset: usize, dst: &mut [u8]) {
        assert!(offset
            .checked_add(dst.len())
            .is_some_and(|end| end <= self.len));
        // SAFETY: in bounds (asserted) of pages the maker vouched are mapped and readable.
        unsafe { copy_out(dst, self.base + offset) }
    }

    /// The `len` bytes at byte `offset` of these pages, to write into (a restore).
    ///
    /// # Safety
    /// They must be writable now, and no other reference to any of them may exist while the
    /// slice lives (the maker vouched they are mapped and ickpt's to touch).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn bytes_mut(&self, offset: usize, len: usize) -> &mut [u8] {
        assert!(offset.checked_add(len).is_some_and(|end| end <= self.len));
        // SAFETY: in bounds (asserted) of mapped pages; writable and unaliased by the
        // caller's contract.
        unsafe { std::slice::from_raw_parts_mut((self.base + offset) as *mut u8, len) }
    }

    /// Whether every page is still mapped.
    pub fn mapped(&self) -> bool {
        check_mapped(self.base, self.len).is_ok()
    }

    /// Set every page to `prot`. Signal-safe.
    pub fn protect(&self, prot: Protection) -> io::Result<()> {
        protect(self.base, self.len, prot.bits())
    }

    /// Set `count` pages from page `first` to `prot`; pages outside these are refused
    /// (EINVAL). Signal-safe.
    pub fn protect_pages(&self, first: usize, count: usize, prot: Protection) -> io::Result<()> {
        let ps = super::page_size();
        match first.checked_add(count) {
            Some(end) if end <= self.len / ps => {
                protect(self.base + first * ps, count * ps, prot.bits())
            }
            _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }
}

/// Anonymous memory: the application's (`ickpt_malloc`) or ickpt's own (`OwnSlice`,
/// `OwnBytes`). Unmapped when dropped, or by [`Mapping::unmap`] to see the error.
#[derive(Debug)]
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a mapping is plain memory of the process, usable from any thread; this value
// only owns the right to unmap it.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` only reads the address and length. Writing the memory
// through its pointer from several threads is the owner's to coordinate (`OwnBytes`' users
// write disjoint parts, claimed through atomics; `OwnSlice` holds atomics).
unsafe impl Sync for Mapping {}

impl Mapping {
    /// `len` bytes of zeroed, private, anonymous memory (page-aligned), ickpt's own.
    pub fn new(len: usize) -> io::Result<Mapping> {
        Ok(Mapping {
            ptr: map_anonymous(len)?,
            len,
        })
    }

    /// `len` bytes as [`Mapping::new`], for the application (`ickpt_malloc`): not ickpt's own,
    /// so a whole-process checkpoint stores it with the program's memory.
    pub fn for_application(len: usize) -> io::Result<Mapping> {
        let m = Mapping::new(len)?;
        super::own_spans::forget(m.ptr as usize);
        Ok(m)
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Unmap now, reporting failure.
    pub fn unmap(self) -> io::Result<()> {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: made by `new`, unmapped once (drop will not run).
        unsafe { unmap(me.ptr, me.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: made by `new` and unmapped only here or in `unmap`, which skips this.
        let _ = unsafe { unmap(self.ptr, self.len) };
    }
}

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
    // The kernel maps whole pages.
    super::own_spans::note(p as usize, len.next_multiple_of(super::page_size()));
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
    super::own_spans::forget(ptr as usize);
    Ok(())
}

/// Change protection of whole pages: through [`TrackedPages`] above `sys`, and for the guard
/// page of an alternate signal stack (`altstack.rs`).
pub(super) fn protect(addr: usize, len: usize, prot: i32) -> io::Result<()> {
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
const MADV_COLLAPSE: i32 = 25;
/// `MADV_POPULATE_WRITE` (Linux 5.14+): back the range now, writable.
const MADV_POPULATE_WRITE: i32 = 23;

/// Advice ickpt gives about memory: only kinds that change how pages are backed, never what
/// they hold, so giving it for any range is safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// `MADV_HUGEPAGE`: back the range with huge pages where it can.
    HugePages,
    /// `MADV_COLLAPSE` (Linux 6.1+): collapse the range into huge pages now.
    Collapse,
    /// `MADV_POPULATE_WRITE` (Linux 5.14+): back every page of the range now, as a write
    /// would, leaving what backed pages hold as it is.
    PopulateWrite,
}

/// madvise(2) with advice that keeps the contents.
pub fn advise(addr: usize, len: usize, advice: Advice) -> io::Result<()> {
    let advice = match advice {
        Advice::HugePages => libc::MADV_HUGEPAGE,
        Advice::Collapse => MADV_COLLAPSE,
        Advice::PopulateWrite => MADV_POPULATE_WRITE,
    };
    // SAFETY: this advice changes how pages are backed, never what they hold, and a bad
    // range is an error.
    if unsafe { libc::madvise(addr as *mut libc::c_void, len, advice) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `MADV_FREE` (Linux 4.5+): the kernel may take the pages of `addr..addr+len` back when
/// memory runs short, after which they read as zeros; until then they hold what they held,
/// and a write keeps them. Scratch memory's way to stop holding memory it has finished
/// with, without the cost of a fault at its next use.
///
/// # Safety
/// The range must be memory of the caller's own that nothing reads before writing again.
pub unsafe fn discard_lazily(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: the caller owns the range and reads nothing in it before writing it again.
    if unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_FREE) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Copy application memory at `src` into `dst` (see [`TrackedPages::copy_out`]).
///
/// # Safety
/// `src..src+dst.len()` must be readable memory that stays mapped during the call.
unsafe fn copy_out(dst: &mut [u8], src: usize) {
    // SAFETY: the caller guarantees the source range is mapped and readable.
    unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) }
}

/// Fail unless every page of `addr..addr+len` (page-aligned) is mapped. msync(MS_ASYNC) on
/// anonymous memory does no I/O and reports ENOMEM for any hole.
fn check_mapped(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: msync with MS_ASYNC only inspects the range; a bad range is an error.
    if unsafe { libc::msync(addr as *mut libc::c_void, len, libc::MS_ASYNC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
