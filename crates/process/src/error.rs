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
