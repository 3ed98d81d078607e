//! The versions a store holds: `ickpt_list_versions`, `ickpt_check_version`, and the
//! answers the other calls give when a version is not there.

use super::*;

/// The version files in the store, ascending, restorable or not: up to `capacity` numbers
/// are written to `versions` (which may be NULL when `capacity` is 0) and `*count` receives
/// how many there are, so a first call with capacity 0 sizes the array.
/// `ickpt_check_version` tells whether a restore accepts one.
#[no_mangle]
pub extern "C" fn ickpt_list_versions(
    versions: *mut u64,
    capacity: usize,
    count: *mut usize,
) -> ickpt_result {
    guard(|| {
        let count = out_ptr(count, "count")?;
        if versions.is_null() && capacity > 0 {
            return Err(Error::Null {
                what: "versions (with a capacity above 0)",
            });
        }
        let all = with_engine(&ENGINE, |e| e.catalog().versions())?;
        // Element by element: no slice of `capacity` elements is made, since a caller's
        // capacity larger than its array would make such a slice undefined behaviour even
        // where nothing is written.
        for (i, v) in all.iter().take(capacity).enumerate() {
            // SAFETY: non-NULL (checked above when capacity > 0), and the caller promises
            // room for `capacity` u64s; i < capacity.
            unsafe { versions.add(i).write(*v) };
        }
        *count = all.len();
        Ok(())
    })
}

/// ICKPT_OK when a restore of `version` would accept its file and its chain; otherwise the
/// error that restore would return, with a message naming the file and the problem. Page
/// data is read by the restore itself (or by `ickpt verify`), not here.
#[no_mangle]
pub extern "C" fn ickpt_check_version(version: u64) -> ickpt_result {
    guard(|| with_engine(&ENGINE, |e| e.catalog().chain(version).map(drop)))
}

/// Write the version `pick` finds to `*out`, or fail with ICKPT_ERR_NOT_FOUND naming the
/// store when it finds none.
pub(super) fn found_version(
    out: *mut u64,
    pick: impl FnOnce(&Engine) -> Result<Option<u64>, Error>,
) -> Result<(), Error> {
    let out = out_ptr(out, "version")?;
    *out = with_engine(&ENGINE, |e| pick(e)?.ok_or_else(|| no_checkpoint(e)))?;
    Ok(())
}

/// The store of `e` holds no intact record of `global` (or of any, for None).
pub(super) fn no_global(e: &Engine, global: Option<u64>) -> Error {
    ReadError::NoGlobal {
        global,
        dir: e.config().dir.display().to_string(),
    }
    .into()
}

/// The store of `e` holds no version (to say so, or to pass over it when asking is all).
pub(super) fn no_checkpoint(e: &Engine) -> Error {
    ReadError::NoCheckpoint {
        dir: e.config().dir.display().to_string(),
    }
    .into()
}
