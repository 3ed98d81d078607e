//! Starting and stopping ickpt in a process: `ickpt_init`, `ickpt_wait_drained`,
//! `ickpt_finalize`.

use super::*;

/// Start ickpt for this process. `cfg` may be NULL for the defaults. The store directory is
/// created if needed (owner-only, 0700); it must be empty or an ickpt store, owned by this
/// user and not writable by group or others, and not a symbolic link.
#[no_mangle]
pub extern "C" fn ickpt_init(cfg: *const ickpt_config) -> ickpt_result {
    guard(|| {
        // Under `ickpt run` the whole process is checkpointed: no engine of its own.
        if whole::begin() {
            return Ok(());
        }
        let mut slot = ENGINE.write();
        match &*slot {
            Some((pid, _)) if *pid == std::process::id() => return Err(Error::AlreadyInitialized),
            Some(_) => {
                // Inherited through fork: the parent owns its store. Stop tracking its
                // regions here without unmapping memory the child may still use.
                if let Some((_, inherited)) = slot.take() {
                    inherited.abandon_after_fork();
                }
            }
            None => {}
        }
        *slot = Some((std::process::id(), Engine::open(asked_config(cfg)?)?));
        Ok(())
    })
}

/// Wait until every version committed so far is durable on the shared tier too
/// (`cfg->shared_dir`), after an async commit still running; ICKPT_OK at once without one.
/// A shared tier that failed (full: ICKPT_ERR_NO_SPACE; unreachable: ICKPT_ERR_IO; another
/// store's: ICKPT_ERR_NOT_A_STORE) fails this call, and ickpt_last_error() names it; the
/// versions stay committed in `dir`, and the drain tries again at the next checkpoint.
#[no_mangle]
pub extern "C" fn ickpt_wait_drained() -> ickpt_result {
    guard(|| with_engine(&ENGINE, |e| e.wait_drained()))
}

/// Stop ickpt: a commit still running is finished, then the drain to the shared tier
/// (`ickpt_wait_drained`), every region is unprotected and memory from `ickpt_malloc` is
/// released. ickpt is finalized even when this returns an error: the error of an async
/// commit that failed and was not reported yet, or of the drain.
#[no_mangle]
pub extern "C" fn ickpt_finalize() -> ickpt_result {
    guard(|| {
        if whole::end() {
            return Ok(());
        }
        let mut slot = ENGINE.write();
        match slot.take() {
            Some((pid, e)) if pid == std::process::id() => {
                // A commit still running is finished first; if it (or an earlier one no
                // call has reported yet) failed, say so, after finalizing all the same.
                let last = e.wait();
                let drained = e.wait_drained();
                drop(e);
                last?;
                drained
            }
            Some(inherited) => {
                std::mem::forget(inherited);
                Err(ForkedChild.into())
            }
            None => Err(Error::NotInitialized),
        }
    })
}
