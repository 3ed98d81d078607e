//! What this kernel offers for write tracking beyond mprotect: userfaultfd write-protect
//! (sync and async) and the PAGEMAP_SCAN ioctl. Probed once, at first use; Debian 12's
//! headers predate some of it, so the constants are defined here from the kernel's uapi
//! (`linux/userfaultfd.h`, `linux/fs.h`).

use super::pagemap::Pagemap;
use super::userfault::{
    Userfault, UFFD_FEATURE_PAGEFAULT_FLAG_WP, UFFD_FEATURE_THREAD_ID, UFFD_FEATURE_WP_ASYNC,
    UFFD_FEATURE_WP_UNPOPULATED,
};

/// What the probe found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    /// userfaultfd(2) can be opened by this process.
    pub userfaultfd: bool,
    /// Its supported feature bits (`UFFD_FEATURE_*`), 0 when unavailable.
    pub uffd_features: u64,
    /// Faults taken inside system calls reach it too (not only the unprivileged
    /// user-mode-only flavour could be opened).
    pub kernel_faults: bool,
    /// The PAGEMAP_SCAN ioctl works on /proc/self/pagemap.
    pub pagemap_scan: bool,
    /// Why something is unavailable, for `ickpt` to show.
    pub notes: Vec<String>,
}

impl Features {
    /// Write-protect faults delivered to a handler thread.
    pub fn uffd_wp(&self) -> bool {
        let need =
            UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_THREAD_ID | UFFD_FEATURE_WP_UNPOPULATED;
        self.userfaultfd && self.uffd_features & need == need
    }

    /// Write-protect resolved by the kernel, read back with PAGEMAP_SCAN (Linux 6.7+).
    pub fn uffd_wp_async(&self) -> bool {
        self.uffd_wp() && self.uffd_features & UFFD_FEATURE_WP_ASYNC != 0 && self.pagemap_scan
    }
}

impl Features {
    /// These features less what `hide` hides (`ICKPT_NO_UFFD`, `ICKPT_NO_PAGEMAP_SCAN`: they
    /// force each fallback, so tests cover it on any kernel).
    pub fn hiding(&self, hide: Hidden) -> Features {
        if hide.uffd {
            return Features {
                notes: vec!["ICKPT_NO_UFFD is set".into()],
                ..Features::default()
            };
        }
        let mut f = self.clone();
        if hide.scan {
            f.pagemap_scan = false;
            f.notes
                .push("PAGEMAP_SCAN: ICKPT_NO_PAGEMAP_SCAN is set".into());
        }
        f
    }
}

/// Kernel features a test hides from ickpt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hidden {
    pub uffd: bool,
    pub scan: bool,
}

/// Probe the kernel (`track::kernel_features` does, once per process).
pub fn probe() -> Features {
    let mut f = Features::default();
    match Userfault::supported_features() {
        Ok((bits, kernel_faults)) => {
            f.userfaultfd = true;
            f.uffd_features = bits;
            f.kernel_faults = kernel_faults;
            if !kernel_faults {
                f.notes.push(
                    "userfaultfd: only user-mode faults (vm.unprivileged_userfaultfd=0 and no \
                     access to /dev/userfaultfd): system calls writing into tracked memory fail \
                     with EFAULT"
                        .into(),
                );
            }
        }
        Err(e) => f.notes.push(format!("userfaultfd: {e}")),
    }
    match Pagemap::open().and_then(|p| p.works()) {
        Ok(()) => f.pagemap_scan = true,
        Err(e) => f.notes.push(format!("PAGEMAP_SCAN: {e}")),
    }
    f
}

#[cfg(test)]
mod tests {
    use super::super::pagemap::PAGE_IS_PRESENT;
    use super::*;

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
        let ps = crate::sys::page_size();
        let page = crate::sys::mem::map_anonymous(ps).unwrap();
        // SAFETY: writing the page just mapped, so it is present.
        unsafe { page.write_volatile(1) };
        let found = Pagemap::open()
            .and_then(|p| p.categories(page as usize, page as usize + ps, PAGE_IS_PRESENT));
        assert_eq!(found.is_ok(), f.pagemap_scan, "probe {f:?}, scan {found:?}");
        if let Ok(regions) = found {
            assert_eq!(regions.len(), 1);
            assert_eq!(regions[0].start, page as u64);
            assert_ne!(regions[0].categories & PAGE_IS_PRESENT, 0);
        }
        // SAFETY: mapped above, unused from here on.
        unsafe { crate::sys::mem::unmap(page, ps).unwrap() };
    }

    #[test]
    fn async_write_protect_needs_every_piece() {
        let all = Features {
            userfaultfd: true,
            uffd_features: UFFD_FEATURE_PAGEFAULT_FLAG_WP
                | UFFD_FEATURE_THREAD_ID
                | UFFD_FEATURE_WP_UNPOPULATED
                | UFFD_FEATURE_WP_ASYNC,
            kernel_faults: true,
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
            uffd_features: all.uffd_features & !UFFD_FEATURE_WP_ASYNC,
            ..all.clone()
        };
        assert!(no_async.uffd_wp() && !no_async.uffd_wp_async());
        let no_tid = Features {
            uffd_features: all.uffd_features & !UFFD_FEATURE_THREAD_ID,
            ..all.clone()
        };
        assert!(!no_tid.uffd_wp());
        let no_uffd = Features {
            userfaultfd: false,
            ..all
        };
        assert!(!no_uffd.uffd_wp() && !no_uffd.uffd_wp_async());
    }
}
