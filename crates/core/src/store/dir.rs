//! A local directory: write to a temporary name, fsync, give it its final name without
//! replacing anything, fsync the directory. Every operation is relative to the directory
//! opened once (see `fs.rs`), so no link in the store is ever followed.

use super::fs::{FileKind, FsDir, FsFile, LockGuard, StoreFs};
use super::marker::{marker_identity, marker_text, MARKER, MARKER_MAX};
pub use super::open_error::OpenError;
use super::publish::{Publisher, RenameMode};
use super::real_fs::RealFs;
use super::{parse_version_name, Store, StoreFile, StoreId, StoreWriter};
use ickpt_format::{Piece, ReadAt};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What writers lock: a file only the owner can open, so no other user can block the store.
pub const LOCK: &str = "ickpt-lock";
const TMP_PREFIX: &str = ".tmp-";

/// Whether `name` is a file being written (a temporary renamed over its name once whole).
pub(crate) fn is_temporary_name(name: &str) -> bool {
    name.starts_with(TMP_PREFIX)
}
/// Names tried before giving up when temporary names are taken (each try is a new name).
const TEMP_ATTEMPTS: u32 = 64;

/// A store in a directory. Writers hold an exclusive lock on the directory for the store's
/// life (`open_write`); readers take none.
pub struct DirStore {
    shared: Arc<Shared>,
    /// The store's lock, held by the store itself, not by its writers: a writer abandoned
    /// without cleanup (as a crash would) must not keep the store locked.
    lock: Option<LockGuard>,
}

/// What the store and its writers share.
struct Shared {
    dir: Box<dyn FsDir>,
    path: PathBuf,
    publisher: Publisher,
    /// Numbers temporary names, so a taken name is skipped, never reused.
    next_temp: AtomicU64,
}

impl std::fmt::Debug for DirStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirStore")
            .field("dir", &self.shared.path)
            .field("locked", &self.lock.is_some())
            .finish()
    }
}

impl DirStore {
    /// Open `dir` for reading (the CLI): it must be a store (or one that lost its marker).
    pub fn open_read(dir: &Path) -> Result<Self, OpenError> {
        Self::open_read_on(&RealFs, dir)
    }

    /// Open or create `dir` for writing: refuses a directory others could write to or that
    /// holds what is not ickpt's, takes the store's lock, checks the directory is writable,
    /// creates the marker if the store is new (or lost it), and removes temporaries a
    /// crashed writer left behind. Versions get their names as `auto` finds best (an
    /// engine passes `ICKPT_RENAME`'s choice to [`open_write_on`](Self::open_write_on)).
    pub fn open_write(dir: &Path) -> Result<Self, OpenError> {
        Self::open_write_on(&RealFs, dir, RenameMode::Auto)
    }

    /// [`open_read`](Self::open_read) on any file system.
    pub fn open_read_on(fs: &dyn StoreFs, dir: &Path) -> Result<Self, OpenError> {
        let d = fs
            .open_dir(dir, false)
            .map_err(|e| open_dir_error(dir, e))?;
        let s = DirStore::new(d, dir, RenameMode::Auto);
        if !s.has_marker()? && !s.has_versions()? {
            return Err(OpenError::Missing { dir: s.shown() });
        }
        Ok(s)
    }

    /// [`open_write`](Self::open_write) on any file system, with the rename method given.
    pub fn open_write_on(
        fs: &dyn StoreFs,
        dir: &Path,
        rename: RenameMode,
    ) -> Result<Self, OpenError> {
        let d = fs.open_dir(dir, true).map_err(|e| open_dir_error(dir, e))?;
        let mut s = DirStore::new(d, dir, rename);
        s.check_ownership()?;
        // has_versions refuses a directory holding anything but versions and ickpt's own
        // files, before anything, even the lock file or the probe, is written into it.
        if !s.has_marker()? {
            s.has_versions()?;
        }
        s.lock = s
            .shared
            .dir
            .try_lock(LOCK)
            .map_err(|e| match e.raw_os_error() {
                // The lock file could not be created: the directory is read-only to us.
                Some(libc::EROFS | libc::EACCES | libc::EPERM) => OpenError::NotWritable {
                    dir: s.shown(),
                    source: e,
                },
                _ => s.io_error(LOCK, e),
            })?;
        if s.lock.is_none() {
            return Err(OpenError::Locked { dir: s.shown() });
        }
        // Asked again under the lock: a writer that held it may have written it meanwhile.
        let has_marker = s.has_marker()?;
        s.check_writable()?;
        if !has_marker {
            s.write_marker(None).map_err(|e| s.io_error(MARKER, e))?;
        }
        s.remove_temporaries()?;
        s.restrict_old_files();
        Ok(s)
    }

