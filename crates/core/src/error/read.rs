//! Reading a store's versions: what a restore, `verify`, `ls` and the version list can
//! fail with. Each names the file or directory.

use super::{FileError, VERIFY_HINT};
use crate::store::StoreId;
use ickpt_format::FormatError;
use std::io;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ReadError {
    #[error("{file}: corrupt checkpoint: {source}{VERIFY_HINT}")]
    Corrupt {
        file: String,
        #[source]
        source: FormatError,
    },
    #[error(transparent)]
    File(#[from] FileError),
    #[error("version {version} not found in {dir} (it holds: {available}); 'ickpt ls' lists them")]
    NotFound {
        version: u64,
        dir: String,
        available: String,
    },
    #[error("{file} belongs to another store (identity {found}, this store's is {own}): it was copied in from elsewhere and is never restored here; move it out")]
    Foreign {
        file: String,
        found: StoreId,
        own: StoreId,
    },
    #[error("restoring version {version}: the process is out of file descriptors (after checking {open} file(s) of its chain, one open at a time): raise the limit ('ulimit -n') or close files the application keeps open")]
    OutOfFiles { version: u64, open: usize },
    #[error("version {version} needs version {missing}, which is missing from {dir}: the chain is broken; restore an older full chain ('ickpt ls')")]
    ChainBroken {
        version: u64,
        missing: u64,
        dir: String,
    },
    #[error("no version in {dir} can be restored ({tried} tried; the newest failed with: {newest}); 'ickpt verify' names every problem")]
    NoRestorable {
        dir: String,
        tried: usize,
        newest: String,
    },
    #[error("no committed checkpoint in {dir}")]
    NoCheckpoint { dir: String },
    /// No intact global-commit record (of `global`, or of any when None).
    #[error("{}", match global {
        Some(g) => format!("{dir} holds no intact record of global version {g}; 'ickpt ls' shows the records that count"),
        None => format!("{dir} holds no intact global-commit record"),
    })]
    NoGlobal { global: Option<u64>, dir: String },
}

impl ReadError {
    /// Whether the error is about what a version's files hold (damaged, missing, foreign,
    /// unreadable), so that an older version may still restore.
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            ReadError::Corrupt { .. }
                | ReadError::ChainBroken { .. }
                | ReadError::Foreign { .. }
                | ReadError::NotFound { .. }
                | ReadError::File(FileError::Io { .. })
        )
    }

    /// The file found damaged, when this is damage in a file: another tier's copy of it may
    /// be whole (`store::retry_other_copies`).
    pub fn damaged_file(&self) -> Option<&str> {
        self.file().filter(|_| self.is_damage())
    }

    /// The file the error is about, as the store described it; None when it is about a
    /// store or a version rather than a file.
    pub fn file(&self) -> Option<&str> {
        match self {
            ReadError::Corrupt { file, .. }
            | ReadError::Foreign { file, .. }
            | ReadError::File(FileError::Io { file, .. } | FileError::NoSpace { file }) => {
                Some(file)
            }
            _ => None,
        }
    }

    /// `op` on `file` failed with `source`.
    pub fn io(file: impl Into<String>, op: &'static str, source: io::Error) -> ReadError {
        ReadError::File(FileError::new(file, op, source))
    }

    /// What the format reader found wrong in `file` (a read failure stays an I/O error).
    pub fn format(file: impl Into<String>, e: FormatError) -> ReadError {
        let file = file.into();
        match e {
            FormatError::Io { source, .. } => ReadError::File(FileError::Io {
                file,
                op: "read",
                source: io::Error::new(source.kind(), source.to_string()),
            }),
            other => ReadError::Corrupt {
                file,
                source: other,
            },
        }
    }
}
