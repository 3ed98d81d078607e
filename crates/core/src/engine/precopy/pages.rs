//! What pre-copy knows of each region's pages (their write histories and this epoch's
//! conflicts), and the execution context a write is learnt under.

use crate::policy::prwip::PageHistory;
use crate::track::{bitmap, TrackedRegion};
use std::collections::HashMap;

/// The execution context of a page's write (PRWIP keeps a page's history per context):
/// the function holding the instruction that wrote it first in the epoch, where tracking
/// reported one (`TrackedRegion::writer`: mprotect's faults; regions of other backends report
/// none), the instruction itself where the unwind tables do not cover it, the region
/// otherwise. The paper ids the whole call stack (`backtrace()`, not signal-safe); the
/// writing function is what a handler can afford to record, and what tells the phases of a
/// time step apart. Lookups are cached: a program writes from a few hundred instructions.
#[derive(Default)]
pub(super) struct Functions {
    by_ip: HashMap<usize, u64>,
}

/// Instructions whose function is remembered; past that the cache starts again (a program
/// that writes from more places than this gains nothing from the cache anyway).
const FUNCTIONS_CACHED: usize = 4096;

impl Functions {
    pub(super) fn context(&mut self, tr: &TrackedRegion, page: usize) -> u64 {
        let Some(ip) = tr.writer(page) else {
            return tr.id;
        };
        if self.by_ip.len() >= FUNCTIONS_CACHED {
            self.by_ip.clear();
        }
        *self
            .by_ip
            .entry(ip)
            .or_insert_with(|| crate::sys::unwind::enclosing_function(ip).unwrap_or(ip) as u64)
    }
}

/// What pre-copy knows of one region's pages: 16 bytes and 2 bits a page.
pub(super) struct RegionPages {
    /// Each page's history.
    pub(super) history: Vec<PageHistory>,
    /// Written pages a pass has looked at and left written this epoch (one bit a page):
    /// every pass reports them again until the checkpoint takes them.
    pub(super) seen: Vec<u64>,
    /// Pre-copied pages found written again this epoch (one bit a page), so a page counts
    /// once.
    pub(super) conflicted: Vec<u64>,
}

impl RegionPages {
    pub(super) fn new(npages: usize) -> Self {
        RegionPages {
            history: vec![PageHistory::default(); npages],
            seen: vec![0; npages.div_ceil(64)],
            conflicted: vec![0; npages.div_ceil(64)],
        }
    }

    /// A new epoch: nothing seen, no conflict.
    pub(super) fn clear_epoch(&mut self) {
        self.seen.fill(0);
        self.conflicted.fill(0);
    }

    /// Record a conflict on `page`; whether it is the page's first this epoch.
    pub(super) fn conflict(&mut self, page: usize) -> bool {
        let first = !bitmap::is_set(&self.conflicted, page);
        bitmap::set(&mut self.conflicted, page);
        first
    }
}
