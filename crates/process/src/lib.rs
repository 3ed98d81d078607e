//! The process record of `ickpt run` and `ickpt restart`: what a restart of an unmodified
//! program needs besides its memory (mappings, threads, signal actions, descriptors, mm
//! fields), its byte format, its capture from `/proc/self`, and the checks a restart makes
//! before it trusts it.
//!
//! The capture runs while every other thread of the process is stopped at an arbitrary
//! point, perhaps inside `malloc`, so it calls nothing in libc that allocates: raw system
//! calls and `std::fs` calls that are one system call each. Rust's own allocations are fine,
//! since the caller's global allocator is private to ickpt. Unsafe code is in `sys` only.
#![deny(unsafe_code)]

pub mod capture;
mod check;
pub mod checkpoint_signal;
mod classify;
mod decode;
mod dir;
mod encode;
mod error;
mod fds;
pub mod layout;
mod maps;
pub mod mpi;
mod record;
#[allow(unsafe_code)]
mod sys;

pub use check::{check_fds, check_files, check_same_kernel};
pub use classify::classify;
pub use decode::{decode, fuzz_target, record_len};
pub use encode::encode;
pub use error::{CheckError, ClassifyError, RecordError};
pub use fds::{list_fds, list_fds_with, parse_fdinfo, FdInfo, FdMemo};
pub use maps::{parse_maps, read_maps, MapsEntry, SPECIAL_NAMES};
pub use record::{
    prot, role, FdKind, FdRecord, FileId, MappingKind, MappingRecord, PosixTimer, ProcessRecord,
    SigAction, Snapshot, ThreadRecord, TimerNotify, ITIMERS, MM_FIELDS, SIGNALS, THREAD_NAME_LEN,
    THREAD_NAME_MAX,
};
