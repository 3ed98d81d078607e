//! AI-Ckpt Algorithm 1's part in the page protocol: marking a region's pages for the commit
//! being scheduled, and handing how the ending epoch first wrote them to the flush-order
//! learning. The engine calls this with the gate closed, between taking the region's dirty
//! bits and re-arming it, so no write meets a re-armed page whose state is stale.

use super::Protocol;
use crate::policy::Access;
use crate::track::memory::bitmap;
use crate::track::region::TrackedRegion;

/// How a page was first written in the ending epoch, as (access, order, (region index,
/// page)): what the adaptive flush order learns from.
pub(crate) type Learnt = (Access, u32, (u32, usize));

/// What marking a region found.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Marked {
    /// Pages the commit stores.
    pub scheduled: u64,
    /// Written pages no trap saw (see `count_unseen`): first written after the last commit.
    pub unseen: u64,
}

/// Mark region `tr`'s pages (region index `ri` in the commit): scheduled when `whole` or
/// written (set in `bits`), left out otherwise. Every page's first-write record is taken,
/// so every record starts the next epoch clear; with `learnt`, the scheduled pages' records
/// go there. `count_unseen`: the tracker does not see every first write, so a written page
/// with no record was written after the last commit without a trap.
///
/// Only the pages written, and those that may hold a record or a state other than Idle
/// (`PageStates::take_touched`), are visited: the others are left out already, with no
/// record to take, so the cost follows the pages written, not the region's size.
pub(crate) fn mark(
    tr: &TrackedRegion,
    ri: u32,
    bits: &[u64],
    whole: bool,
    count_unseen: bool,
    mut learnt: Option<&mut Vec<Learnt>>,
) -> Marked {
    let mut m = Marked::default();
    // Every piece is monitored again from the next epoch on.
    tr.acck.reset();
    let mut one = |page: usize| {
        let (access, order) = tr.pages.take_access(page);
        let written = bitmap::is_set(bits, page);
        if written && count_unseen && access == Access::Untouched {
            m.unseen += 1;
        }
        if whole || written {
            tr.pages.schedule(page);
            m.scheduled += 1;
            if let Some(l) = learnt.as_deref_mut() {
                l.push((access, order, (ri, page)));
            }
        } else {
            // Taken by the last commit, not written since: no longer a neighbour worth
            // opening with a faulting one.
            tr.pages.leave_out(page);
        }
    };
    for w in 0..tr.npages.div_ceil(64) {
        let n = (tr.npages - w * 64).min(64);
        let in_region = if n == 64 { u64::MAX } else { (1 << n) - 1 };
        let touched = tr.pages.take_touched(w);
        let mut visit = if whole {
            in_region
        } else {
            (bits.get(w).copied().unwrap_or(0) | touched) & in_region
        };
        while visit != 0 {
            one(w * 64 + visit.trailing_zeros() as usize);
            visit &= visit - 1;
        }
    }
    m
}

/// Copy `tr`'s scheduled pages in runs of `bits` no longer than `longest` into
/// copy-on-write slots now, while slots are free: the commit takes them from there (as it
/// takes a first write's copy), so they need no fence, and a write to them goes on at once.
/// For a call whose other threads run on, which asks afterwards whether any of them wrote
/// since the scan: a write before a page's copy would otherwise reach the version. Returns
/// the pages copied.
pub(crate) fn copy_ahead(p: &Protocol, tr: &TrackedRegion, bits: &[u64], longest: usize) -> u64 {
    let mut copied = 0;
    for run in bitmap::runs(bits, tr.npages).filter(|r| r.len() <= longest) {
        for page in run {
            let Some(slot) = p.cow.claim_ahead() else {
                return copied;
            };
            copied += u64::from(p.copy_into(tr, page, slot, None));
        }
    }
    copied
}

/// Room for copies ahead of a commit, beside a copy-on-write buffer of `cow_bytes` for
/// writers: sixteen times the buffer, at most 1 GiB. Copies ahead are made by the call
/// alone, for pages it would otherwise fence, and are given back after each commit; so they
/// never take the writers' slots, and the room can be a share of the memory tracked rather
/// than a buffer held for good (16 MiB: 256 MiB, a 1% rewrite of 25 GiB tracked).
pub(crate) fn ahead_bytes(cow_bytes: usize) -> usize {
    cow_bytes.saturating_mul(16).min(1 << 30)
}
