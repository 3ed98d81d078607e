//! Every error ickpt reports, one type per operation: [`InitError`] (opening an engine),
//! [`ProtectError`] (protect, unprotect, alloc, free), [`CheckpointError`] (checkpoint,
//! wait), [`RestoreError`] (restore), [`InjectError`] (inject), [`SectionError`] (program sections), [`ReadError`] (reading versions: restore, verify, the
//! version list), [`GcError`], [`MaintainError`] (prune, rm), [`JobError`] (a coordinated job's directory); the store directory's own is `store::dir::OpenError`. Each
//! names the file, region or version involved and, where there is one, what to do about
//! it. [`Error`] gathers them for the C API, which maps each to a result code in one place
//! (`capi::types::code_of`, documented in `docs/abi.md`).

mod checkpoint;
mod drain;
mod file;
mod gc;
mod global;
mod init;
mod inject;
mod job;
mod maintain;
mod protect;
mod read;
mod region;
mod restore;
mod section;

pub use checkpoint::CheckpointError;
pub use drain::DrainError;
pub use file::FileError;
pub use gc::GcError;
pub use global::GlobalError;
pub use init::InitError;
pub use inject::{InjectError, MergeFilesError};
pub use job::JobError;
pub use maintain::MaintainError;
pub use protect::ProtectError;
pub use read::ReadError;
pub use region::RegionError;
pub use restore::RestoreError;
pub use section::SectionError;

use thiserror::Error;

/// What a corruption message ends with, outside `ickpt verify` (which leaves it off).
pub const VERIFY_HINT: &str = "; run 'ickpt verify' to check the whole store";

/// A call in a child forked from the process that opened the engine, which must not write
/// into its parent's store.
#[derive(Debug, Clone, Copy, Error)]
#[error("this process is a fork of the one that called ickpt_init, whose store it must not write; call ickpt_init here with a directory of its own")]
pub struct ForkedChild;

/// Any error of the C API: an operation's, or one of the API's own.
#[derive(Debug, Error)]
pub enum Error {
    #[error(transparent)]
    Init(#[from] InitError),
    #[error(transparent)]
    Protect(#[from] ProtectError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Restore(#[from] RestoreError),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Global(#[from] GlobalError),
    #[error(transparent)]
    Drain(#[from] DrainError),
    #[error(transparent)]
    Inject(#[from] InjectError),
    #[error(transparent)]
    Section(#[from] SectionError),
    #[error(transparent)]
    Merge(#[from] MergeFilesError),
    #[error(transparent)]
    Job(#[from] JobError),
    /// A configuration field ickpt cannot use.
    #[error(transparent)]
    Setting(#[from] crate::config::SettingError),
    /// A pointer argument the C API needs was NULL.
    #[error("{what} is NULL")]
    Null { what: &'static str },
    #[error("ickpt is not initialised; call ickpt_init first")]
    NotInitialized,
    #[error("ickpt is already initialised; call ickpt_finalize first")]
    AlreadyInitialized,
    /// Under `ickpt run`, which checkpoints the whole process, a call that needs an engine
    /// of the program's own.
    #[error("{call} is not available under ickpt run, which checkpoints the whole process (docs/transparent.md)")]
    WholeProcess { call: &'static str },
    /// Under `ickpt run`, the whole-process checkpoint the program asked for failed.
    #[error("the whole-process checkpoint failed; ickpt run said why on stderr")]
    WholeProcessCheckpoint,
    #[error(transparent)]
    Forked(#[from] ForkedChild),
}
