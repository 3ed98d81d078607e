//! Which operations fail, and when: the faults a test asks for on the command line.

use fuser::{Errno, RenameFlags};

#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// A rename with any flag fails with EINVAL, as on NFS and many FUSE file systems.
    pub no_rename_flags: bool,
    /// link(2) fails with EPERM, as on file systems without hard links.
    pub no_link: bool,
    /// link(2) fails with EROFS, as on fusepy's file systems (its default for operations
    /// they do not implement).
    pub link_erofs: bool,
    /// Writes fail with EIO once they would take the bytes written past this.
    pub eio_after: Option<u64>,
    /// Writes fail with ENOSPC once they would take the bytes written past this.
    pub enospc_after: Option<u64>,
    /// fsync fails with EIO once this many bytes have been written (0: always).
    pub eio_fsync_after: Option<u64>,
}

impl Faults {
    /// The error a write of `len` bytes gets when `written` bytes went through the mount
    /// before it. A write that would cross a limit fails whole, so at most the limit is
    /// ever written, wherever the kernel splits a large write into requests.
    pub fn write_error(&self, written: u64, len: u64) -> Option<(Errno, u64)> {
        let end = written.saturating_add(len);
        [
            (self.eio_after, Errno::EIO),
            (self.enospc_after, Errno::ENOSPC),
        ]
        .into_iter()
        .filter_map(|(limit, e)| limit.filter(|&l| end > l).map(|l| (e, l)))
        .min_by_key(|&(_, l)| l)
    }

    pub fn fsync_error(&self, written: u64) -> Option<Errno> {
        self.eio_fsync_after
            .filter(|&l| written >= l)
            .map(|_| Errno::EIO)
    }

    pub fn rename_error(&self, flags: RenameFlags) -> Option<Errno> {
        (self.no_rename_flags && !flags.is_empty()).then_some(Errno::EINVAL)
    }

    pub fn link_error(&self) -> Option<Errno> {
        if self.link_erofs {
            return Some(Errno::EROFS);
        }
        self.no_link.then_some(Errno::EPERM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_crossing_a_limit_fails_whole() {
        let f = Faults {
            eio_after: Some(100),
            ..Faults::default()
        };
        assert_eq!(f.write_error(0, 100), None);
        assert_eq!(f.write_error(60, 41), Some((Errno::EIO, 100)));
        assert_eq!(f.write_error(100, 1), Some((Errno::EIO, 100)));
    }

    #[test]
    fn the_lower_limit_wins() {
        let f = Faults {
            eio_after: Some(200),
            enospc_after: Some(150),
            ..Faults::default()
        };
        assert_eq!(f.write_error(0, 300).map(|e| e.0), Some(Errno::ENOSPC));
        assert_eq!(f.write_error(0, 150), None);
    }

    #[test]
    fn fsync_fails_from_its_threshold_on() {
        let f = Faults {
            eio_fsync_after: Some(10),
            ..Faults::default()
        };
        assert_eq!(f.fsync_error(9), None);
        assert_eq!(f.fsync_error(10), Some(Errno::EIO));
        let always = Faults {
            eio_fsync_after: Some(0),
            ..Faults::default()
        };
        assert_eq!(always.fsync_error(0), Some(Errno::EIO));
    }

    #[test]
    fn only_renames_with_flags_fail() {
        let f = Faults {
            no_rename_flags: true,
            ..Faults::default()
        };
        assert_eq!(f.rename_error(RenameFlags::empty()), None);
        assert_eq!(
            f.rename_error(RenameFlags::RENAME_NOREPLACE),
            Some(Errno::EINVAL)
        );
        assert_eq!(
            Faults::default().rename_error(RenameFlags::RENAME_NOREPLACE),
            None
        );
    }
}
