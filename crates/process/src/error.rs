use thiserror::Error;

/// What is wrong with a process record's bytes, and where: a decode names the field and
/// its offset; an encode refuses a record a decode would refuse.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RecordError {
    #[error("not a process record: bad magic")]
    BadMagic,
    #[error(
        "process record format {found} is newer than this ickpt reads (up to {supported}); \
         upgrade ickpt"
    )]
    NewerFormat { found: u16, supported: u16 },
    #[error("at offset {offset}: {what} needs {need} bytes, the record has {have} left")]
    Truncated {
        offset: u64,
        what: &'static str,
        need: u64,
        have: u64,
    },
    #[error("at offset {offset}: {what} is {value}, above the limit {limit}")]
    OverLimit {
        offset: u64,
        what: &'static str,
        value: u64,
        limit: u64,
    },
    #[error("at offset {offset}: {what}: {why}")]
    Invalid {
        offset: u64,
        what: &'static str,
        why: String,
    },
}

impl RecordError {
    pub(crate) fn invalid(offset: usize, what: &'static str, why: impl Into<String>) -> Self {
        RecordError::Invalid {
            offset: offset as u64,
            what,
            why: why.into(),
        }
    }
}

/// A mapping the default classification cannot give a treatment a restart can carry out.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ClassifyError {
    #[error(
        "mapping {start:#x}-{end:#x} {name:?} is shared memory, which a restart cannot \
         restore yet: the program must not share memory to be checkpointed"
    )]
    Shared { start: u64, end: u64, name: String },
}

/// Why a restart must not go on, naming what differs and what to do about it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CheckError {
    #[error(
        "the checkpoint was taken on kernel {recorded:?}, this is {now:?}: a restart needs the \
         same kernel build, because it moves this kernel's vDSO onto the old one's address; \
         restart on a machine running that kernel"
    )]
    Kernel { recorded: String, now: String },
    #[error(
        "the checkpoint was taken on {recorded} with {recorded_page}-byte pages, this is \
         {now} with {now_page}-byte pages: restart on a machine like the one that took it"
    )]
    Machine {
        recorded: String,
        recorded_page: u32,
        now: String,
        now_page: u32,
    },
    #[error(
        "{path} was rebuilt or updated since the checkpoint ({what}): a restart maps it \
         again and needs the very same file; put that file back, or start the program anew"
    )]
    FileChanged { path: String, what: String },
    #[error(
        "{path}, which the checkpointed process had mapped, cannot be found: {reason}; put \
         it back where it was, or start the program anew"
    )]
    FileMissing { path: String, reason: String },
    #[error("fd {fd} is {target}: {why}")]
    FdRefused {
        fd: i32,
        target: String,
        why: String,
    },
}
