//! How a page was first written in an epoch (the AI-Ckpt paper, §3.3): what the tracking
//! protocol records for each page and the flush order learns from (`adaptive_priority`).

/// A page's first write in an epoch, as the commit under way saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Access {
    Untouched = 0,
    /// Copied into a copy-on-write slot while scheduled.
    Cow = 1,
    /// Waited for the committer to take it.
    Wait = 2,
    /// Written during the commit, after the committer had taken it.
    Avoided = 3,
    /// Written after the commit finished.
    After = 4,
}
