//! The C ABI, one file per C-visible concept (docs/abi.md). Rules: every call returns an
//! `ickpt_result`; pointers are checked for NULL; out-parameters are written only on success;
//! no panic crosses the boundary; the message of the last failure on a thread is available
//! from `ickpt_last_error`.
#![allow(non_camel_case_types)]
// These functions are called from C, where the pointer contracts are documented in ickpt.h;
// marking them `unsafe` would change nothing for C callers.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

mod boundary;
mod engine_lock;

// One group each: cbindgen writes include/ickpt.h in the order of these declarations, which
// rustfmt would otherwise sort.
mod config;

mod init;

mod regions;

mod checkpoint;

mod restore;

mod versions;

mod stats;

mod result;

mod version;

mod io;

mod precopy;

mod sections;

mod whole;

// Not in ickpt.h: include/ickpt_coord.h is generated from this module.
/// cbindgen:ignore
mod coord;

pub use checkpoint::*;
pub use config::*;
pub use coord::*;
pub use init::*;
pub use io::*;
pub use precopy::*;
pub use regions::*;
pub use restore::*;
pub use result::*;
pub use sections::*;
pub use stats::*;
pub use version::*;
pub use versions::*;

use crate::config::{Config, SettingError};
use crate::engine::{CheckpointInfo, Engine, Stats};
use crate::error::{
    CheckpointError, DrainError, Error, FileError, ForkedChild, GcError, GlobalError, InitError,
    InjectError, JobError, MergeFilesError, ProtectError, ReadError, RegionError, RestoreError,
    SectionError,
};
use crate::store::dir::OpenError;
use crate::track::{Backend, Granularity, RangeProblem, TrackError};
use boundary::{guard, with_engine};
use engine_lock::EngineLock;
use ickpt_format::{CommitMode, FlushOrder, Kind};
use std::ffi::{c_char, c_void, CStr};

/// The process's engine, with the pid of the process that created it: a child forked after
/// `ickpt_init` inherits this memory but must not write into its parent's store.
static ENGINE: EngineLock<Option<(u32, Engine)>> = EngineLock::new(None);

/// Write `v` into a caller's struct of `size` bytes at `out` (ABI rule 7): the bytes both
/// have, then zeros for fields a newer header has past this library's.
///
/// # Safety
/// `out` points to `size` writable bytes.
pub(super) unsafe fn write_sized<T: Copy>(v: &T, out: *mut T, size: usize) {
    let known = std::mem::size_of::<T>();
    let bytes = out.cast::<u8>();
    // SAFETY: the copy stays within both `v` and the caller's `size` bytes, and the zeroed
    // tail within the latter.
    unsafe {
        std::ptr::copy_nonoverlapping((v as *const T).cast::<u8>(), bytes, size.min(known));
        if size > known {
            std::ptr::write_bytes(bytes.add(known), 0, size - known);
        }
    }
}

fn out_ptr<'a, T>(p: *mut T, name: &'static str) -> Result<&'a mut T, Error> {
    if p.is_null() {
        return Err(Error::Null { what: name });
    }
    // SAFETY: non-NULL; by the API contract it points to a writable T owned by the caller
    // for the duration of the call.
    Ok(unsafe { &mut *p })
}