    /// Versions and the marker written before stores were owner-only may be readable by
    /// anyone (0644 under umask 022): make them the owner's alone. Best effort: a file that
    /// cannot be changed (owned by someone else) is left as it is.
    fn restrict_old_files(&self) {
        let Ok(entries) = self.shared.dir.entries() else {
            return;
        };
        for e in entries {
            let Some(name) = e.name.to_str() else {
                continue;
            };
            if e.kind == FileKind::File
                && (name == MARKER || crate::store::parse_version_name(name).is_some())
            {
                if let Ok(f) = self.shared.dir.open_file(name) {
                    let _ = f.restrict_to_owner();
                }
            }
        }
    }

    fn new(dir: Box<dyn FsDir>, path: &Path, rename: RenameMode) -> Self {
        DirStore {
            shared: Arc::new(Shared {
                dir,
                path: path.to_path_buf(),
                publisher: Publisher::new(rename),
                next_temp: AtomicU64::new(0),
            }),
            lock: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// How versions get their final names: the mode asked for, or what `auto` found at the
    /// first commit (None before it).
    pub fn rename_method(&self) -> Option<RenameMode> {
        self.shared.publisher.method()
    }

    fn shown(&self) -> String {
        self.shared.path.display().to_string()
    }

    fn io_error(&self, name: &str, source: io::Error) -> OpenError {
        OpenError::Io {
            path: self.describe(name),
            source,
        }
    }

    /// Like ssh's StrictModes: a directory another user can write to lets them plant or
    /// replace what a restore would read.
    fn check_ownership(&self) -> Result<(), OpenError> {
        let m = self.shared.dir.meta().map_err(|e| self.io_error("", e))?;
        let uid = crate::sys::fs::effective_uid();
        if m.uid != uid || m.mode & 0o022 != 0 {
            return Err(OpenError::Unsafe {
                dir: self.shown(),
                owner: m.uid,
                mode: m.mode,
                uid,
            });
        }
        Ok(())
    }

    /// Fail now rather than at the first checkpoint (read-only mounts, no permission).
    fn check_writable(&self) -> Result<(), OpenError> {
        let (probe, file) =
            self.shared
                .create_temp("probe")
                .map_err(|source| OpenError::NotWritable {
                    dir: self.shown(),
                    source,
                })?;
        drop(file);
        self.shared
            .dir
            .unlink(&probe)
            .map_err(|e| self.io_error(&probe, e))
    }

    fn has_marker(&self) -> Result<bool, OpenError> {
        match self.shared.dir.kind_of(MARKER) {
            Ok(None) => Ok(false),
            Ok(Some(FileKind::File)) => Ok(true),
            Ok(Some(k)) => Err(OpenError::BadMarker {
                path: self.describe(MARKER),
                what: match k {
                    FileKind::Symlink => "is a symbolic link",
                    FileKind::Dir => "is a directory",
                    _ => "is not a regular file",
                },
            }),
            Err(e) => Err(self.io_error(MARKER, e)),
        }
    }

    /// Whether the directory holds versions, when it has no marker. Only versions and
    /// ickpt's temporaries make a store that lost its marker; anything else means it is
    /// some other directory, never to be written into.
    fn has_versions(&self) -> Result<bool, OpenError> {
        let mut entries = self
            .shared
            .dir
            .entries()
            .map_err(|e| self.io_error("", e))?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let mut versions = false;
        for e in &entries {
            let name = e.name.to_str().unwrap_or("");
            if is_temporary_name(name) && matches!(e.kind, FileKind::File | FileKind::Symlink) {
                continue;
            }
            // The marker too: another writer may have written it since it was looked for.
            if e.kind == FileKind::File && (name == LOCK || name == MARKER) {
                continue;
            }
            if e.kind == FileKind::File && self.is_store_file(name) {
                versions = true;
                continue;
            }
            return Err(OpenError::NotAStore {
                dir: self.shown(),
                first: e.name.to_string_lossy().into_owned(),
            });
        }
        Ok(versions)
    }

    /// A version's name on a file that starts as versions do, or a global-commit record's
    /// name on a file that starts as records do.
    fn is_store_file(&self, name: &str) -> bool {
        let want = if parse_version_name(name).is_some() {
            ickpt_format::MAGIC
        } else if ickpt_format::parse_global_name(name).is_some() {
            ickpt_format::GLOBAL_MAGIC
        } else {
            return false;
        };
        let mut magic = [0u8; 8];
        self.shared
            .dir
            .open_file(name)
            .and_then(|f| f.read_exact_at(&mut magic, 0))
            .is_ok()
            && magic == want
    }

    /// Write the marker whole under a temporary name and rename it over the old one: a
    /// crash leaves the old marker or the new, never a torn one. The directory lock keeps
    /// other writers out meanwhile.
    fn write_marker(&self, id: Option<StoreId>) -> io::Result<()> {
        let text = marker_text(id);
        let d = &*self.shared.dir;
        let (tmp, mut file) = self.shared.create_temp(MARKER)?;
        let written = file
            .write_all(text.as_bytes())
            .and_then(|()| file.sync())
            .and_then(|()| d.rename(&tmp, MARKER));
        if written.is_err() {
            let _ = d.unlink(&tmp);
        }
        written?;
        d.sync()
    }

    /// Remove the regular files and links named `.tmp-*` (never what a link points to); a
    /// directory of that name is not ickpt's and is left alone.
    fn remove_temporaries(&self) -> Result<(), OpenError> {
        let entries = self
            .shared
            .dir
            .entries()
            .map_err(|e| self.io_error("", e))?;
        for e in entries {
            let Some(name) = e.name.to_str() else {
                continue;
            };
            if is_temporary_name(name) && matches!(e.kind, FileKind::File | FileKind::Symlink) {
                self.shared
                    .dir
                    .unlink(name)
                    .map_err(|err| self.io_error(name, err))?;
            }
        }
        Ok(())
    }
}

fn open_dir_error(dir: &Path, e: io::Error) -> OpenError {
    let dir = dir.display().to_string();
    match e.raw_os_error() {
        Some(libc::ENOENT) => OpenError::NoSuchDir { dir },
        Some(libc::ENOTDIR) => OpenError::NotADirectory { dir },
        Some(libc::ELOOP) => OpenError::Symlink { dir },
        _ => OpenError::Io {
            path: dir,
            source: e,
        },
    }
}

impl Shared {
    /// Create a fresh temporary for `name`. O_EXCL: a name already taken (by anything, a
    /// link included) is skipped, never opened.
    fn create_temp(&self, name: &str) -> io::Result<(String, Box<dyn FsFile>)> {
        for _ in 0..TEMP_ATTEMPTS {
            let n = self.next_temp.fetch_add(1, Ordering::Relaxed);
            let tmp = format!("{TMP_PREFIX}{name}.{}.{n}", std::process::id());
            match self.dir.create_new(&tmp) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                r => return r.map(|f| (tmp, f)),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{TEMP_ATTEMPTS} temporary names for {name} in a row are taken"),
        ))
    }
}

impl Store for DirStore {
    fn describe(&self, name: &str) -> String {
        if name.is_empty() {
            return self.shown();
        }
        self.shared.path.join(name).display().to_string()
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names: Vec<String> = self
            .shared
            .dir
            .entries()?
            .into_iter()
            .filter_map(|e| e.name.into_string().ok())
            .filter(|n| !n.starts_with(TMP_PREFIX) && n != MARKER && n != LOCK)
            .collect();
        names.sort();
        Ok(names)
    }

