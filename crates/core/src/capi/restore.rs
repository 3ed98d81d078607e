//! Bringing memory back: `ickpt_restore`, `ickpt_restore_latest(_tagged)`,
//! `ickpt_version_tag`, and `ickpt_inject` (a delta file into the protected regions).

use super::*;

/// Fill every protected region from `version`. The protected regions must match the
/// version's regions by id and size.
#[no_mangle]
pub extern "C" fn ickpt_restore(version: u64) -> ickpt_result {
    guard(|| with_engine(&ENGINE, |e| e.restore(version).map(drop)))
}

/// Write the word delta in the file at `path` (what `ickpt merge` writes, or another process
/// saved: CAPE's inject) into the protected regions of its ids. The whole file is read
/// and checked, and every region it names must be protected now with its length, before any
/// byte is written: on an error memory is unchanged. ICKPT_ERR_NOT_FOUND when there is no
/// such file, ICKPT_ERR_CORRUPT when it is not a valid delta, ICKPT_ERR_REGION_MISMATCH when
/// a region is missing or of another length. The words count as written by the application:
/// the next checkpoint stores the pages they changed.
#[no_mangle]
pub extern "C" fn ickpt_inject(path: *const c_char) -> ickpt_result {
    guard(|| {
        let path = c_path("path", path)?.ok_or(Error::Null { what: "path" })?;
        let delta = crate::read::delta_file::read(&path)?;
        with_engine(&ENGINE, |e| e.inject(&delta).map(drop))
    })
}

/// The restart path: restore the newest version that restores completely, newest first,
/// passing over versions whose files or chains fail their checks or whose pages turn out
/// damaged while read. `*version` receives the version restored. ICKPT_ERR_NOT_FOUND when the
/// store holds no version (a first run); ICKPT_ERR_CORRUPT when it holds versions but none
/// restores (the message names the newest one's problem); ICKPT_ERR_REGION_MISMATCH at once
/// when the protected regions differ from the newest version's.
#[no_mangle]
pub extern "C" fn ickpt_restore_latest(version: *mut u64) -> ickpt_result {
    guard(|| {
        whole::nothing_to_restore()?;
        found_version(version, |e| Ok(e.restore_latest()?.map(|i| i.version)))
    })
}

/// `ickpt_restore_latest`, also giving the restored version's tag (0 when it was
/// checkpointed without one, or by an ickpt older than format 5). Neither out-parameter may
/// be NULL.
#[no_mangle]
pub extern "C" fn ickpt_restore_latest_tagged(version: *mut u64, tag: *mut u64) -> ickpt_result {
    guard(|| {
        if tag.is_null() {
            return Err(Error::Null { what: "tag" });
        }
        let version = out_ptr(version, "version")?;
        whole::nothing_to_restore()?;
        let info = with_engine(&ENGINE, |e| {
            e.restore_latest()?.ok_or_else(|| no_checkpoint(e))
        })?;
        *version = info.version;
        // SAFETY: non-NULL (checked above) and, by contract, a writable u64 of the caller's;
        // written through the pointer, so a caller passing one pointer for both is no harm.
        unsafe { tag.write(info.tag) };
        Ok(())
    })
}

/// The tag `version` was checkpointed with (0 when none was given). Reads and checks the
/// version's metadata: ICKPT_ERR_NOT_FOUND for no such version, ICKPT_ERR_CORRUPT for a
/// damaged one.
#[no_mangle]
pub extern "C" fn ickpt_version_tag(version: u64, tag: *mut u64) -> ickpt_result {
    guard(|| {
        let tag = out_ptr(tag, "tag")?;
        *tag = with_engine(&ENGINE, |e| e.version_tag(version))?;
        Ok(())
    })
}
