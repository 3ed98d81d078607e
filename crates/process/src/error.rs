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
