//! A userfaultfd for write-protect tracking: open, handshake, register ranges, write-protect
//! or release pages, and read write-fault events. Constants from `linux/userfaultfd.h`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const UFFD_API: u64 = 0xAA;
/// Only user-space faults: allowed without privilege (5.11+), but a system call writing into
/// write-protected memory then fails with EFAULT instead of faulting.
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
/// `_IOWR(0xAA, 0x3F, struct uffdio_api)`.
pub(crate) const UFFDIO_API: libc::c_ulong = 0xC018_AA3F;
/// `_IOWR(0xAA, 0x00, struct uffdio_register)`.
const UFFDIO_REGISTER: libc::c_ulong = 0xC020_AA00;
/// `_IOR(0xAA, 0x01, struct uffdio_range)`.
const UFFDIO_UNREGISTER: libc::c_ulong = 0x8010_AA01;
/// `_IOR(0xAA, 0x02, struct uffdio_range)`.
const UFFDIO_WAKE: libc::c_ulong = 0x8010_AA02;
/// `_IOWR(0xAA, 0x06, struct uffdio_writeprotect)`.
const UFFDIO_WRITEPROTECT: libc::c_ulong = 0xC018_AA06;
/// `_IO(0xAA, 0x00)` on /dev/userfaultfd: a userfaultfd for a user allowed by the device's
/// permissions rather than by the sysctl.
const USERFAULTFD_IOC_NEW: libc::c_ulong = 0xAA00;
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;
const UFFDIO_WRITEPROTECT_MODE_DONTWAKE: u64 = 1 << 1;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;

pub(crate) const UFFD_FEATURE_PAGEFAULT_FLAG_WP: u64 = 1 << 0;
pub(crate) const UFFD_FEATURE_THREAD_ID: u64 = 1 << 8;
/// Write-protect also pages never touched yet (markers in empty page-table entries).
pub(crate) const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
pub(crate) const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;

#[repr(C)]
pub(crate) struct UffdioApi {
    pub api: u64,
    pub features: u64,
    pub ioctls: u64,
}

#[repr(C)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}

/// `struct uffd_msg` (32 bytes, packed): event in byte 0; for a page fault, flags, address
/// and the faulting thread's id in words 1–3.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct UffdMsg([u64; 4]);

/// A write fault read from the userfaultfd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteFault {
    pub addr: usize,
    /// The faulting thread (UFFD_FEATURE_THREAD_ID); 0 if the kernel did not say.
    pub tid: u64,
}

impl UffdMsg {
    pub fn write_fault(&self) -> Option<WriteFault> {
        if self.0[0] as u8 != UFFD_EVENT_PAGEFAULT {
            return None;
        }
        Some(WriteFault {
            addr: self.0[2] as usize,
            tid: self.0[3] & 0xffff_ffff,
        })
    }
}

/// An open userfaultfd after its API handshake.
pub struct Userfault {
    fd: OwnedFd,
    /// Faults the kernel itself takes (a read(2) into protected memory) reach this
    /// userfaultfd; false when only the unprivileged user-mode-only flavour could be opened.
    pub kernel_faults: bool,
    /// The features enabled.
    pub features: u64,
}

