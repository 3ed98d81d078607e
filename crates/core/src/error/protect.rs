//! `protect`, `unprotect`, `alloc` and `free`: the memory asked for, and the region it
//! would become, are named in every message.

use super::{ForkedChild, RegionError};
use crate::track::RangeProblem;
use std::io;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ProtectError {
    /// `protect` or `alloc` refused the memory asked for.
    #[error("region {id}: memory at {start:#x}+{len} {problem}")]
    BadRange {
        id: u64,
        start: usize,
        len: usize,
        problem: RangeProblem,
    },
    #[error("allocation of {size} bytes for region {id}: {why}")]
    AllocSize {
        id: u64,
        size: usize,
        why: &'static str,
    },
    #[error("allocation of {len} bytes for region {id}: mmap failed: {source}")]
    Map {
        id: u64,
        len: usize,
        #[source]
        source: io::Error,
    },
    #[error("freeing region {id} at {ptr:#x}: munmap failed: {source}")]
    Unmap {
        id: u64,
        ptr: usize,
        #[source]
        source: io::Error,
    },
    #[error("{ptr:#x} was not returned by ickpt_malloc (or was freed already)")]
    NotAllocated { ptr: usize },
    #[error("region {0} is not protected")]
    UnknownRegion(u64),
    #[error("region {0} is already protected; unprotect it first")]
    RegionExists(u64),
    #[error(transparent)]
    Region(#[from] RegionError),
    #[error(transparent)]
    Forked(#[from] ForkedChild),
}
