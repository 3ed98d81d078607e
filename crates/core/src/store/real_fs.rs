//! [`StoreFs`] over the kernel: a directory descriptor opened `O_DIRECTORY|O_NOFOLLOW`, and
//! every file operation relative to it (`sys::fs`), so no path is looked up twice and no
//! link in the store is ever followed.

use super::fs::{DirMeta, Entry, FileKind, FsDir, FsFile, LockGuard, StoreFs};
use crate::sys::fs as sys;
use ickpt_format::Piece;
use std::ffi::OsStr;
use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

const DIR_MODE: u32 = 0o700;
const FILE_MODE: u32 = 0o600;

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

impl StoreFs for RealFs {
    fn open_dir(&self, path: &Path, for_writing: bool) -> io::Result<Box<dyn FsDir>> {
        let nofollow = if for_writing { libc::O_NOFOLLOW } else { 0 };
        let open = || {
            OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY | nofollow)
                .open(path)
        };
        let dir = match open() {
            Ok(d) => d,
            Err(e) if for_writing && e.kind() == io::ErrorKind::NotFound => {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent)?;
                }
                let made = match DirBuilder::new().mode(DIR_MODE).create(path) {
                    Ok(()) => true,
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
                    Err(e) => return Err(e),
                };
                let d = open().map_err(|e| classify(path, e))?;
                if made {
                    // The umask may have taken bits away, never added any: restore exactly 0700.
                    d.set_permissions(Permissions::from_mode(DIR_MODE))?;
                }
                d
            }
            Err(e) => return Err(classify(path, e)),
        };
        Ok(Box::new(RealDir { dir }))
    }
}

/// ENOTDIR and ELOOP also come from components above the last one; keep them only when the
/// last component is the file or the link, so that callers can say so.
fn classify(path: &Path, e: io::Error) -> io::Error {
    if !matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) {
        return e;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => io::Error::from_raw_os_error(libc::ELOOP),
        Ok(m) if !m.is_dir() => io::Error::from_raw_os_error(libc::ENOTDIR),
        _ => io::Error::new(e.kind(), format!("{e} (in a directory above it)")),
    }
}

struct RealDir {
    dir: File,
}

/// The lock's descriptor, whether forked children close it (see `try_lock`), and the
/// process that took it.
struct DirLock {
    file: Option<File>,
    registered: bool,
    owner: u32,
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let file = self.file.take().expect("dropped once");
        if self.owner == std::process::id() {
            // Closing alone would leave the store locked while a child that another thread
            // is spawning still holds a copy of the descriptor (until it execs): reopening
            // the store right after closing it then failed with "locked" (seen in CI).
            let _ = sys::unlock(&file);
        }
        if self.registered && !sys::unregister_lock(file.as_raw_fd()) {
            // A forked child, whose fork handler closed it already: closing the number
            // again could close a file the child has opened since.
            std::mem::forget(file);
        }
    }
}

impl FsDir for RealDir {
    fn meta(&self) -> io::Result<DirMeta> {
        let m = self.dir.metadata()?;
        Ok(DirMeta {
            uid: m.uid(),
            mode: m.mode() & 0o7777,
        })
    }

