//! Files ickpt writes application memory to outside a store (`ickpt restore --out`, `ickpt
//! merge -o`), often in a directory other users share (`/tmp`, a project's scratch space).
//! Whatever someone else planted at the name, the memory never reaches them:
//!
//! - the bytes go to a new temporary beside the file, created `O_CREAT|O_EXCL` (never
//!   through anything already at its name) and owner-only (0600) whatever the umask;
//! - it takes the file's name by `rename`, which replaces a directory entry and never
//!   writes into the file or through the link that was there;
//! - a symbolic link, anything but a regular file, or a file of another user at the name is
//!   refused before anything is written (kernels with `fs.protected_symlinks=0` follow
//!   another user's link in a sticky directory; a file someone else owns is theirs to keep).
//!
//! A failed write leaves the file as it was and removes the temporary.

use crate::error::FileError;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Temporary names tried before giving up (each is new: random, so a name planted in
/// advance is skipped, never opened).
const TEMP_ATTEMPTS: u32 = 16;

/// An output file being written under a temporary name; [`commit`](Self::commit) gives it
/// its name, dropping it uncommitted removes it.
#[derive(Debug)]
pub struct PrivateFile {
    file: Option<File>,
    tmp: PathBuf,
    out: PathBuf,
}

impl PrivateFile {
    /// Check `out` may be replaced, and create the temporary that will replace it.
    pub fn create(out: &Path) -> Result<PrivateFile, FileError> {
        check_replaceable(out)?;
        let shown = out.display().to_string();
        let name = out.file_name().ok_or_else(|| FileError::Refused {
            file: shown.clone(),
            why: "not a file name; name the file to write".into(),
        })?;
        let dir = out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
        for _ in 0..TEMP_ATTEMPTS {
            let tmp = dir.join(format!(
                ".tmp-{}.{}.{:016x}",
                name.to_string_lossy(),
                std::process::id(),
                random_u64()
            ));
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_CLOEXEC)
                .open(&tmp)
            {
                Ok(file) => {
                    return Ok(PrivateFile {
                        file: Some(file),
                        tmp,
                        out: out.to_path_buf(),
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
                Err(e) => {
                    return Err(FileError::new(
                        shown,
                        "create a temporary in its directory",
                        e,
                    ))
                }
            }
        }
        Err(FileError::new(
            shown,
            "create a temporary in its directory",
            last,
        ))
    }

    /// The temporary, for writing.
    pub fn file(&self) -> &File {
        self.file.as_ref().expect("open until committed")
    }

    pub fn path(&self) -> &Path {
        &self.out
    }

    /// Make the bytes durable and give them the file's name (a link or a file planted there
    /// meanwhile is replaced, never written through), then make the name durable.
    pub fn commit(mut self) -> Result<(), FileError> {
        let shown = self.out.display().to_string();
        let file = self.file.take().expect("committed once");
        file.sync_all()
            .map_err(|e| FileError::new(&shown, "sync", e))?;
        drop(file);
        // Checked again: the name may have changed hands since `create`.
        check_replaceable(&self.out)?;
        std::fs::rename(&self.tmp, &self.out).map_err(|e| FileError::new(&shown, "rename", e))?;
        self.tmp = PathBuf::new();
        let dir = self
            .out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        File::open(dir).and_then(|d| d.sync_all()).map_err(|e| {
            FileError::new(
                shown,
                "sync its directory (written, but a crash now may lose it)",
                e,
            )
        })
    }
}

impl Drop for PrivateFile {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            // unlink removes the temporary itself, whatever it has become.
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Write `bytes` as the file `out` whole, as [`PrivateFile`] does.
pub fn write_private(out: &Path, bytes: &[u8]) -> Result<(), FileError> {
    use std::io::Write;
    let mut f = PrivateFile::create(out)?;
    f.file
        .as_mut()
        .expect("open until committed")
        .write_all(bytes)
        .map_err(|e| FileError::new(out.display().to_string(), "write", e))?;
    f.commit()
}

/// Nothing at `out`, or a regular file of this user's: what ickpt may replace.
fn check_replaceable(out: &Path) -> Result<(), FileError> {
    let shown = out.display().to_string();
    let refuse = |why: String| FileError::Refused {
        file: shown.clone(),
        why,
    };
    let m = match std::fs::symlink_metadata(out) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(FileError::new(&shown, "look up", e)),
    };
    let uid = crate::sys::fs::effective_uid();
    if m.file_type().is_symlink() {
        return Err(refuse(format!(
            "a symbolic link (owned by uid {}); ickpt never writes through a link, which \
             anyone who can write its directory may have planted: remove it, or name the file \
             itself",
            m.uid()
        )));
    }
    if !m.file_type().is_file() {
        return Err(refuse(
            "not a regular file; name a new file or a file of yours".into(),
        ));
    }
    if m.uid() != uid {
        return Err(refuse(format!(
            "belongs to uid {}, not to you (uid {uid}); ickpt never replaces another user's \
             file: name a new file or a file of yours",
            m.uid()
        )));
    }
    Ok(())
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // A name from the clock and the process when the kernel's pool fails; O_EXCL still
    // keeps a taken name from being opened.
    if crate::sys::random::fill(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        return t ^ u64::from(std::process::id()).rotate_left(32);
    }
    u64::from_ne_bytes(b)
}
