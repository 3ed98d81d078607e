//! The process record of `ickpt run` and `ickpt restart`: what a restart of an unmodified
//! program needs besides its memory (mappings, threads, signal actions, descriptors, mm
//! fields), its byte format, its capture from `/proc/self`, and the checks a restart makes
//! before it trusts it.
#![deny(unsafe_code)]

mod decode;
mod encode;
mod error;
pub mod layout;
mod record;

pub use decode::decode;
pub use encode::encode;
pub use error::RecordError;
pub use record::{
    prot, role, FdKind, FdRecord, FileId, MappingKind, MappingRecord, ProcessRecord, SigAction,
    Snapshot, ThreadRecord, MM_FIELDS, SIGNALS,
};
