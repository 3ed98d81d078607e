//! Alternate signal stacks (sigaltstack) and the calling thread's own stack bounds.
//!
//! A write to a write-protected page of the faulting thread's own stack raises SIGSEGV; the
//! kernel writes the signal frame below the stack pointer, and when that lands on the
//! protected page too it cannot, and kills the process. An alternate stack in a mapping of
//! ickpt's own gives the handler somewhere to run.

use super::{mem, page_size};
use std::io;
use std::sync::Mutex;

/// `AT_MINSIGSTKSZ`: the kernel's minimum signal frame for this CPU (AVX-512 state makes it
/// about 3.5 KiB, AMX much more); not exported by the libc crate.
const AT_MINSIGSTKSZ: libc::c_ulong = 51;

/// Room for the kernel's frame and the handler, and for an application handler ickpt chains
/// to (it runs on the same stack): 64 KiB, or four frames if the CPU's are larger.
pub fn size() -> usize {
    // SAFETY: getauxval has no preconditions; 0 means "not provided".
    let min_frame = unsafe { libc::getauxval(AT_MINSIGSTKSZ) } as usize;
    (64usize << 10)
        .max(4 * min_frame)
        .next_multiple_of(page_size())
}

/// The calling thread's alternate signal stack, as (start, end); None when it has none.
pub fn current() -> io::Result<Option<(usize, usize)>> {
    // SAFETY: an all-zero stack_t is a valid value for the kernel to overwrite.
    let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: a NULL new stack only queries; `old` is a valid out-pointer.
    if unsafe { libc::sigaltstack(std::ptr::null(), &mut old) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if old.ss_flags & libc::SS_DISABLE != 0 {
        return Ok(None);
    }
    let start = old.ss_sp as usize;
    Ok(Some((start, start + old.ss_size)))
}

/// Every alternate stack ickpt mapped and has not released: no region may cover one.
static OURS: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

fn ours() -> std::sync::MutexGuard<'static, Vec<(usize, usize)>> {
    OURS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The alternate stacks ickpt has made, as (start, end) with their guard pages.
pub fn spans() -> Vec<(usize, usize)> {
    ours().clone()
}

/// An alternate signal stack in a mapping of ickpt's own, with an inaccessible guard page
/// below it (a handler overflowing it dies there instead of overwriting other memory).
/// Dropping it on the thread that installed it stops using it first.
pub struct AltStack {
    /// The whole mapping, guard page included.
    map: (usize, usize),
}

impl AltStack {
    pub fn new() -> io::Result<AltStack> {
        let ps = page_size();
        let len = size() + ps;
        let p = mem::map_anonymous(len)? as usize;
        // Used only while a signal is handled on it, never across a checkpoint.
        super::own_spans::mark_scratch(p);
        let s = AltStack { map: (p, p + len) };
        mem::protect(p, ps, libc::PROT_NONE)?;
        ours().push(s.map);
        Ok(s)
    }

    /// The usable part, as (start, end).
    pub fn usable(&self) -> (usize, usize) {
        (self.map.0 + page_size(), self.map.1)
    }

    /// Make it the calling thread's alternate signal stack.
    pub fn install(&self) -> io::Result<()> {
        let (start, end) = self.usable();
        let ss = libc::stack_t {
            ss_sp: start as *mut libc::c_void,
            ss_flags: 0,
            ss_size: end - start,
        };
        // SAFETY: `ss` describes a live mapping of ickpt's own that stays mapped until the
        // thread stops using it (`drop`).
        if unsafe { libc::sigaltstack(&ss, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        if current().ok().flatten() == Some(self.usable()) {
            let off = libc::stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: SS_DISABLE ignores the address; it fails (EPERM) only while the thread
            // runs on the stack, and then the mapping must stay.
            if unsafe { libc::sigaltstack(&off, std::ptr::null_mut()) } != 0 {
                return;
            }
        }
        ours().retain(|&m| m != self.map);
        // SAFETY: the mapping was made in `new`, and no thread uses it as its signal stack:
        // it was never installed, the thread replaced it, or it was disabled just above.
        let _ = unsafe { mem::unmap(self.map.0 as *mut u8, self.map.1 - self.map.0) };
    }
}

/// The calling thread's stack, as (lowest, end) addresses: its whole reservation (for the
/// main thread, as far as the stack limit lets it grow).
pub fn thread_stack() -> io::Result<(usize, usize)> {
    // SAFETY: a zeroed attr is overwritten by pthread_getattr_np before any use.
    let mut attr: libc::pthread_attr_t = unsafe { std::mem::zeroed() };
    // SAFETY: pthread_self is always valid; `attr` is a valid out-pointer.
    let rc = unsafe { libc::pthread_getattr_np(libc::pthread_self(), &mut attr) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    let mut addr: *mut libc::c_void = std::ptr::null_mut();
    let mut size: libc::size_t = 0;
    // SAFETY: `attr` was initialised above; both out-pointers are valid.
    let rc = unsafe { libc::pthread_attr_getstack(&attr, &mut addr, &mut size) };
    // SAFETY: initialised by pthread_getattr_np, destroyed once.
    unsafe { libc::pthread_attr_destroy(&mut attr) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok((addr as usize, addr as usize + size))
}

/// Whether the calling thread is the process's main thread (its id is the process id).
pub fn is_main_thread() -> bool {
    super::thread::tid() == std::process::id() as u64
}
