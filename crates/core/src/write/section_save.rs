//! Writing a section save into a store: its file under its final name at once, then the
//! file of the saves it merged removed (the naming and why a crash between is harmless:
//! `read/section_saves.rs`).

use crate::error::{FileError, SectionError};
use crate::read::section_saves::Saved;
use crate::store::Store;
use ickpt_format::DeltaFile;

/// Write `d` as `s` (durably, under its final name at once), then remove `old`, the same
/// name's file before this save merged into it.
pub(crate) fn section_save(
    store: &dyn Store,
    s: &Saved,
    d: &DeltaFile,
    old: Option<&Saved>,
) -> Result<u64, SectionError> {
    let object = s.object();
    let io = |op, e| SectionError::File(FileError::new(store.describe(&object), op, e));
    let bytes = d.encode();
    let mut w = store.create(&object).map_err(|e| io("create", e))?;
    w.write_all(&bytes).map_err(|e| io("write", e))?;
    if let Err(e) = w.commit() {
        // A commit can fail after the file got its name (the directory's sync): the save
        // failed all the same, and its name must stay free for the next attempt.
        let _ = store.remove(&object);
        return Err(io("commit", e));
    }
    if let Some(old) = old {
        // The new file is committed: failing to remove the old one only leaves a file the
        // next listing removes.
        let _ = store.remove(&old.object());
    }
    Ok(bytes.len() as u64)
}
