use thiserror::Error;

/// What is wrong with a checkpoint file, and where. The caller adds the file name.
#[derive(Debug, Error, Clone)]
pub enum FormatError {
    #[error("at offset {offset}: {what}")]
    Corrupt { offset: u64, what: String },
    #[error("format version {found} is newer than this ickpt understands (up to {supported}); upgrade ickpt")]
    UnsupportedVersion { found: u16, supported: u16 },
    #[error("read failed at offset {offset}: {source}")]
    Io {
        offset: u64,
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
}

impl FormatError {
    pub(crate) fn corrupt(offset: u64, what: impl Into<String>) -> Self {
        FormatError::Corrupt {
            offset,
            what: what.into(),
        }
    }

    /// The byte offset the error refers to, when it has one.
    pub fn offset(&self) -> Option<u64> {
        match self {
            FormatError::Corrupt { offset, .. } | FormatError::Io { offset, .. } => Some(*offset),
            FormatError::UnsupportedVersion { .. } => Some(8),
        }
    }
}
