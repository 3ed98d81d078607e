//! Giving a finished temporary its final name without ever replacing a committed version,
//! on file systems with and without `RENAME_NOREPLACE`.

use super::fs::FsDir;
use std::io;
use std::sync::Mutex;

/// The environment variable that forces a [`RenameMode`].
pub const RENAME_VAR: &str = "ICKPT_RENAME";

/// How a temporary becomes a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenameMode {
    /// `noreplace` where the file system has it, else `link`, else `rename`; found out at
    /// the first commit and kept for the store's life.
    Auto,
    /// `renameat2(RENAME_NOREPLACE)`: atomic, fails if the name exists.
    NoReplace,
    /// `link(2)` then `unlink(2)` of the temporary: atomic too (link fails with EEXIST), for
    /// FUSE and NFS, which lack `RENAME_NOREPLACE`.
    Link,
    /// Check the name is free, then a plain `rename(2)`, for file systems without hard
    /// links either. Not atomic against another process creating the name in between, but
    /// every ickpt writer holds the store's lock, and no one else may write in the store
    /// directory (it must be the caller's and not writable by group or others).
    Rename,
}

impl RenameMode {
    pub fn parse(s: &str) -> Option<RenameMode> {
        match s {
            "auto" => Some(RenameMode::Auto),
            "noreplace" => Some(RenameMode::NoReplace),
            "link" => Some(RenameMode::Link),
            "rename" => Some(RenameMode::Rename),
            _ => None,
        }
    }
}

/// Renames for one store: the mode asked for, and what `auto` found.
#[derive(Debug)]
pub(super) struct Publisher {
    asked: RenameMode,
    found: Mutex<Option<RenameMode>>,
}

/// The file system lacks RENAME_NOREPLACE (FUSE and NFS say EINVAL).
fn no_noreplace(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP)
    )
}

/// The file system lacks hard links. EROFS too: fusepy's file systems answer it for every
/// operation they do not implement (link among them), as do some read-only overlays, on a
/// directory where creating and renaming files works (the store checked that at open).
fn no_links(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPERM | libc::ENOSYS | libc::EOPNOTSUPP | libc::EROFS)
    )
}

/// The attempt told whether the method works here: it did, or it refused because the name
/// exists.
fn settles(r: &io::Result<()>) -> bool {
    match r {
        Ok(()) => true,
        Err(e) => e.kind() == io::ErrorKind::AlreadyExists,
    }
}

impl Publisher {
    pub fn new(asked: RenameMode) -> Self {
        Publisher {
            asked,
            found: Mutex::new(None),
        }
    }

    /// The method in use: the one asked for, or the one `auto` found (None before the first
    /// commit).
    pub fn method(&self) -> Option<RenameMode> {
        match self.asked {
            RenameMode::Auto => *self.found.lock().unwrap_or_else(|e| e.into_inner()),
            m => Some(m),
        }
    }

    /// Give `from` the name `to`, failing with EEXIST if `to` exists.
    pub fn publish(&self, dir: &dyn FsDir, from: &str, to: &str) -> io::Result<()> {
        if self.asked != RenameMode::Auto {
            return run(self.asked, dir, from, to);
        }
        let mut found = self.found.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = *found {
            return run(m, dir, from, to);
        }
        for (m, unsupported) in [
            (
                RenameMode::NoReplace,
                no_noreplace as fn(&io::Error) -> bool,
            ),
            (RenameMode::Link, no_links),
        ] {
            let r = run(m, dir, from, to);
            match &r {
                Err(e) if unsupported(e) => continue,
                _ if settles(&r) => *found = Some(m),
                _ => {}
            }
            return r;
        }
        let r = run(RenameMode::Rename, dir, from, to);
        if settles(&r) {
            *found = Some(RenameMode::Rename);
        }
        r
    }
}

fn run(m: RenameMode, dir: &dyn FsDir, from: &str, to: &str) -> io::Result<()> {
    match m {
        RenameMode::NoReplace | RenameMode::Auto => dir.rename_noreplace(from, to),
        RenameMode::Link => {
            dir.link(from, to)?;
            // Committed once linked: a temporary left by a failed unlink is removed when a
            // writer next opens the store, and its data is the version's, so harmless.
            let _ = dir.unlink(from);
            Ok(())
        }
        RenameMode::Rename => {
            if dir.kind_of(to)?.is_some() {
                return Err(io::Error::from_raw_os_error(libc::EEXIST));
            }
            dir.rename(from, to)
        }
    }
}
