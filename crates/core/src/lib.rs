//! ickpt: incremental checkpoint/restart of application memory.
//!
//! An application protects memory regions, calls [`Engine::checkpoint`] at safe points, and
//! after a crash calls [`Engine::restore`] on the latest committed version. Only pages written
//! since the previous checkpoint are stored. `docs/design.md` explains the parts.

// Unsafe code is fenced: denied here, allowed in the system-call layer (`sys`), the C API
// (`capi`: raw pointers from C), and, each saying why at its top, the few files that must
// (`Engine::protect`'s caller-vouched range, the fault path's lock-free structures, ickpt's
// own mappings, the copy-on-write pool; `tests/layering.rs` pins the list). Anything new that wants `unsafe` belongs in
// `sys` behind a safe function.
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod capi;
mod config;
mod engine;
mod error;
// Not API: the fuzz targets' bodies. The marker keeps its constants out of ickpt.h.
/// cbindgen:ignore
#[doc(hidden)]
#[cfg(feature = "testing")]
pub mod fuzzing;
pub mod job;
pub mod maintain;
pub mod policy;
pub mod private_file;
pub mod probe;
pub mod read;
pub mod store;
// Not API: public only with the `raw-sys` feature, for ickpt's benchmarks and tests.
#[allow(unsafe_code)]
#[cfg(feature = "raw-sys")]
#[doc(hidden)]
pub mod sys;
// Without the feature, what only the benchmarks and tests call is unused here.
#[allow(unsafe_code)]
#[cfg(not(feature = "raw-sys"))]
#[allow(dead_code)]
mod sys;
pub mod track;
pub mod tracked_io;
pub mod whole_process;
pub mod write;

pub use config::{Compression, Config, SettingError};
pub use engine::{
    frame_encoder, CheckpointInfo, Engine, InjectInfo, OutsideDrain, Phases, PrecopyInfo,
    ReportedWrites, RestoreInfo, SectionSave, SectionStart, Stats, MAX_SECTION_NAME,
};
pub use error::{
    CheckpointError, Error, FileError, ForkedChild, GcError, GlobalError, InitError, InjectError,
    JobError, MaintainError, MergeFilesError, ProtectError, ReadError, RegionError, RestoreError,
    SectionError, VERIFY_HINT,
};
pub use ickpt_format as format;
pub use track::{Backend, Granularity, RangeProblem};
