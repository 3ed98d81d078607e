//! A local directory: write to a temporary name, fsync, rename, fsync the directory.

use super::{Store, StoreFile, StoreId, StoreWriter};
use ickpt_format::ReadAt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Marks a directory as an ickpt store, so ickpt never writes into or deletes from a
/// directory that holds something else.
pub const MARKER: &str = "ickpt-store";
const MARKER_TEXT: &str = "ickpt checkpoint store, format 1\n";
const TMP_PREFIX: &str = ".tmp-";

#[derive(Debug)]
pub struct DirStore {
    dir: PathBuf,
    /// Held open with an exclusive flock while this process writes to the store.
    _lock: Option<File>,
}

/// Why a directory could not be opened as a store.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{dir}: {source}")]
    Io {
        dir: String,
        #[source]
        source: io::Error,
    },
    #[error("{dir} is not an ickpt store (no '{MARKER}' file, and it is not empty); choose an empty or new directory")]
    NotAStore { dir: String },
    #[error("{dir} is not an ickpt store (no '{MARKER}' file)")]
    Missing { dir: String },
    #[error("{dir} is in use by another ickpt process (its lock is held); give each process its own directory")]
    Locked { dir: String },
}

impl DirStore {
    /// Open `dir` for reading (the CLI): it must already be a store.
    pub fn open_read(dir: &Path) -> Result<Self, OpenError> {
        let s = DirStore {
            dir: dir.to_path_buf(),
            _lock: None,
        };
        if !dir.join(MARKER).is_file() {
            return Err(OpenError::Missing { dir: s.shown() });
        }
        Ok(s)
    }

    /// Open or create `dir` for writing: creates it and its marker if new or empty, takes
    /// the store's lock, and removes temporary files a crashed writer left behind.
    pub fn open_write(dir: &Path) -> Result<Self, OpenError> {
        let shown = dir.display().to_string();
        let io_err = |source| OpenError::Io {
            dir: shown.clone(),
            source,
        };
        fs::create_dir_all(dir).map_err(io_err)?;
        let marker = dir.join(MARKER);
        if !marker.is_file() {
            if fs::read_dir(dir).map_err(io_err)?.next().is_some() {
                return Err(OpenError::NotAStore { dir: shown });
            }
            let mut f = File::create(&marker).map_err(io_err)?;
            f.write_all(MARKER_TEXT.as_bytes()).map_err(io_err)?;
            f.sync_all().map_err(io_err)?;
            sync_dir(dir).map_err(io_err)?;
        }
        let lock = File::open(&marker).map_err(io_err)?;
        if !crate::sys::fs::try_lock_exclusive(&lock).map_err(io_err)? {
            return Err(OpenError::Locked { dir: shown });
        }
        crate::sys::fs::register_lock(std::os::fd::AsRawFd::as_raw_fd(&lock));
        for e in fs::read_dir(dir).map_err(io_err)? {
            let e = e.map_err(io_err)?;
            if e.file_name().to_string_lossy().starts_with(TMP_PREFIX) {
                fs::remove_file(e.path()).map_err(io_err)?;
            }
        }
        Ok(DirStore {
            dir: dir.to_path_buf(),
            _lock: Some(lock),
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn shown(&self) -> String {
        self.dir.display().to_string()
    }
}

impl Drop for DirStore {
    fn drop(&mut self) {
        if let Some(l) = &self._lock {
            crate::sys::fs::unregister_lock(std::os::fd::AsRawFd::as_raw_fd(l));
        }
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl Store for DirStore {
    fn describe(&self, name: &str) -> String {
        if name.is_empty() {
            return self.shown();
        }
        self.dir.join(name).display().to_string()
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for e in fs::read_dir(&self.dir)? {
            let name = e?.file_name().to_string_lossy().into_owned();
            if !name.starts_with(TMP_PREFIX) && name != MARKER {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    fn open(&self, name: &str) -> io::Result<Box<dyn StoreFile>> {
        let file = File::open(self.dir.join(name))?;
        let len = file.metadata()?.len();
        Ok(Box::new(DirFile { file, len }))
    }

    fn create(&self, name: &str) -> io::Result<Box<dyn StoreWriter>> {
        let tmp = self
            .dir
            .join(format!("{TMP_PREFIX}{name}.{}", std::process::id()));
        // Truncate rather than create_new: a temporary of the same name can only be left by
        // an abandoned attempt of this process, and we hold the store's lock.
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&tmp)?;
        Ok(Box::new(DirWriter {
            file: Some(file),
            tmp,
            dest: self.dir.join(name),
            dir: self.dir.clone(),
        }))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        fs::remove_file(self.dir.join(name))?;
        sync_dir(&self.dir)
    }

    fn identity(&self) -> io::Result<Option<StoreId>> {
        let text = match fs::read_to_string(self.dir.join(MARKER)) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(text
            .lines()
            .find_map(|l| l.strip_prefix("id ").and_then(StoreId::from_hex)))
    }

    fn set_identity(&self, id: StoreId) -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(self.dir.join(MARKER))?;
        f.write_all(format!("{MARKER_TEXT}id {id}\n").as_bytes())?;
        f.sync_all()
    }
}

struct DirFile {
    file: File,
    len: u64,
}

impl ReadAt for DirFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(&self.file, buf, offset)
    }
}

impl StoreFile for DirFile {
    fn len(&self) -> u64 {
        self.len
    }
}

struct DirWriter {
    file: Option<File>,
    tmp: PathBuf,
    dest: PathBuf,
    dir: PathBuf,
}

impl StoreWriter for DirWriter {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file
            .as_mut()
            .expect("open until commit")
            .write_all(buf)
    }

    fn commit(mut self: Box<Self>) -> io::Result<()> {
        let file = self.file.take().expect("commit once");
        file.sync_all()?;
        drop(file);
        crate::sys::fs::rename_noreplace(&self.tmp, &self.dest)?;
        // Committed from here on, even if the directory sync below fails.
        self.tmp = PathBuf::new();
        sync_dir(&self.dir)
    }
}

impl Drop for DirWriter {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}
