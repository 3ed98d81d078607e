//! What this kernel offers for write tracking beyond mprotect: userfaultfd write-protect
//! (sync and async) and the PAGEMAP_SCAN ioctl. Probed once, at first use; Debian 12's
//! headers predate some of it, so the constants are defined here from the kernel's uapi
//! (`linux/userfaultfd.h`, `linux/fs.h`).

use std::sync::OnceLock;

/// `UFFD_API`, the handshake version.
const UFFD_API: u64 = 0xAA;
/// `UFFD_USER_MODE_ONLY`: only user-space faults (allowed without privilege on 5.11+).
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
/// `_IOWR(0xAA, 0x3F, struct uffdio_api)` (24 bytes).
const UFFDIO_API: libc::c_ulong = 0xC018_AA3F;
pub(crate) const UFFD_FEATURE_PAGEFAULT_FLAG_WP: u64 = 1 << 0;
pub(crate) const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
/// `PAGE_IS_PRESENT`, a PAGEMAP_SCAN category.
#[cfg(test)]
const PAGE_IS_PRESENT: u64 = 1 << 3;
/// `_IOWR('f', 16, struct pm_scan_arg)` (96 bytes).
pub(crate) const PAGEMAP_SCAN: libc::c_ulong = 0xC060_6610;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

/// `struct pm_scan_arg`.
#[repr(C)]
#[derive(Default)]
pub struct PmScanArg {
    pub size: u64,
    pub flags: u64,
    pub start: u64,
    pub end: u64,
    pub walk_end: u64,
    pub vec: u64,
    pub vec_len: u64,
    pub max_pages: u64,
    pub category_inverted: u64,
    pub category_mask: u64,
    pub category_anyof_mask: u64,
    pub return_mask: u64,
}

/// What the probe found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    /// userfaultfd(2) can be opened by this process.
    pub userfaultfd: bool,
    /// Its supported feature bits (`UFFD_FEATURE_*`), 0 when unavailable.
    pub uffd_features: u64,
    /// The PAGEMAP_SCAN ioctl works on /proc/self/pagemap.
    pub pagemap_scan: bool,
    /// Why something is unavailable, for `ickpt` to show.
    pub notes: Vec<String>,
}

impl Features {
    /// Write-protect faults delivered to a handler thread.
    pub fn uffd_wp(&self) -> bool {
        self.userfaultfd && self.uffd_features & UFFD_FEATURE_PAGEFAULT_FLAG_WP != 0
    }

    /// Write-protect resolved by the kernel, read back with PAGEMAP_SCAN (Linux 6.7+).
    pub fn uffd_wp_async(&self) -> bool {
        self.uffd_wp() && self.uffd_features & UFFD_FEATURE_WP_ASYNC != 0 && self.pagemap_scan
    }
}

/// The kernel's features, probed once. `ICKPT_NO_UFFD=1` reports none (forces the mprotect
/// fallback, so tests cover it on any kernel).
pub fn features() -> &'static Features {
    static F: OnceLock<Features> = OnceLock::new();
    F.get_or_init(|| {
        if std::env::var_os("ICKPT_NO_UFFD").is_some_and(|v| v != "0") {
            return Features {
                notes: vec!["ICKPT_NO_UFFD is set".into()],
                ..Features::default()
            };
        }
        probe()
    })
}

fn probe() -> Features {
    let mut f = Features::default();
    match uffd_api_features() {
        Ok(bits) => {
            f.userfaultfd = true;
            f.uffd_features = bits;
        }
        Err(e) => f.notes.push(format!("userfaultfd: {e}")),
    }
    match pagemap_scan_works() {
        Ok(()) => f.pagemap_scan = true,
        Err(e) => f.notes.push(format!("PAGEMAP_SCAN: {e}")),
    }
    f
}

