//! The handful of file-system operations a [`DirStore`](super::DirStore) makes, behind a
//! trait: [`RealFs`](super::RealFs) performs them, [`CrashFs`](super::CrashFs) simulates a
//! disk that loses what was not made durable when the power fails.
//!
//! Every name is a single entry of the store directory, never a path: an implementation
//! works relative to the directory it opened and never follows a symbolic link.

use ickpt_format::{read_each_piece, Piece};
use std::ffi::OsString;
use std::io;
use std::path::Path;

pub use crate::sys::fs::FileKind;

/// Owner and permission bits of a store directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirMeta {
    pub uid: u32,
    /// The permission bits (`st_mode & 0o7777`).
    pub mode: u32,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: OsString,
    pub kind: FileKind,
}

/// Holds a store's lock until dropped.
pub type LockGuard = Box<dyn Send + Sync>;

/// Opens store directories.
pub trait StoreFs: Send + Sync {
    /// Open the directory at `path`, refusing a file (ENOTDIR). `for_writing`: refuse a
    /// symbolic link in its last component too (ELOOP), and make a missing directory (its
    /// parents too), owner-only (0700) whatever the umask. A reader follows a link there: it
    /// writes nothing, and the path is the one its user named.
    fn open_dir(&self, path: &Path, for_writing: bool) -> io::Result<Box<dyn FsDir>>;
}

/// An open directory; every operation is relative to it.
pub trait FsDir: Send + Sync {
    fn meta(&self) -> io::Result<DirMeta>;
    /// Take an exclusive lock on the regular file `name` in the directory, created owner-only
    /// (0600) if missing and made owner-only if it is not, held until the guard returned is
    /// dropped (or the process dies); None when another holder has it. Only a process that
    /// can open the file can lock it, so a file only the owner can open keeps other users
    /// from blocking the store (a lock on the directory itself could be taken by anyone who
    /// can read it). A link or anything but a regular file of the effective user's is an
    /// error, never followed.
    fn try_lock(&self, name: &str) -> io::Result<Option<LockGuard>>;
    fn entries(&self) -> io::Result<Vec<Entry>>;
    /// What `name` is, not following a link; None when it does not exist.
    fn kind_of(&self, name: &str) -> io::Result<Option<FileKind>>;
    /// Create `name` for writing, owner-only (0600); EEXIST if anything (even a dangling
    /// link) has that name.
    fn create_new(&self, name: &str) -> io::Result<Box<dyn FsFile>>;
    /// Open the regular file `name` for reading; a link or anything but a regular file is
    /// an error, never followed or opened.
    fn open_file(&self, name: &str) -> io::Result<Box<dyn FsFile>>;
    /// Rename without replacing (EEXIST); EINVAL where the file system lacks it.
    fn rename_noreplace(&self, from: &str, to: &str) -> io::Result<()>;
    /// Rename, replacing `to` if it exists.
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;
    /// A second name for `from` (EEXIST if `to` exists).
    fn link(&self, from: &str, to: &str) -> io::Result<()>;
    /// Remove the entry `name` (a link itself, never its target).
    fn unlink(&self, name: &str) -> io::Result<()>;
    /// Make the directory's entries durable (fsync).
    fn sync(&self) -> io::Result<()>;
}

/// An open file of the store.
pub trait FsFile: Send + Sync {
    /// Append `buf` (files are written front to back once).
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Replace bytes already written (`StoreWriter::overwrite_at`).
    fn overwrite_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()>;
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// As [`ickpt_format::ReadAt::read_pieces_at`]; by default one read per kept piece.
    fn read_pieces_at(&self, pieces: &mut [Piece<'_>], offset: u64) -> io::Result<()> {
        read_each_piece(pieces, offset, |b, at| self.read_exact_at(b, at))
    }
    /// A hint that the file is about to be read front to back (a larger readahead); by
    /// default nothing.
    fn advise_sequential(&self) {}
    fn size(&self) -> io::Result<u64>;
    /// Make the file's data durable (fsync).
    fn sync(&self) -> io::Result<()>;
    /// Take group and other permissions away (a file written before stores were
    /// owner-only).
    fn restrict_to_owner(&self) -> io::Result<()>;
}
