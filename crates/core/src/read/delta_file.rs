//! Reading a delta file (`ickpt_inject`, `ickpt merge`): whole, after a size check, then
//! every check `DeltaFile::decode` makes.

use crate::error::{FileError, InjectError};
use ickpt_format::{DeltaFile, FormatError};
use std::path::Path;

/// The largest delta file read. A delta holds what a section changed, far below this; the
/// limit bounds what a crafted file makes ickpt hold: the file, and its words decoded (16
/// bytes each in memory for the 4 to 12 they take in the file), at most 4 times its size.
pub const MAX_DELTA_FILE: u64 = 1 << 30;

/// The delta file at `path`, read whole and checked.
pub fn read(path: &Path) -> Result<DeltaFile, InjectError> {
    let file = path.display().to_string();
    let io = |op, e| InjectError::File(FileError::new(&file, op, e));
    let len = std::fs::metadata(path).map_err(|e| io("stat", e))?.len();
    if len > MAX_DELTA_FILE {
        return Err(InjectError::Corrupt {
            file,
            source: FormatError::Corrupt {
                offset: 0,
                what: format!("{len} bytes: larger than any delta file ickpt writes"),
            },
        });
    }
    let bytes = std::fs::read(path).map_err(|e| io("read", e))?;
    DeltaFile::decode(&bytes).map_err(|source| InjectError::Corrupt { file, source })
}
