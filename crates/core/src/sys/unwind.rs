//! Which function an instruction belongs to, from the unwind tables every x86-64 and
//! AArch64 object carries (`.eh_frame`), so it works for static functions of a stripped
//! program, where symbol tables would not. Pre-copy's execution context (PRWIP) is the
//! function that wrote a page; the mprotect handler records the faulting instruction and the
//! pre-copier, outside the handler, asks here.

use std::sync::OnceLock;

type FindEnclosing = unsafe extern "C" fn(*mut libc::c_void) -> *mut libc::c_void;

/// libgcc's `_Unwind_FindEnclosingFunction`, looked up once: a program linked without
/// libgcc_s (a static C program, another unwinder) has none, and the caller then goes by
/// the instruction itself.
fn find_enclosing() -> Option<FindEnclosing> {
    static F: OnceLock<Option<FindEnclosing>> = OnceLock::new();
    *F.get_or_init(|| {
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name has no preconditions.
        let p = unsafe {
            libc::dlsym(
                libc::RTLD_DEFAULT,
                c"_Unwind_FindEnclosingFunction".as_ptr(),
            )
        };
        // SAFETY: a non-null result is libgcc's function of this signature.
        (!p.is_null())
            .then(|| unsafe { std::mem::transmute::<*mut libc::c_void, FindEnclosing>(p) })
    })
}

/// The first instruction of the function holding the instruction at `ip`, if the unwind
/// tables know it. Not signal-safe: libgcc walks the loaded objects with `dl_iterate_phdr`,
/// under glibc's `dl_load_write_lock`. The pre-copier calls it holding the engine lock, which
/// cannot deadlock with a checkpoint called from a `dlopen` constructor: `dlopen` holds that
/// lock only while it links the new object into the list, not while constructors run (they
/// run under `dl_load_lock`, which `dl_iterate_phdr` does not take).
pub fn enclosing_function(ip: usize) -> Option<usize> {
    if ip == 0 {
        return None;
    }
    let f = find_enclosing()?;
    // libgcc looks up `pc - 1`, taking `pc` for a return address; `ip` is the instruction
    // itself (which may be its function's first), so ask for the byte after it.
    // SAFETY: the function only reads the loaded objects' unwind tables for this address;
    // an address no object covers gives NULL.
    let start = unsafe { f((ip + 1) as *mut libc::c_void) };
    (!start.is_null()).then_some(start as usize)
}