/// Open a userfaultfd, complete the API handshake asking for nothing, and return the
/// feature bits the kernel reports.
fn uffd_api_features() -> std::io::Result<u64> {
    // SAFETY: userfaultfd takes flags only and returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_userfaultfd,
            libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fd = fd as libc::c_int;
    let mut api = UffdioApi {
        api: UFFD_API,
        features: 0,
        ioctls: 0,
    };
    // SAFETY: `fd` is the userfaultfd just opened; `api` is a valid uffdio_api the kernel
    // reads and writes back.
    let r = unsafe { libc::ioctl(fd, UFFDIO_API, &mut api) };
    let err = std::io::Error::last_os_error();
    // SAFETY: closing the descriptor opened above, once.
    unsafe { libc::close(fd) };
    if r != 0 {
        return Err(err);
    }
    Ok(api.features)
}

/// Issue an empty PAGEMAP_SCAN: 0 where the ioctl exists, ENOTTY where it does not.
fn pagemap_scan_works() -> std::io::Result<()> {
    let f = std::fs::File::open("/proc/self/pagemap")?;
    let mut arg = PmScanArg {
        size: std::mem::size_of::<PmScanArg>() as u64,
        ..PmScanArg::default()
    };
    use std::os::fd::AsRawFd;
    // SAFETY: a valid pm_scan_arg over an empty range with no output vector: the kernel
    // only validates it.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), PAGEMAP_SCAN, &mut arg) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_sizes_match_the_ioctl_numbers() {
        let size = |cmd: libc::c_ulong| ((cmd >> 16) & 0x3fff) as usize;
        assert_eq!(size(UFFDIO_API), std::mem::size_of::<UffdioApi>());
        assert_eq!(size(PAGEMAP_SCAN), std::mem::size_of::<PmScanArg>());
    }

    #[test]
    fn the_probe_answers_and_explains_what_is_missing() {
        let f = probe();
        if !f.userfaultfd || !f.pagemap_scan {
            assert!(!f.notes.is_empty(), "{f:?}");
        }
        if f.uffd_wp_async() {
            assert!(f.uffd_wp());
        }
        // What the probe says of PAGEMAP_SCAN holds for a real page of this process.
        let page = crate::sys::mem::map_anonymous(crate::sys::page_size()).unwrap();
        // SAFETY: writing the page just mapped, so it is present.
        unsafe { page.write_volatile(1) };
        let file = std::fs::File::open("/proc/self/pagemap").unwrap();
        let mut region = [0u64; 3];
        let mut arg = PmScanArg {
            size: std::mem::size_of::<PmScanArg>() as u64,
            start: page as u64,
            end: page as u64 + crate::sys::page_size() as u64,
            vec: region.as_mut_ptr() as u64,
            vec_len: 1,
            return_mask: PAGE_IS_PRESENT,
            ..PmScanArg::default()
        };
        use std::os::fd::AsRawFd;
        // SAFETY: a valid pm_scan_arg whose output vector holds one page_region (3 u64s).
        let n = unsafe { libc::ioctl(file.as_raw_fd(), PAGEMAP_SCAN, &mut arg) };
        assert_eq!(n == 1, f.pagemap_scan, "probe {f:?}, scan returned {n}");
        if n == 1 {
            assert_eq!(region[0], page as u64);
            assert_ne!(region[2] & PAGE_IS_PRESENT, 0);
        }
        // SAFETY: mapped above, unused from here on.
        unsafe { crate::sys::mem::unmap(page, crate::sys::page_size()).unwrap() };
    }

    #[test]
    fn async_write_protect_needs_every_piece() {
        let all = Features {
            userfaultfd: true,
            uffd_features: UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_ASYNC,
            pagemap_scan: true,
            notes: Vec::new(),
        };
        assert!(all.uffd_wp() && all.uffd_wp_async());
        let no_scan = Features {
            pagemap_scan: false,
            ..all.clone()
        };
        assert!(no_scan.uffd_wp() && !no_scan.uffd_wp_async());
        let no_async = Features {
            uffd_features: UFFD_FEATURE_PAGEFAULT_FLAG_WP,
            ..all.clone()
        };
        assert!(!no_async.uffd_wp_async());
        let no_uffd = Features {
            userfaultfd: false,
            ..all
        };
        assert!(!no_uffd.uffd_wp() && !no_uffd.uffd_wp_async());
    }
}
