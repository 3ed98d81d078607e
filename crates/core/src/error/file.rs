//! An I/O failure on a named file or directory, shared by every operation that touches the
//! store: the message always says which file and what was being done to it.

use std::io;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum FileError {
    #[error("{file}: no space left on the device; free space or choose another directory (earlier checkpoints are intact)")]
    NoSpace { file: String },
    #[error("{file}: {op} failed: {source}")]
    Io {
        file: String,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    /// Nothing was done to the file: what is at its name is not ickpt's to write
    /// (`private_file`).
    #[error("{file}: refused: {why}")]
    Refused { file: String, why: String },
}

impl FileError {
    /// `op` on `file` failed with `source`; a full disk gets its own message and code.
    pub fn new(file: impl Into<String>, op: &'static str, source: io::Error) -> FileError {
        let file = file.into();
        if source.raw_os_error() == Some(libc::ENOSPC)
            || source.kind() == io::ErrorKind::StorageFull
        {
            return FileError::NoSpace { file };
        }
        FileError::Io { file, op, source }
    }
}
