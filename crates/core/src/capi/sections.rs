//! Program sections, word deltas, merge and inject from C (CAPE; docs/sections.md).

use super::boundary::{guard, with_engine};
use super::ickpt_result;
use super::{c_path, out_ptr, ENGINE};
use crate::error::{Error, InjectError};
use crate::SectionSave;
use ickpt_format::DeltaFile;
use std::ffi::{c_char, c_void, CStr};

/// What a section save (or take) found and wrote.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ickpt_section_info {
    /// Saves the file holds now (1 for a new name; 0 for a take).
    pub saves: u64,
    /// 4-byte words changed since the previous save or take (or the start).
    pub words: u64,
    /// Pages written since then, compared word by word: what a page-granular checkpoint
    /// would have stored.
    pub pages: u64,
    /// Bytes of this save's own delta.
    pub delta_bytes: u64,
    /// Bytes of the save file after merging (0 for a take).
    pub file_bytes: u64,
}

impl From<SectionSave> for ickpt_section_info {
    fn from(s: SectionSave) -> Self {
        ickpt_section_info {
            saves: s.saves,
            words: s.words,
            pages: s.pages,
            delta_bytes: s.delta_bytes,
            file_bytes: s.file_bytes,
        }
    }
}

/// The delta in the caller's `len` bytes at `p`, decoded and checked; `what` names it in an
/// error.
fn decode_buffer(
    p: *const c_void,
    len: usize,
    what: impl FnOnce() -> String,
) -> Result<DeltaFile, Error> {
    if p.is_null() {
        return Err(Error::Null { what: "delta" });
    }
    // SAFETY: non-NULL and, by contract, `len` readable bytes.
    let bytes = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
    DeltaFile::decode(bytes).map_err(|source| {
        InjectError::Corrupt {
            file: what(),
            source,
        }
        .into()
    })
}

/// Optional out-pointers (NULL: not wanted) are written on success only.
fn put<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: non-NULL and, by contract, a writable T of the caller's.
        unsafe { p.write(v) };
    }
}

/// Start a section (Table I's `start`; ICKPT_SECTION_START). Checkpointing: from here the
/// protected regions' writes are tracked, word by word. Recovering, when the store holds
/// this section's saves from an earlier run (sections are numbered in the order the process
/// starts them): they are injected in order, every file checked first, and `*resume`
/// (optional) receives how many there were, so the program carries on after that many
/// saves. When later sections were saved too, this one only replays: the program skips to
/// ickpt_section_stop (a save returns ICKPT_ERR_SECTION). After the last saved section the
/// run checkpoints again. ICKPT_ERR_SECTION if a section is open.
#[no_mangle]
pub extern "C" fn ickpt_section_start(resume: *mut u64) -> ickpt_result {
    guard(|| {
        let s = with_engine(&ENGINE, |e| e.section_start())?;
        put(resume, s.resume);
        Ok(())
    })
}

/// Whether the open section only replays: its saves came from the store and later sections
/// were saved too, so the program skips to ickpt_section_stop (a save there returns
/// ICKPT_ERR_SECTION). `*replaying` receives 1 or 0. ICKPT_ERR_SECTION outside a section.
#[no_mangle]
pub extern "C" fn ickpt_section_replaying(replaying: *mut i32) -> ickpt_result {
    guard(|| {
        let replaying = out_ptr(replaying, "replaying")?;
        let r = with_engine(&ENGINE, |e| {
            e.section_replaying().ok_or_else(|| {
                crate::error::SectionError::Order(
                    "no section is open: ickpt_section_replaying answers inside one".into(),
                )
            })
        })?;
        *replaying = i32::from(r);
        Ok(())
    })
}

/// Save the words the section changed since its previous save (or its start) under `name`
/// (Table I's `save`; 1 to 64 letters, digits, '_' or '-'), in the store: merged into the
/// file of that name when the section's previous save used it too, a new file otherwise.
/// `info` is optional. On failure nothing saved before is touched and the words stay for the
/// next save. ICKPT_ERR_SECTION outside a section or in one that only replays;
/// ICKPT_ERR_INVALID_ARGUMENT for a name that is not a plain word, that an earlier section
/// saved under, or that this section left for another name.
#[no_mangle]
pub extern "C" fn ickpt_section_save(
    name: *const c_char,
    info: *mut ickpt_section_info,
) -> ickpt_result {
    guard(|| {
        if name.is_null() {
            return Err(Error::Null { what: "name" });
        }
        // SAFETY: non-NULL and, by contract, a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        let s = with_engine(&ENGINE, |e| e.section_save(&name))?;
        put(info, s.into());
        Ok(())
    })
}

/// End the section (Table I's `stop`): regions no checkpoint has stored go back to
/// untracked, so writes until the next start take no fault. ICKPT_ERR_SECTION outside a
/// section.
#[no_mangle]
pub extern "C" fn ickpt_section_stop() -> ickpt_result {
    guard(|| with_engine(&ENGINE, |e| e.section_stop()))
}

/// Remove every section save from the store, so the program's sections run afresh rather
/// than recover. Only before the process's first ickpt_section_start (sections are numbered
/// from there): ICKPT_ERR_SECTION after it.
#[no_mangle]
pub extern "C" fn ickpt_section_reset() -> ickpt_result {
    guard(|| with_engine(&ENGINE, |e| e.section_reset()))
}