fn ioctl<T>(fd: RawFd, cmd: libc::c_ulong, arg: &mut T) -> io::Result<()> {
    // SAFETY: every caller passes the argument struct `cmd` is defined with, valid for
    // reads and writes for the whole call.
    if unsafe { libc::ioctl(fd, cmd, arg as *mut T) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A new userfaultfd descriptor, non-blocking: through the system call, then the device,
/// then user-mode-only. Returns it and whether kernel faults reach it.
fn new_fd() -> io::Result<(OwnedFd, bool)> {
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
    let syscall = |extra: libc::c_int| -> io::Result<OwnedFd> {
        // SAFETY: userfaultfd takes flags only and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags | extra) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor just returned by the kernel, owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    };
    let full_err = match syscall(0) {
        Ok(fd) => return Ok((fd, true)),
        Err(e) => e,
    };
    if let Ok(dev) = std::fs::File::open("/dev/userfaultfd") {
        // SAFETY: USERFAULTFD_IOC_NEW takes the flags by value and returns a descriptor.
        let fd = unsafe { libc::ioctl(dev.as_raw_fd(), USERFAULTFD_IOC_NEW, flags) };
        if fd >= 0 {
            // SAFETY: as above.
            return Ok((unsafe { OwnedFd::from_raw_fd(fd) }, true));
        }
    }
    match syscall(UFFD_USER_MODE_ONLY) {
        Ok(fd) => Ok((fd, false)),
        Err(_) => Err(full_err),
    }
}

impl Userfault {
    /// Open a userfaultfd with exactly `features` enabled.
    pub fn open(features: u64) -> io::Result<Userfault> {
        let (fd, kernel_faults) = new_fd()?;
        let mut api = UffdioApi {
            api: UFFD_API,
            features,
            ioctls: 0,
        };
        ioctl(fd.as_raw_fd(), UFFDIO_API, &mut api)?;
        if api.features & features != features {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        Ok(Userfault {
            fd,
            kernel_faults,
            features,
        })
    }

    /// For write-protect faults delivered as events, with the faulting thread's id, and
    /// pages never touched protected too.
    pub fn for_events() -> io::Result<Userfault> {
        Self::open(
            UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_THREAD_ID | UFFD_FEATURE_WP_UNPOPULATED,
        )
    }

    /// For async write-protect: the kernel resolves first writes itself and PAGEMAP_SCAN
    /// reads them back.
    pub fn for_async() -> io::Result<Userfault> {
        Self::open(UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED)
    }

    /// The feature bits the kernel supports (an extra descriptor opened only to ask).
    pub fn supported_features() -> io::Result<(u64, bool)> {
        let (fd, kernel_faults) = new_fd()?;
        let mut api = UffdioApi {
            api: UFFD_API,
            features: 0,
            ioctls: 0,
        };
        ioctl(fd.as_raw_fd(), UFFDIO_API, &mut api)?;
        Ok((api.features, kernel_faults))
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Register `start..start+len` (whole pages) for write-protect faults. Fails with EINVAL
    /// for memory the kernel cannot write-protect this way (most file mappings).
    pub fn register_wp(&self, start: usize, len: usize) -> io::Result<()> {
        let mut reg = UffdioRegister {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode: UFFDIO_REGISTER_MODE_WP,
            ioctls: 0,
        };
        ioctl(self.raw(), UFFDIO_REGISTER, &mut reg)
    }

    /// Stop tracking the range; the kernel drops its write-protection and wakes its waiters.
    pub fn unregister(&self, start: usize, len: usize) -> io::Result<()> {
        let mut range = UffdioRange {
            start: start as u64,
            len: len as u64,
        };
        ioctl(self.raw(), UFFDIO_UNREGISTER, &mut range)
    }

    /// Write-protect the range (`on`), or release it and wake the threads faulting in it.
    pub fn write_protect(&self, start: usize, len: usize, on: bool) -> io::Result<()> {
        self.change_protection(start, len, if on { UFFDIO_WRITEPROTECT_MODE_WP } else { 0 })
    }

    /// Release the range but leave its faulting threads asleep until [`Userfault::wake`].
    pub fn release_quietly(&self, start: usize, len: usize) -> io::Result<()> {
        self.change_protection(start, len, UFFDIO_WRITEPROTECT_MODE_DONTWAKE)
    }

    fn change_protection(&self, start: usize, len: usize, mode: u64) -> io::Result<()> {
        let mut wp = UffdioWriteprotect {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode,
        };
        // EAGAIN: the address space is changing under a concurrent fork or mremap (only with
        // event features, which ickpt does not enable): retry a while.
        let mut tries = 0;
        loop {
            match ioctl(self.raw(), UFFDIO_WRITEPROTECT, &mut wp) {
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && tries < 1000 => tries += 1,
                r => return r,
            }
        }
    }

    /// Wake threads faulting in the range without changing it (their fault is retried).
    pub fn wake(&self, start: usize, len: usize) -> io::Result<()> {
        let mut range = UffdioRange {
            start: start as u64,
            len: len as u64,
        };
        ioctl(self.raw(), UFFDIO_WAKE, &mut range)
    }

    /// Read the pending events into `buf` without blocking; 0 when none is pending.
    pub fn read_events(&self, buf: &mut [UffdMsg]) -> io::Result<usize> {
        let bytes = std::mem::size_of_val(buf);
        // SAFETY: `buf` is writable for `bytes` bytes; the kernel writes whole messages.
        let n = unsafe { libc::read(self.raw(), buf.as_mut_ptr().cast(), bytes) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(0),
                _ => Err(e),
            };
        }
        Ok(n as usize / std::mem::size_of::<UffdMsg>())
    }
}

/// An eventfd: one thread sleeping in [`wait_readable`] is woken by another's `signal`.
pub struct Wakeup(OwnedFd);

impl Wakeup {
    pub fn new() -> io::Result<Wakeup> {
        // SAFETY: eventfd takes an initial value and flags and returns a new descriptor.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor just returned by the kernel, owned by nobody else.
        Ok(Wakeup(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub fn signal(&self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from a live u64, the size an eventfd expects.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    pub fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Consume the signals so far (the descriptor stops being readable).
    pub fn clear(&self) {
        let mut n = 0u64;
        // SAFETY: reads 8 bytes into a live u64; non-blocking, so EAGAIN when not signalled.
        unsafe { libc::read(self.0.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
    }
}

/// Sleep until one of `fds` is readable (or a signal arrives).
pub fn wait_readable(fds: &[RawFd]) {
    let mut polls = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; 4];
    for (p, fd) in polls.iter_mut().zip(fds) {
        p.fd = *fd;
    }
    // SAFETY: `polls` holds `fds.len()` (at most 4) initialised pollfd entries.
    unsafe { libc::poll(polls.as_mut_ptr(), fds.len().min(4) as libc::nfds_t, -1) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_sizes_match_the_ioctl_numbers() {
        let size = |cmd: libc::c_ulong| ((cmd >> 16) & 0x3fff) as usize;
        assert_eq!(size(UFFDIO_API), std::mem::size_of::<UffdioApi>());
        assert_eq!(size(UFFDIO_REGISTER), std::mem::size_of::<UffdioRegister>());
        assert_eq!(size(UFFDIO_UNREGISTER), std::mem::size_of::<UffdioRange>());
        assert_eq!(
            size(UFFDIO_WRITEPROTECT),
            std::mem::size_of::<UffdioWriteprotect>()
        );
        assert_eq!(std::mem::size_of::<UffdMsg>(), 32);
    }
}
