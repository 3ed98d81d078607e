//! The PAGEMAP_SCAN ioctl on /proc/self/pagemap (Linux 6.7+): find the pages written since
//! they were last write-protected through an async userfaultfd, and write-protect them again,
//! in one call. Debian 12's headers predate it; the constants come from `linux/fs.h`.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// `_IOWR('f', 16, struct pm_scan_arg)` (96 bytes).
pub(crate) const PAGEMAP_SCAN: libc::c_ulong = 0xC060_6610;
/// Write-protect the pages that match (needs an async write-protect userfaultfd).
const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
/// Fail rather than skip a range that is not registered for async write-protect.
const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;
/// Page categories.
const PAGE_IS_WRITTEN: u64 = 1 << 1;
#[cfg(test)]
pub(crate) const PAGE_IS_PRESENT: u64 = 1 << 3;

/// A /proc/self/pagemap entry's "write-protected by userfaultfd" bit (Linux 5.13+).
const PM_UFFD_WP: u64 = 1 << 57;
/// A /proc/self/pagemap entry's "present in RAM" bit.
const PM_PRESENT: u64 = 1 << 63;

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

/// `struct page_region`: pages `start..end` share `categories`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageRegion {
    pub start: u64,
    pub end: u64,
    pub categories: u64,
}

/// An open /proc/self/pagemap.
pub struct Pagemap(File);

impl Pagemap {
    pub fn open() -> io::Result<Pagemap> {
        File::open("/proc/self/pagemap").map(Pagemap)
    }

    /// Whether the page holding `addr` is write-protected by a userfaultfd (also when it was
    /// never touched and only a marker stands for it).
    pub fn uffd_write_protected(&self, addr: usize, page_size: usize) -> io::Result<bool> {
        let mut entry = [0u8; 8];
        let at = (addr / page_size * 8) as u64;
        std::os::unix::fs::FileExt::read_exact_at(&self.0, &mut entry, at)?;
        Ok(u64::from_ne_bytes(entry) & PM_UFFD_WP != 0)
    }

    /// Call `f(i)` for each page `i` of `start..end` (page-aligned) that is present and not
    /// write-protected by a userfaultfd, reading the pagemap's entries into `buf` (a multiple
    /// of 8 bytes): what PAGEMAP_SCAN finds, on kernels without it (before 6.7).
    pub fn present_unprotected(
        &self,
        start: usize,
        end: usize,
        page_size: usize,
        buf: &mut [u8],
        mut f: impl FnMut(usize),
    ) -> io::Result<()> {
        let per_read = buf.len() / 8;
        let (first, pages) = (start / page_size, (end - start) / page_size);
        let mut done = 0;
        while done < pages {
            let n = (pages - done).min(per_read);
            let chunk = &mut buf[..n * 8];
            let at = ((first + done) * 8) as u64;
            std::os::unix::fs::FileExt::read_exact_at(&self.0, chunk, at)?;
            for (i, e) in chunk.chunks_exact(8).enumerate() {
                let e = u64::from_ne_bytes(e.try_into().expect("8 bytes"));
                if e & PM_PRESENT != 0 && e & PM_UFFD_WP == 0 {
                    f(done + i);
                }
            }
            done += n;
        }
        Ok(())
    }

    /// Issue one PAGEMAP_SCAN. Returns the number of regions written to `out` and where the
    /// walk stopped (it stops early when `out` is full).
    ///
    /// # Safety
    /// `out` must not lie in memory the scan write-protects (the kernel writes it).
    unsafe fn scan(&self, arg: &mut PmScanArg, out: &mut [PageRegion]) -> io::Result<usize> {
        arg.size = std::mem::size_of::<PmScanArg>() as u64;
        arg.vec = out.as_mut_ptr() as u64;
        arg.vec_len = out.len() as u64;
        // SAFETY: `arg` is a valid pm_scan_arg whose output vector is `out`, writable for
        // `out.len()` entries; the kernel validates the range itself.
        let n = unsafe { libc::ioctl(self.0.as_raw_fd(), PAGEMAP_SCAN, arg as *mut PmScanArg) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// Call `f(first_page, end_page)` (page indices from `start`) for every run of pages in
    /// `start..end` written since they were last write-protected (present without the
    /// userfaultfd write-protect bit). `protect_again`: write-protect them in the same walk;
    /// the range must then be registered with an async write-protect userfaultfd. Returns
    /// the number of written pages.
    ///
    /// # Safety
    /// `buf` must be memory of ickpt's own that no tracked region covers.
    pub unsafe fn take_written(
        &self,
        start: usize,
        end: usize,
        page_size: usize,
        buf: &mut [PageRegion],
        protect_again: bool,
        mut f: impl FnMut(usize, usize),
    ) -> io::Result<u64> {
        let mut at = start as u64;
        let mut pages = 0u64;
        while at < end as u64 {
            let mut arg = PmScanArg {
                flags: if protect_again {
                    PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC
                } else {
                    0
                },
                start: at,
                end: end as u64,
                category_mask: PAGE_IS_WRITTEN,
                return_mask: PAGE_IS_WRITTEN,
                ..PmScanArg::default()
            };
            // SAFETY: the caller guarantees `buf` is ickpt's own, untracked memory.
            let n = unsafe { self.scan(&mut arg, buf)? };
            for r in &buf[..n] {
                let (lo, hi) = (r.start as usize - start, r.end as usize - start);
                pages += ((hi - lo) / page_size) as u64;
                f(lo / page_size, hi / page_size);
            }
            // The kernel stops at `end` or where the output vector filled up.
            if arg.walk_end <= at {
                return Err(io::Error::other("PAGEMAP_SCAN made no progress"));
            }
            at = arg.walk_end;
        }
        Ok(pages)
    }

    /// Categories of the pages of `start..end`, as the kernel reports them (tests and
    /// the probe).
    pub fn categories(&self, start: usize, end: usize, mask: u64) -> io::Result<Vec<PageRegion>> {
        let mut out = vec![PageRegion::default(); 64];
        let mut arg = PmScanArg {
            start: start as u64,
            end: end as u64,
            return_mask: mask,
            ..PmScanArg::default()
        };
        // SAFETY: a plain scan without write-protection; `out` is a fresh heap vector.
        let n = unsafe { self.scan(&mut arg, &mut out)? };
        out.truncate(n);
        Ok(out)
    }

    /// Issue an empty scan: Ok where the ioctl exists, ENOTTY where it does not.
    pub fn works(&self) -> io::Result<()> {
        // SAFETY: an empty range with no output vector; the kernel only validates it.
        unsafe { self.scan(&mut PmScanArg::default(), &mut []) }.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_sizes_match_the_ioctl_number() {
        let size = |cmd: libc::c_ulong| ((cmd >> 16) & 0x3fff) as usize;
        assert_eq!(size(PAGEMAP_SCAN), std::mem::size_of::<PmScanArg>());
        assert_eq!(std::mem::size_of::<PageRegion>(), 24);
    }
}
