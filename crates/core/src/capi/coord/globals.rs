//! Global versions of a coordinated job, for the MPI layer: `ickpt_global_*`,
//! `ickpt_drained_global`, `ickpt_discard_newer`.

use super::*;

/// Record durably, in this process's store, that global version `global` of a coordinated
/// job (the MPI layer's numbering, the same on every rank) is this store's `version`, which
/// must be committed with an intact chain. `global` must be above every number recorded so
/// far (ICKPT_ERR_INVALID_ARGUMENT otherwise). The newest two records are kept, and garbage
/// collection keeps what restoring the versions they name reads. `ickpt_mpi_checkpoint` calls this
/// once every rank has committed; a serial program has no need of it.
#[no_mangle]
pub extern "C" fn ickpt_global_commit(global: u64, version: u64) -> ickpt_result {
    guard(|| with_engine(&ENGINE, |e| e.global_commit(global, version)))
}

/// The newest global version recorded in this store (`*global`) and the version holding it
/// (`*version`); records that fail their checks, or whose version file is gone or was
/// replaced, are passed over. ICKPT_ERR_NOT_FOUND when there is none.
#[no_mangle]
pub extern "C" fn ickpt_global_latest(global: *mut u64, version: *mut u64) -> ickpt_result {
    guard(|| {
        if version.is_null() {
            return Err(Error::Null { what: "version" });
        }
        let global = out_ptr(global, "global")?;
        let r = with_engine(&ENGINE, |e| {
            e.global_latest()?.ok_or_else(|| no_global(e, None))
        })?;
        *global = r.global;
        // SAFETY: non-NULL (checked above), a writable u64 of the caller's by contract;
        // written through the pointer, so one pointer passed for both is no harm.
        unsafe { version.write(r.version) };
        Ok(())
    })
}

/// The newest global version not above `bound` recorded intact in this store (`*global`) and
/// the version holding it (`*version`): a restart's agreement walks down with it to the
/// newest global version every rank holds. ICKPT_ERR_NOT_FOUND when there is none.
#[no_mangle]
pub extern "C" fn ickpt_global_at_most(
    bound: u64,
    global: *mut u64,
    version: *mut u64,
) -> ickpt_result {
    guard(|| {
        if version.is_null() {
            return Err(Error::Null { what: "version" });
        }
        let global = out_ptr(global, "global")?;
        let r = with_engine(&ENGINE, |e| {
            e.global_at_most(bound)?.ok_or_else(|| no_global(e, None))
        })?;
        *global = r.global;
        // SAFETY: non-NULL (checked above), a writable u64 of the caller's by contract;
        // written through the pointer, so one pointer passed for both is no harm.
        unsafe { version.write(r.version) };
        Ok(())
    })
}

/// The newest global version whose record is on every tier (the drain copies a version
/// before the records naming it, so what restoring it reads is there too); without lower
/// tiers, the newest recorded. 0 when there is none.
#[no_mangle]
pub extern "C" fn ickpt_drained_global(global: *mut u64) -> ickpt_result {
    guard(|| {
        let global = out_ptr(global, "global")?;
        *global = with_engine(&ENGINE, |e| e.drained_global())?;
        Ok(())
    })
}

/// Keep the records of global version `global` and of every later one, and what restoring
/// their versions reads, on every tier, until another is pinned (0: none: the newest two are
/// kept). The MPI layer pins, before each global commit, the newest global version every rank
/// has on every tier, so a job restarted from lower tiers whose drains lagged differently
/// still finds one global version every rank holds.
#[no_mangle]
pub extern "C" fn ickpt_global_pin(global: u64) -> ickpt_result {
    guard(|| with_engine(&ENGINE, |e| e.global_pin(global)))
}

/// The version holding global version `global` in this store. ICKPT_ERR_NOT_FOUND when no
/// intact record of it is here.
#[no_mangle]
pub extern "C" fn ickpt_global_version(global: u64, version: *mut u64) -> ickpt_result {
    guard(|| {
        let version = out_ptr(version, "version")?;
        let r = with_engine(&ENGINE, |e| {
            e.global_version(global)?
                .ok_or_else(|| no_global(e, Some(global)))
        })?;
        *version = r.version;
        Ok(())
    })
}

/// Delete every version newer than `version` from the store, and first every global record
/// naming one: a restart of a coordinated job discards what not every rank committed, so no
/// later restart can pick it. `version` 0 empties the store of versions. If this process's
/// next checkpoint was to increment a deleted version, it is full instead.
#[no_mangle]
pub extern "C" fn ickpt_discard_newer(version: u64) -> ickpt_result {
    guard(|| with_engine(&ENGINE, |e| e.discard_newer(version).map(drop)))
}
