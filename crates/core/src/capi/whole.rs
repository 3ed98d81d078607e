//! The C API in a program that `ickpt run` checkpoints as a whole process: the library it
//! preloads (`libickpt_run.so`) checkpoints everything, so `ickpt_init` opens no engine,
//! protecting is accepted and needs nothing, `ickpt_checkpoint` checkpoints the whole
//! process, `ickpt_restore_latest` finds nothing to restore (a restarted process does not
//! start again: it resumes inside the `ickpt_checkpoint` that took its version), and
//! `ickpt_restarted` says whether that happened.

use super::*;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::OnceLock;

/// The preloaded library's entry points (`crates/run/src/request.rs`).
pub(super) struct RunHooks {
    checkpoint: unsafe extern "C" fn(u64, *mut u64) -> i32,
    restarts: extern "C" fn() -> u32,
}

/// Set by an `ickpt_init` that found the process under `ickpt run`.
static WHOLE: AtomicBool = AtomicBool::new(false);

fn symbol(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks the symbol up.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

/// The preloaded library's hooks, when `ickpt run` checkpoints this process.
fn hooks() -> Option<&'static RunHooks> {
    static HOOKS: OnceLock<Option<RunHooks>> = OnceLock::new();
    HOOKS
        .get_or_init(|| {
            let active = symbol(c"ickpt_run_active");
            let checkpoint = symbol(c"ickpt_run_checkpoint");
            let restarts = symbol(c"ickpt_run_restarts");
            if active.is_null() || checkpoint.is_null() || restarts.is_null() {
                return None;
            }
            // SAFETY: the three symbols are libickpt_run.so's functions of these signatures.
            let (active, checkpoint, restarts) = unsafe {
                (
                    std::mem::transmute::<*mut c_void, extern "C" fn() -> i32>(active),
                    std::mem::transmute::<*mut c_void, unsafe extern "C" fn(u64, *mut u64) -> i32>(
                        checkpoint,
                    ),
                    std::mem::transmute::<*mut c_void, extern "C" fn() -> u32>(restarts),
                )
            };
            (active() == 1).then_some(RunHooks {
                checkpoint,
                restarts,
            })
        })
        .as_ref()
}

/// At `ickpt_init`: whether this process is under `ickpt run` (and from now on in whole-
/// process mode).
pub(super) fn begin() -> bool {
    let under_run = hooks().is_some();
    WHOLE.store(under_run, SeqCst);
    under_run
}

/// At `ickpt_finalize`: whether it ends whole-process mode.
pub(super) fn end() -> bool {
    WHOLE.swap(false, SeqCst)
}

/// Whether the API is in whole-process mode.
pub(super) fn active() -> bool {
    WHOLE.load(SeqCst)
}

/// A whole-process checkpoint carrying `tag`: what the C API reports of it.
pub(super) fn checkpoint(tag: u64) -> Result<ickpt_checkpoint_info, Error> {
    let h = hooks().ok_or(Error::NotInitialized)?;
    let mut version = 0u64;
    // SAFETY: the library's function, with a valid out-pointer.
    if unsafe { (h.checkpoint)(tag, &mut version) } != 0 {
        return Err(Error::WholeProcessCheckpoint);
    }
    let mut info: ickpt_checkpoint_info =
        // SAFETY: a plain struct of integers, valid at zero.
        unsafe { std::mem::zeroed() };
    info.version = version;
    Ok(info)
}

/// Under `ickpt run`, a restore finds no version to restore: the program runs from its start
/// (a restarted one resumes where its version was taken and never gets here again).
pub(super) fn nothing_to_restore() -> Result<(), Error> {
    if active() {
        return Err(ReadError::NoCheckpoint {
            dir: "ickpt run (a whole-process restart resumes inside ickpt_checkpoint instead)"
                .into(),
        }
        .into());
    }
    Ok(())
}

/// `ickpt_malloc` under `ickpt run`: memory of the program's, page-aligned and zeroed, that
/// the whole-process checkpoint stores with the rest.
static ALLOCATED: std::sync::Mutex<Vec<crate::sys::mem::Mapping>> =
    std::sync::Mutex::new(Vec::new());

pub(super) fn alloc(id: u64, size: usize) -> Result<*mut u8, Error> {
    let refused = |why| ProtectError::AllocSize { id, size, why };
    if size == 0 {
        return Err(refused("a size of 0 cannot be protected").into());
    }
    let len = size
        .checked_next_multiple_of(crate::sys::page_size())
        .ok_or_else(|| refused("larger than the address space"))?;
    let m = crate::sys::mem::Mapping::for_application(len).map_err(|source| ProtectError::Map {
        id,
        len,
        source,
    })?;
    let p = m.ptr();
    ALLOCATED.lock().unwrap_or_else(|e| e.into_inner()).push(m);
    Ok(p)
}

pub(super) fn free(ptr: *mut u8) -> Result<(), Error> {
    let mut all = ALLOCATED.lock().unwrap_or_else(|e| e.into_inner());
    let at = all
        .iter()
        .position(|m| m.ptr() == ptr)
        .ok_or(ProtectError::NotAllocated { ptr: ptr as usize })?;
    drop(all.swap_remove(at));
    Ok(())
}

/// How many times `ickpt restart` brought this process back (0 when it never did, or when it
/// does not run under `ickpt run`). A restarted program resumes inside the
/// `ickpt_checkpoint` that took the version it came back from, which returns ICKPT_OK as it
/// did the first time: this count tells the two apart. `restarts` must not be NULL.
#[no_mangle]
pub extern "C" fn ickpt_restarted(restarts: *mut u32) -> ickpt_result {
    guard(|| {
        let out = out_ptr(restarts, "restarts")?;
        *out = hooks().map_or(0, |h| (h.restarts)());
        Ok(())
    })
}
