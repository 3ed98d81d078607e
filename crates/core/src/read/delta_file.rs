//! Reading a delta file (`ickpt_inject`, `ickpt merge`): whole, after a size check, then
//! every check `DeltaFile::decode` makes.

use crate::error::{FileError, InjectError};
use ickpt_format::{DeltaFile, FormatError};
use std::path::Path;

/// The largest delta file read. A delta holds what a section changed, far below this; the
/// limit bounds what a crafted file makes ickpt hold: the file, and its words decoded (16
/// bytes each in memory for the 4 to 12 they take in the file), at most 4 times its size.
pub const MAX_DELTA_FILE: u64 = 1 << 30;

/// The delta file at `path`, read whole and checked. Opened once: the size checked is the
/// size read, whatever happens to the path meanwhile.
pub fn read(path: &Path) -> Result<DeltaFile, InjectError> {
    use std::os::unix::fs::FileExt;
    let file = path.display().to_string();
    let io = |op, e| InjectError::File(FileError::new(&file, op, e));
    let f = std::fs::File::open(path).map_err(|e| io("open", e))?;
    let len = f.metadata().map_err(|e| io("stat", e))?.len();
    read_whole(&file, len, &|buf| f.read_exact_at(buf, 0))
}

/// The delta `file` (its name in errors) of `len` bytes, its real size: the size checked
/// against [`MAX_DELTA_FILE`] before anything is allocated, then read whole through `read`
/// (from offset 0) and decoded with every check `DeltaFile::decode` makes. Delta files from a path and
/// section saves from a store both come through here.
pub fn read_whole(
    file: &str,
    len: u64,
    read: &dyn Fn(&mut [u8]) -> std::io::Result<()>,
) -> Result<DeltaFile, InjectError> {
    if len > MAX_DELTA_FILE {
        return Err(InjectError::Corrupt {
            file: file.into(),
            source: FormatError::Corrupt {
                offset: 0,
                what: format!("{len} bytes: larger than any delta file ickpt writes"),
            },
        });
    }
    let mut bytes = vec![0u8; len as usize];
    read(&mut bytes).map_err(|e| InjectError::File(FileError::new(file, "read", e)))?;
    DeltaFile::decode(&bytes).map_err(|source| InjectError::Corrupt {
        file: file.into(),
        source,
    })
}