    fn open(&self, name: &str) -> io::Result<Box<dyn StoreFile>> {
        let file = self.shared.dir.open_file(name)?;
        let len = file.size()?;
        Ok(Box::new(DirFile { file, len }))
    }

    fn create(&self, name: &str) -> io::Result<Box<dyn StoreWriter>> {
        let (tmp, file) = self.shared.create_temp(name)?;
        Ok(Box::new(DirWriter {
            shared: self.shared.clone(),
            file: Some(file),
            tmp: Some(tmp),
            dest: name.to_string(),
        }))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        self.shared.dir.unlink(name)?;
        self.shared.dir.sync()
    }

    fn identity(&self) -> io::Result<Option<StoreId>> {
        let file = match self.shared.dir.open_file(MARKER) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut text = vec![0u8; file.size()?.min(MARKER_MAX) as usize];
        file.read_exact_at(&mut text, 0)?;
        Ok(marker_identity(&text))
    }

    fn set_identity(&self, id: StoreId) -> io::Result<()> {
        if self.lock.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the store is open for reading only",
            ));
        }
        self.write_marker(Some(id))
    }
}

struct DirFile {
    file: Box<dyn FsFile>,
    len: u64,
}

impl ReadAt for DirFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn read_pieces_at(&self, pieces: &mut [Piece<'_>], offset: u64) -> io::Result<()> {
        self.file.read_pieces_at(pieces, offset)
    }
}

impl StoreFile for DirFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn advise_sequential(&self) {
        self.file.advise_sequential()
    }
}

struct DirWriter {
    shared: Arc<Shared>,
    file: Option<Box<dyn FsFile>>,
    /// The temporary's name until it is committed.
    tmp: Option<String>,
    dest: String,
}

impl StoreWriter for DirWriter {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file
            .as_mut()
            .expect("open until commit")
            .write_all(buf)
    }

    fn overwrite_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.file
            .as_mut()
            .expect("open until commit")
            .overwrite_at(offset, buf)
    }

    fn can_overwrite(&self) -> bool {
        true
    }

    fn commit(mut self: Box<Self>) -> io::Result<()> {
        let file = self.file.take().expect("commit once");
        file.sync()?;
        drop(file);
        let tmp = self.tmp.as_deref().expect("commit once");
        self.shared
            .publisher
            .publish(&*self.shared.dir, tmp, &self.dest)?;
        // Committed from here on, even if the directory sync below fails.
        self.tmp = None;
        self.shared.dir.sync()
    }
}

impl Drop for DirWriter {
    fn drop(&mut self) {
        if let Some(tmp) = &self.tmp {
            let _ = self.shared.dir.unlink(tmp);
        }
    }
}
