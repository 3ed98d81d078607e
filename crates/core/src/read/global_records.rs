//! The global-commit records of a store (`docs/FORMAT.md`, "Global-commit records"), read
//! for the engine, garbage collection and `ickpt ls`: only intact records of this store that
//! still name the very version file they were written for count.

use crate::error::ReadError;
use crate::read::catalog::{numbered, Catalog};
use crate::store::Store;
use ickpt_format::{global_name, parse_global_name, FormatError, GlobalRecord, GLOBAL_RECORD_LEN};

/// The store's intact global records, oldest first. A record that is damaged, belongs to
/// another store, or names a version file that is gone, damaged or was replaced is passed
/// over (`ickpt ls` shows only the records that count). Anything else that stops a record
/// or its version from being read (an I/O error, too many open files, a record or version
/// of a newer format) is an error: a restart must never take a record it could not read for
/// one that is not there, and discard versions on that account.
pub fn records(catalog: &Catalog<'_>) -> Result<Vec<GlobalRecord>, ReadError> {
    let mut out = Vec::new();
    for g in record_numbers(catalog.store())? {
        out.extend(record(catalog, g)?);
    }
    Ok(out)
}

/// Record `global` if it counts, by the rules of [`records`].
pub fn record(catalog: &Catalog<'_>, global: u64) -> Result<Option<GlobalRecord>, ReadError> {
    let Some(r) = read_record(catalog.store(), global)? else {
        return Ok(None);
    };
    if catalog.identity().is_some_and(|id| id.0 != r.store_id) {
        return Ok(None);
    }
    match catalog.open(r.version) {
        Ok(ov) => Ok((ov.meta.footer.meta_crc == r.version_meta_crc).then_some(r)),
        Err(
            e @ ReadError::Corrupt {
                source: FormatError::UnsupportedVersion { .. },
                ..
            },
        ) => Err(e),
        Err(
            ReadError::Corrupt { .. }
            | ReadError::NotFound { .. }
            | ReadError::Foreign { .. }
            | ReadError::ChainBroken { .. },
        ) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The global version of every record file in the store, intact or not, ascending.
pub fn record_numbers(store: &dyn Store) -> Result<Vec<u64>, ReadError> {
    numbered(store, parse_global_name)
}

/// Global record `global`: None when its file is gone or fails its checks; an error when it
/// cannot be read, or is of a newer format than this ickpt knows.
fn read_record(store: &dyn Store, global: u64) -> Result<Option<GlobalRecord>, ReadError> {
    let name = global_name(global);
    let io = |op, e| ReadError::io(store.describe(&name), op, e);
    let f = match store.open(&name) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("open", e)),
    };
    if f.len() != GLOBAL_RECORD_LEN as u64 {
        return Ok(None);
    }
    let mut b = [0u8; GLOBAL_RECORD_LEN];
    f.read_exact_at(&mut b, 0).map_err(|e| io("read", e))?;
    match GlobalRecord::decode(&b, global) {
        Ok(r) => Ok(Some(r)),
        Err(e @ FormatError::UnsupportedVersion { .. }) => Err(ReadError::Corrupt {
            file: store.describe(&name),
            source: e,
        }),
        Err(_) => Ok(None),
    }
}

/// The versions garbage collection keeps (with what restoring them reads) for the global
/// records: those of every intact record the store holds. A commit leaves the newest two and
/// the pinned one on every tier (`Engine::global_commit`); a restart from lower tiers whose
/// drains lagged differently finds the pinned one on every rank.
pub fn kept_versions(catalog: &Catalog<'_>) -> Result<Vec<u64>, ReadError> {
    Ok(records(catalog)?.iter().map(|r| r.version).collect())
}
