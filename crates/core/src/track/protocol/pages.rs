//! Per-page state of one region for the commit protocol (AI-Ckpt Algorithms 1–3), and how
//! each page was first written in the current epoch (for the next flush order).
//! Both live in ickpt's own mappings: the fault handler updates them.

use crate::track::memory::own_mem::OwnSlice;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering::SeqCst};

/// Where a page stands in the commit protocol.
pub(crate) mod state {
    /// Not part of the running commit (nor of the last one).
    pub(crate) const IDLE: u8 = 0;
    /// In the running commit, still only in application memory.
    pub(crate) const SCHEDULED: u8 = 1;
    /// The committer is copying it out of application memory (PAGE_INPROGRESS).
    pub(crate) const FLUSHING: u8 = 2;
    /// A faulting writer is copying it into a copy-on-write slot.
    pub(crate) const COPYING: u8 = 3;
    /// Its bytes are in a copy-on-write slot the committer has not taken yet.
    pub(crate) const COPIED: u8 = 4;
    /// Taken by the running or last commit (PAGE_PROCESSED): it was written last epoch.
    pub(crate) const TAKEN: u8 = 5;
}

/// How a page was first written in an epoch (paper 000 §3.3).
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

impl Access {
    fn from_code(c: u32) -> Access {
        match c {
            1 => Access::Cow,
            2 => Access::Wait,
            3 => Access::Avoided,
            4 => Access::After,
            _ => Access::Untouched,
        }
    }
}

/// Access word: order of the first write in the epoch above the low 3 bits, access type below.
const TYPE_BITS: u32 = 3;
const MAX_ORDER: u64 = (u32::MAX >> TYPE_BITS) as u64;

pub struct PageStates {
    state: OwnSlice<AtomicU8>,
    access: OwnSlice<AtomicU32>,
}

impl PageStates {
    pub fn new(npages: usize) -> io::Result<Self> {
        Ok(PageStates {
            state: OwnSlice::new(npages)?,
            access: OwnSlice::new(npages)?,
        })
    }

    /// Signal-safe.
    #[inline]
    pub fn state(&self, page: usize) -> &AtomicU8 {
        &self.state[page]
    }

    /// Record the epoch's first write to `page`, `order`-th first write of the epoch.
    /// Later writers of the same page leave the first record alone. Signal-safe.
    pub fn record(&self, page: usize, access: Access, order: u64) -> bool {
        let word = ((order.min(MAX_ORDER) as u32) << TYPE_BITS) | access as u32;
        self.access[page]
            .compare_exchange(0, word, SeqCst, SeqCst)
            .is_ok()
    }

    /// The epoch's record for `page` (type, order), cleared for the next epoch.
    pub fn take_access(&self, page: usize) -> (Access, u32) {
        let a = &self.access[page];
        if a.load(SeqCst) == 0 {
            return (Access::Untouched, 0);
        }
        let w = a.swap(0, SeqCst);
        (
            Access::from_code(w & ((1 << TYPE_BITS) - 1)),
            w >> TYPE_BITS,
        )
    }

    pub fn spans(&self) -> [(usize, usize); 2] {
        [self.state.span(), self.access.span()]
    }
}
