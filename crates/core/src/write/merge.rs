//! Merging two delta files into a third (`ickpt merge`, `ickpt_merge`): read and
//! checked as every delta file is (`read/delta_file.rs`), written whole as a private file.

use crate::error::MergeFilesError;
use crate::read::delta_file::{self, MAX_DELTA_FILE};
use ickpt_format::DeltaFile;
use std::path::Path;

/// What [`merge_files`] wrote.
#[derive(Debug, Clone)]
pub struct Merged {
    pub delta: DeltaFile,
    pub bytes: u64,
    /// Words of the earlier and the later input.
    pub inputs: [u64; 2],
}

/// Merge the delta files `a` then `b` (later wins, word by word) into `out`: written whole
/// as [`crate::private_file`] writes (owner-only: it holds application memory; never half
/// written; never through a link or into another user's file); it may be `a` or `b`.
pub fn merge_files(a: &Path, b: &Path, out: &Path) -> Result<Merged, MergeFilesError> {
    let (da, db) = (delta_file::read(a)?, delta_file::read(b)?);
    let delta = da.merge(&db).map_err(|source| MergeFilesError::Layout {
        a: a.display().to_string(),
        b: b.display().to_string(),
        source,
    })?;
    let bytes = delta.encode();
    let file = out.display().to_string();
    if bytes.len() as u64 > MAX_DELTA_FILE {
        return Err(MergeFilesError::TooLarge {
            file,
            bytes: bytes.len() as u64,
        });
    }
    crate::private_file::write_private(out, &bytes)?;
    let words = |d: &DeltaFile| d.regions.iter().map(|r| r.words.len() as u64).sum();
    Ok(Merged {
        inputs: [words(&da), words(&db)],
        bytes: bytes.len() as u64,
        delta,
    })
}
