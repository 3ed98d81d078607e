//! The memory ickpt tracks: `ickpt_protect`, `ickpt_unprotect`, `ickpt_malloc`, `ickpt_free`.

use super::*;

/// Track `len` bytes at `ptr` as region `id`. Any alignment: the covering pages are tracked,
/// only the bytes of the range are saved and restored. The memory must stay mapped until
/// `ickpt_unprotect(id)`.
#[no_mangle]
pub extern "C" fn ickpt_protect(id: u64, ptr: *mut c_void, len: usize) -> ickpt_result {
    guard(|| {
        if ptr.is_null() {
            return Err(Error::Null { what: "ptr" });
        }
        // Under `ickpt run` all of the process is stored anyway.
        if whole::active() {
            return Ok(());
        }
        // SAFETY: the C caller promises ptr..ptr+len is its own read-write memory that stays
        // mapped until unprotected (documented in ickpt.h).
        with_engine(&ENGINE, |e| unsafe { e.protect(id, ptr.cast(), len) })
    })
}

/// Stop tracking region `id`; later versions no longer contain it.
#[no_mangle]
pub extern "C" fn ickpt_unprotect(id: u64) -> ickpt_result {
    guard(|| {
        if whole::active() {
            return Ok(());
        }
        with_engine(&ENGINE, |e| e.unprotect(id))
    })
}

/// Allocate `size` zeroed bytes, page-aligned, tracked as region `id`; `*out` receives the
/// pointer. Release with `ickpt_free`.
#[no_mangle]
pub extern "C" fn ickpt_malloc(id: u64, size: usize, out: *mut *mut c_void) -> ickpt_result {
    guard(|| {
        let out = out_ptr(out, "out")?;
        if whole::active() {
            *out = whole::alloc(id, size)?.cast();
            return Ok(());
        }
        let p = with_engine(&ENGINE, |e| e.alloc(id, size))?;
        *out = p.cast();
        Ok(())
    })
}

/// Release memory from `ickpt_malloc`.
#[no_mangle]
pub extern "C" fn ickpt_free(ptr: *mut c_void) -> ickpt_result {
    guard(|| {
        if ptr.is_null() {
            return Err(Error::Null { what: "ptr" });
        }
        if whole::active() {
            return whole::free(ptr.cast());
        }
        with_engine(&ENGINE, |e| e.free(ptr.cast()))
    })
}