/// The words the section changed since its previous save or take (or its start), as a delta
/// of every protected region in memory, not stored: what CAPE's parallel loop sends to the
/// other ranks, which ickpt_inject_delta it. `*delta` receives a buffer of `*len` bytes
/// (the delta file format, docs/FORMAT.md) that the caller frees with ickpt_delta_free;
/// `info` is optional. ICKPT_ERR_SECTION outside a section.
#[no_mangle]
pub extern "C" fn ickpt_section_take(
    delta: *mut *mut c_void,
    len: *mut usize,
    info: *mut ickpt_section_info,
) -> ickpt_result {
    guard(|| {
        let (delta, len) = (out_ptr(delta, "delta")?, out_ptr(len, "len")?);
        let (d, s) = with_engine(&ENGINE, |e| e.section_take())?;
        let bytes: Box<[u8]> = d.encode().into_boxed_slice();
        *len = bytes.len();
        *delta = Box::into_raw(bytes).cast();
        put(info, s.into());
        Ok(())
    })
}

/// Free a buffer ickpt_section_take returned, with the length it gave. NULL is ignored.
#[no_mangle]
pub extern "C" fn ickpt_delta_free(delta: *mut c_void, len: usize) {
    if delta.is_null() {
        return;
    }
    // SAFETY: by contract `delta` and `len` are what ickpt_section_take gave, not freed
    // before: a boxed slice of exactly `len` bytes.
    drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(delta.cast::<u8>(), len)) });
}

/// ickpt_inject for a delta in memory (`len` bytes at `delta`, the delta file format: what
/// ickpt_section_take gave, maybe on another rank). Checked whole before any byte is
/// written: ICKPT_ERR_CORRUPT when it is not a valid delta, ICKPT_ERR_REGION_MISMATCH when a
/// region is missing or of another length.
#[no_mangle]
pub extern "C" fn ickpt_inject_delta(delta: *const c_void, len: usize) -> ickpt_result {
    guard(|| {
        let d = decode_buffer(delta, len, || {
            "the delta given to ickpt_inject_delta".into()
        })?;
        with_engine(&ENGINE, |e| e.inject(&d).map(drop))
    })
}

/// ickpt_inject_delta for `n` deltas at once (`deltas[i]`, `lens[i]` bytes each), injected in
/// order (where two write one word, the later wins); every one is decoded and checked before
/// the first byte is written, so on an error memory is unchanged. What
/// ickpt_mpi_section_exchange does with the ranks' deltas.
#[no_mangle]
pub extern "C" fn ickpt_inject_deltas(
    deltas: *const *const c_void,
    lens: *const usize,
    n: usize,
) -> ickpt_result {
    guard(|| {
        if n > 0 && (deltas.is_null() || lens.is_null()) {
            return Err(Error::Null {
                what: if deltas.is_null() { "deltas" } else { "lens" },
            });
        }
        let mut decoded = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: by contract `n` pointers and `n` lengths.
            let (p, len) = unsafe { (*deltas.add(i), *lens.add(i)) };
            decoded.push(decode_buffer(p, len, || {
                format!("delta {i} given to ickpt_inject_deltas")
            })?);
        }
        with_engine(&ENGINE, |e| e.inject_all(&decoded).map(drop))
    })
}

/// Merge the delta files `a` then `b` into `out` (CAPE's merge; `ickpt merge`): word by
/// word, `b` winning, so injecting `out` equals injecting `a` then `b`. `out` is written
/// whole, owner-only, then renamed into place (it may be `a` or `b`; a symbolic link is
/// refused). Needs no ickpt_init. ICKPT_ERR_REGION_MISMATCH when the two describe different
/// regions; ICKPT_ERR_CORRUPT or ICKPT_ERR_NOT_FOUND for an input.
#[no_mangle]
pub extern "C" fn ickpt_merge(
    a: *const c_char,
    b: *const c_char,
    out: *const c_char,
) -> ickpt_result {
    guard(|| {
        let path = |what, p| c_path(what, p)?.ok_or(Error::Null { what });
        let (a, b, out) = (path("a", a)?, path("b", b)?, path("out", out)?);
        crate::write::merge_files(&a, &b, &out)?;
        Ok(())
    })
}

/// What the ICKPT_SECTION_* macros call: `r` itself when it is ICKPT_OK; otherwise prints
/// "ickpt: <what>: <the error's message>" to stderr and ends the process with status 1, as
/// the paper's monitor stops a process whose directive failed. Call the functions
/// themselves to handle errors instead.
#[no_mangle]
pub extern "C" fn ickpt_require(r: ickpt_result, what: *const c_char) -> ickpt_result {
    if r == ickpt_result::ICKPT_OK {
        return r;
    }
    let what = if what.is_null() {
        "a section directive".into()
    } else {
        // SAFETY: non-NULL and, by contract, a NUL-terminated string (the macros pass a
        // literal).
        unsafe { CStr::from_ptr(what) }.to_string_lossy()
    };
    let msg = super::boundary::last_error_text();
    eprintln!("ickpt: {what}: {msg}");
    std::process::exit(1)
}
