//! The kernel mechanisms behind each backend, with nothing of ickpt's around them: the floor
//! each backend's first-write cost is measured against (`ickpt bench tracking`). Each runs in
//! a child process of its own (the raw SIGSEGV handler replaces ickpt's).

use super::util::{touch_pages, PAGE};
use ickpt::sys::mem::{Protection, TrackedPages};
use ickpt::sys::pagemap::{PageRegion, Pagemap};
use ickpt::sys::userfault::{wait_readable, UffdMsg, Userfault, Wakeup};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The bare SIGSEGV handler: make the faulting page writable.
extern "C" fn open_page(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel's siginfo for a SIGSEGV carries the fault address.
    let addr = unsafe { (*info).si_addr() } as usize & !(PAGE - 1);
    // SAFETY: the only protected memory in this process is the benchmark's own buffer.
    let _ = unsafe { TrackedPages::from_raw_parts(addr, PAGE) }.protect(Protection::Open);
}

/// mprotect + SIGSEGV: protect, then time one first write per page in `order`.
pub fn mprotect(base: *mut u8, len: usize, order: &[usize], v: u8) -> std::io::Result<Duration> {
    // SAFETY: a zeroed sigaction with a valid handler and SA_SIGINFO; this process runs
    // nothing else that needs SIGSEGV.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = open_page as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        if libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // SAFETY: the caller's buffer, mapped read-write for the benchmark and written only by
    // it; the handler above opens what it writes.
    let pages = unsafe { TrackedPages::covering(base as usize, len) }?;
    pages.protect(Protection::Tracked)?;
    // SAFETY: `order` holds pages of the `len`-byte buffer at `base`.
    let t = unsafe { touch_pages(base, order, v) };
    pages.protect(Protection::Open)?;
    Ok(t)
}

/// userfaultfd write-protect with a bare handler thread that releases each faulting page.
/// `spin`: the handler polls without sleeping.
pub fn uffd(
    base: *mut u8,
    len: usize,
    order: &[usize],
    v: u8,
    spin: bool,
) -> std::io::Result<Duration> {
    let uffd = Arc::new(Userfault::for_events()?);
    uffd.register_wp(base as usize, len)?;
    uffd.write_protect(base as usize, len, true)?;
    let stop = Arc::new(AtomicBool::new(false));
    let wake = Arc::new(Wakeup::new()?);
    let (u, s, w) = (uffd.clone(), stop.clone(), wake.clone());
    let handler = std::thread::spawn(move || {
        let mut msgs = [UffdMsg::default(); 64];
        while !s.load(SeqCst) {
            if !spin {
                wait_readable(&[u.raw(), w.raw()]);
            }
            let n = u.read_events(&mut msgs).unwrap_or(0);
            for m in &msgs[..n] {
                if let Some(f) = m.write_fault() {
                    let _ = u.write_protect(f.addr & !(PAGE - 1), PAGE, false);
                }
            }
        }
    });
    // SAFETY: `order` holds pages of the `len`-byte buffer at `base`.
    let t = unsafe { touch_pages(base, order, v) };
    stop.store(true, SeqCst);
    wake.signal();
    let _ = handler.join();
    uffd.unregister(base as usize, len)?;
    Ok(t)
}

/// userfaultfd async write-protect: time the first writes (resolved by the kernel), then the
/// PAGEMAP_SCAN that reads them back and write-protects them again. Returns both.
pub fn uffd_async(
    base: *mut u8,
    len: usize,
    order: &[usize],
    v: u8,
) -> std::io::Result<(Duration, Duration)> {
    let uffd = Userfault::for_async()?;
    uffd.register_wp(base as usize, len)?;
    uffd.write_protect(base as usize, len, true)?;
    // SAFETY: `order` holds pages of the `len`-byte buffer at `base`.
    let t = unsafe { touch_pages(base, order, v) };
    let pm = Pagemap::open()?;
    let mut runs = vec![PageRegion::default(); 4096];
    let s = Instant::now();
    let mut written = 0;
    // SAFETY: `runs` is a heap vector, not in the scanned range.
    unsafe {
        pm.take_written(
            base as usize,
            base as usize + len,
            PAGE,
            &mut runs,
            true,
            |lo, hi| written += hi - lo,
        )?
    };
    let scan = s.elapsed();
    uffd.unregister(base as usize, len)?;
    if written != order.len() {
        return Err(std::io::Error::other(format!(
            "PAGEMAP_SCAN found {written} written pages, {} were written",
            order.len()
        )));
    }
    Ok((t, scan))
}