    fn try_lock(&self, name: &str) -> io::Result<Option<LockGuard>> {
        // A descriptor of its own, so that the lock goes with the store, not with a writer
        // that outlives it. O_NONBLOCK: a FIFO at the name cannot hold the open. Read-write,
        // though nothing is written: some FUSE file systems refuse to create a file opened
        // read-only.
        let file = sys::open_at(
            &self.dir,
            OsStr::new(name),
            libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_NONBLOCK,
            FILE_MODE,
        )?;
        let m = file.metadata()?;
        if !m.is_file() || m.uid() != sys::effective_uid() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "the lock file {name} is {} (owner uid {}): remove it",
                    if m.is_file() {
                        "not yours"
                    } else {
                        "not a regular file"
                    },
                    m.uid()
                ),
            ));
        }
        if m.mode() & 0o077 != 0 {
            file.set_permissions(Permissions::from_mode(FILE_MODE))?;
        }
        if !sys::try_lock_exclusive(&file)? {
            return Ok(None);
        }
        // Forked children close it, so that a child outliving this process does not keep
        // the store locked.
        let registered = sys::register_lock(file.as_raw_fd());
        Ok(Some(Box::new(DirLock {
            file: Some(file),
            registered,
            owner: std::process::id(),
        })))
    }

    fn entries(&self) -> io::Result<Vec<Entry>> {
        let mut out = Vec::new();
        for (name, kind) in sys::list_at(&self.dir)? {
            let kind = match kind {
                Some(k) => k,
                // The file system does not say in its listing; a vanished entry is skipped.
                None => match sys::kind_at(&self.dir, &name)? {
                    Some(k) => k,
                    None => continue,
                },
            };
            out.push(Entry { name, kind });
        }
        Ok(out)
    }

    fn kind_of(&self, name: &str) -> io::Result<Option<FileKind>> {
        sys::kind_at(&self.dir, OsStr::new(name))
    }

    fn create_new(&self, name: &str) -> io::Result<Box<dyn FsFile>> {
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        let file = sys::open_at(&self.dir, OsStr::new(name), flags, FILE_MODE)?;
        // Whatever the umask, exactly owner read/write.
        file.set_permissions(Permissions::from_mode(FILE_MODE))?;
        Ok(Box::new(RealFile::new(file)))
    }

    fn open_file(&self, name: &str) -> io::Result<Box<dyn FsFile>> {
        // O_NONBLOCK: opening a FIFO planted under a version's name must not hang.
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
        let file = sys::open_at(&self.dir, OsStr::new(name), flags, 0).map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "is a symbolic link; ickpt never follows links in its store",
                )
            } else {
                e
            }
        })?;
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "is not a regular file",
            ));
        }
        Ok(Box::new(RealFile::new(file)))
    }

    fn rename_noreplace(&self, from: &str, to: &str) -> io::Result<()> {
        sys::rename_at(&self.dir, OsStr::new(from), OsStr::new(to), true)
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        sys::rename_at(&self.dir, OsStr::new(from), OsStr::new(to), false)
    }

    fn link(&self, from: &str, to: &str) -> io::Result<()> {
        sys::link_at(&self.dir, OsStr::new(from), OsStr::new(to))
    }

    fn unlink(&self, name: &str) -> io::Result<()> {
        sys::unlink_at(&self.dir, OsStr::new(name))
    }

    fn sync(&self) -> io::Result<()> {
        self.dir.sync_all()
    }
}

/// Bytes appended before the device is asked to start writing them. Without it the device
/// idles while a version is copied and written, then takes all of it in the final fsync
/// (60% of a large checkpoint's time); with it the fsync finds most bytes written.
const WRITEBACK_BYTES: u64 = 8 << 20;

struct RealFile {
    file: File,
    /// Bytes appended so far, and how many of them writeback has been started for.
    written: u64,
    queued: u64,
}

impl RealFile {
    fn new(file: File) -> Self {
        RealFile {
            file,
            written: 0,
            queued: 0,
        }
    }
}

impl FsFile for RealFile {
    fn restrict_to_owner(&self) -> io::Result<()> {
        let mode = self.file.metadata()?.mode() & 0o7777;
        if mode & 0o077 != 0 {
            self.file
                .set_permissions(Permissions::from_mode(mode & 0o700))?;
        }
        Ok(())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)?;
        self.written += buf.len() as u64;
        if self.written - self.queued >= WRITEBACK_BYTES {
            // A hint: where the file system refuses it, the fsync at commit does it all.
            let _ = sys::start_writeback(&self.file, self.queued, self.written - self.queued);
            self.queued = self.written;
        }
        Ok(())
    }

    fn overwrite_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        super::within_written(offset, buf.len(), self.written)?;
        FileExt::write_all_at(&self.file, buf, offset)
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(&self.file, buf, offset)
    }

    fn read_pieces_at(&self, pieces: &mut [Piece<'_>], offset: u64) -> io::Result<()> {
        sys::read_pieces_at(&self.file, pieces, offset)
    }

    fn advise_sequential(&self) {
        // A hint: where it is refused, the kernel's default readahead reads all the same.
        let _ = sys::advise_sequential(&self.file);
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_all()
    }
}
