//! Why memory cannot be tracked as a region: what `protect` and `alloc` refuse, found by the
//! region registry (overlaps) and by the engine (mapping, ickpt's own memory, limits).

use thiserror::Error;

/// Why `protect` or `alloc` refused a range.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RangeProblem {
    #[error("is empty or at address 0: protect needs a non-NULL pointer and a non-zero length")]
    Empty,
    #[error("is not entirely mapped")]
    NotMapped,
    #[error("overlaps protected region {0}")]
    Overlaps(u64),
    #[error("covers ickpt's own tracking memory; protect a smaller range")]
    OwnMemory,
    #[error("covers this thread's alternate signal stack, where ickpt's fault handler runs")]
    SignalStack,
    #[error(
        "cannot be protected: {max} regions are protected already, the most one version can hold"
    )]
    TooManyRegions { max: u64 },
    #[error("cannot be protected: protected memory would span {pages} pages, more than the {max} one version can hold ({gib} GiB of {page_size}-byte pages)")]
    TooManyPages {
        pages: u64,
        max: u64,
        gib: u64,
        page_size: usize,
    },
}
