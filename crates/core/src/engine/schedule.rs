//! Starting a checkpoint (AI-Ckpt Algorithm 1): take the epoch's dirty pages, write-protect
//! every tracked page again, mark the pages to commit SCHEDULED and derive the flush order
//! from how the epoch that just ended wrote them.

use super::commit::{unwritten_since_collect, Job};
use super::{Engine, Phases, State};
use crate::error::CheckpointError;
use crate::policy::{self, Head};
use crate::sys::page_size;
use crate::track::protocol::{
    self,
    committer::{self, Scheduled},
};
use crate::track::{self, bitmap, Guard, TrackedRegion};
use ickpt_format::{
    backend_code, CommitMode, CommitStats, FlushOrder, Kind, RegionEntry, StoredPhases,
};
use std::time::Instant;

/// What scheduling a version gave.
pub(super) enum Schedule {
    /// The commit to launch.
    Ready(Box<Job>),
    /// Another thread wrote between a region's scan and its fence
    /// ([`Guard::FenceWrittenChecked`]): nothing was scheduled, the pages are back in their
    /// regions, and the version is to be scheduled again with fences.
    Raced,
}

impl Engine {
    /// Build the commit job for the next version. The gate is closed throughout, so no
    /// writer sees a page between re-protection and scheduling: the version is memory as
    /// it stood when the gate closed, whatever is written afterwards.
    ///
    /// `fence_all`: keep other threads' writes out of every collected page with a fence
    /// (a sync commit otherwise checks for them after the copy, see [`Guard`]); `attempt`:
    /// how many times this checkpoint has been scheduled, this one included.
    pub(super) fn schedule(
        &self,
        st: &mut State,
        requested: Instant,
        fence_all: bool,
        attempt: u8,
        tag: u64,
    ) -> Result<Schedule, CheckpointError> {
        let version = st.next_version;
        if version > ickpt_format::limits::MAX_VERSION {
            // Numbering follows the highest name in the store, so one stray name near the
            // limit would make every later version a file no reader accepts: say so.
            return Err(CheckpointError::VersionsExhausted {
                version,
                max: ickpt_format::limits::MAX_VERSION,
                dir: self.store.describe(""),
                last: crate::store::version_name(version - 1),
            });
        }
        let kind = self.kind_of(st, version);
        let (parent, depth, parent_meta_crc) = match (kind, st.head) {
            (Kind::Incremental, Some(h)) => (h.version, h.chain_depth + 1, h.meta_crc),
            _ => (0, 0, 0),
        };
        let t = Instant::now();
        let mut regions: Vec<Scheduled> = Vec::with_capacity(st.regions.len());
        let mut entries = Vec::with_capacity(st.regions.len());
        for (id, slot) in &st.regions {
            entries.push(RegionEntry {
                id: *id,
                born: slot.born.unwrap_or(version),
                length: slot.tr.user_len as u64,
                page_offset: slot.tr.page_offset() as u32,
            });
        }

        // A file pre-copy began for this version, if the version can take it over; if not,
        // its pages went back to their regions, for this collect to take.
        let data_offset = ickpt_format::Header::data_offset_for(
            ickpt_format::FORMAT_VERSION,
            entries.len() as u32,
            page_size() as u32,
        );
        let pre = match &mut st.precopy {
            Some(p) => p.take_file(&st.regions, version, kind == Kind::Incremental, data_offset),
            None => None,
        };

        // Everything the gate-closed part stores into is allocated now: a writer held at the
        // gate may hold the allocator's lock (it faulted inside malloc), and this thread
        // must not need that lock to open the gate again.
        let adaptive = self.cfg.flush_order == FlushOrder::Adaptive;
        let mut learnt = Vec::with_capacity(if adaptive {
            st.regions.values().map(|s| s.tr.npages).sum()
        } else {
            0
        });
        let mut bits_of: Vec<Vec<u64>> = st
            .regions
            .values()
            .map(|s| Vec::with_capacity(s.tr.npages.div_ceil(64)))
            .collect();

        let guards: Vec<Guard> = st
            .regions
            .values()
            .map(|s| {
                let whole = kind == Kind::Full || s.born.is_none();
                self.guard_for(&s.tr, fence_all, whole)
            })
            .collect();

        let unseen_are_after = !self.tracker.sees_every_write();
        #[cfg(feature = "testing")]
        let after_collect = crate::track::test_pause::take_after_collect();
        #[cfg(not(feature = "testing"))]
        let after_collect: Option<fn(u64)> = None;
        let gate = self.protocol.close_gate();
        let mut ended_after = self.protocol.begin_commit();
        self.tracker.before_collect();
        let mut total = 0u64;
        // Pages written since the last checkpoint, of all, in the regions a checkpoint armed
        // (what an unarmed one's bits hold depends on the backend): a full version's tells
        // the cost policy what an increment would have stored. Counted for nothing else.
        let counting = kind == Kind::Full && self.cfg.policy == policy::KindPolicy::Cost;
        let (mut written, mut all) = (0u64, 0u64);
        let mut failed = None;
        let each = st.regions.values().zip(bits_of.drain(..)).zip(guards);
        for (ri, ((slot, mut bits), guard)) in each.enumerate() {
            let whole = kind == Kind::Full || slot.born.is_none();
            // A region's writes are tracked once a checkpoint has armed it.
            let armed = slot.born.is_some();
            let tr = &slot.tr;
            let count = counting && armed;
            // Each page's state is final before its region is re-armed, so no write (not even
            // this thread's own, which passes the gate) meets a re-armed page with a stale one.
            let mut mark = |bits: &[u64]| {
                if count {
                    written += bits.iter().map(|w| u64::from(w.count_ones())).sum::<u64>();
                }
                let learnt = adaptive.then_some(&mut learnt);
                let m = protocol::schedule::mark(
                    tr,
                    ri as u32,
                    bits,
                    whole,
                    armed && unseen_are_after,
                    learnt,
                );
                total += m.scheduled;
                // Written after the last commit without a trap: AFTER, order unknown.
                ended_after += m.unseen;
                // Short runs the tracker would rather not fence are copied now (it fences
                // what is left).
                if guard.checked_after_collect() {
                    let free = self.protocol.cow.ahead_free();
                    let longest = self.tracker.copy_ahead_run(tr, bits, free);
                    protocol::schedule::copy_ahead(&self.protocol, tr, bits, longest);
                }
            };
            if let Err(e) = self.tracker.collect(tr, guard, &mut bits, &mut mark) {
                failed = Some((super::region_error(tr, e), tr, bits, guard));
                break;
            }
            if let Some(f) = after_collect {
                f(tr.id);
            }
            if count {
                all += tr.npages as u64;
            }
            regions.push(Scheduled {
                tr: tr.clone(),
                bits,
                whole,
                guard,
            });
        }
        // Other threads ran through the collects unfenced but for the pages collected: if
        // none wrote since, every region still holds what its collect saw, and the version
        // is memory as it stands now. A failed scan counts as a write: the fenced schedule
        // is always right.
        let raced = failed.is_none()
            && !unwritten_since_collect(&regions, &*self.tracker, |g| g.checked_after_collect());
        if failed.is_some() || raced {
            if let Some(f) = &pre {
                f.slots
                    .give_back(|id| st.regions.get(&id).map(|s| s.tr.clone()));
            }
            let (error, failed) = match failed {
                Some((e, tr, bits, guard)) => (Some(e), Some((tr, bits, guard))),
                None => (None, None),
            };
            committer::unschedule(
                &self.protocol,
                st.regions.values().map(|s| &*s.tr),
                &regions,
                failed.as_ref().map(|(tr, bits, _)| (&***tr, &bits[..])),
            );
            drop(gate);
            // After the gate: release may allocate (a writer held there may hold malloc's lock).
            // The failed region too: every collect is followed by a release, so no region is
            // left fenced (each write a signal) until the next checkpoint.
            let collected = regions.iter().map(|r| (&r.tr, r.guard));
            for (r, guard) in collected.chain(failed.iter().map(|(tr, _, g)| (*tr, *g))) {
                self.tracker.release(r, guard);
            }
            return match error {
                Some(e) => Err(e.into()),
                None => Ok(Schedule::Raced),
            };
        }
        drop(gate);

        let priority = match self.cfg.flush_order {
            FlushOrder::Adaptive => policy::adaptive_priority(learnt),
            FlushOrder::Address => Vec::new(),
        };
        st.next_version = version + 1;
        let precopy = st.precopy.as_mut().map(|p| {
            p.end_epoch(&st.regions, pre.as_ref(), |id, page| {
                committer::scheduled(&regions, id)
                    .is_some_and(|i| bitmap::is_set(&regions[i].bits, page))
            })
        });
        st.chain_costs.written_fraction = (all > 0).then(|| written as f64 / all as f64);
        let phases = Phases {
            collect: t.elapsed(),
            ..Phases::default()
        };
        Ok(Schedule::Ready(Box::new(Job {
            version,
            tag,
            kind,
            parent,
            head: Head {
                version,
                chain_depth: depth,
                // Known once the file's trailer is written.
                meta_crc: 0,
            },
            parent_meta_crc,
            store_id: self.id,
            entries,
            regions,
            priority,
            total,
            store: self.store.clone(),
            gc_store: self.local.clone(),
            protocol: self.protocol.clone(),
            tracker: self.tracker.clone(),
            staging: self.staging.clone(),
            encoder: self.encoder.clone(),
            requested,
            phases,
            retention: self.cfg.retention(),
            stats: CommitStats {
                mode: self.cfg.mode,
                flush_order: self.cfg.flush_order,
                backend: backend_code(self.backend().as_str()),
                cow_limit_bytes: self.protocol.cow.bytes_limit(),
                after_previous: ended_after,
                previous_version: st.previous.unwrap_or(0),
                phases: StoredPhases {
                    attempts: attempt,
                    ..StoredPhases::default()
                },
                precopy: precopy.as_ref().map(|p| p.stored()).unwrap_or_default(),
                ..CommitStats::default()
            },
            page_size: page_size(),
            tiers: self.drain.clone(),
            drained_elsewhere: self.cfg.drained_elsewhere,
            pre,
            precopy,
            idle_taken: self.cfg.mode == CommitMode::Async && unseen_are_after,
        })))
    }

    /// How `tr`'s collect keeps other threads' writes out of its pages until the commit has
    /// them. An async commit runs beside the application: a fence. A sync one checks after
    /// the copy instead (any write to the region then means a retry), except where the
    /// commit itself is likely to write, which would make it commit twice: a region on this
    /// thread's stack (the commit's own frames). A region sharing a page with memory outside
    /// it (an unaligned heap buffer, beside the allocator's headers, which the commit's own
    /// allocations write) is checked too: the tracker fences the shared pages alone. An async
    /// commit fences the pages it collected alone, unless it stores the region `whole`
    /// (every page, collected or not): with every other thread stopped, that is all; with
    /// them running, the checkpoint asks afterwards whether any of them wrote between the
    /// scan and the fence, except on this thread's stack (its own frames write there).
    fn guard_for(&self, tr: &TrackedRegion, fence_all: bool, whole: bool) -> Guard {
        let on_stack = || track::on_this_stack((tr.base(), tr.span_end()));
        let narrow = self.cfg.mode == CommitMode::Async && !fence_all && !whole;
        if narrow && self.cfg.others_stopped {
            Guard::FenceWritten
        } else if narrow && !on_stack() {
            Guard::FenceWrittenChecked
        } else if fence_all || self.cfg.mode == CommitMode::Async || on_stack() {
            Guard::Fence
        } else {
            Guard::Check
        }
    }
}

impl Engine {
    /// The kind of the checkpoint of `version`: as `precopy_written` decided it, or else the
    /// policy's, or full where an increment would pass the restart bound.
    pub(crate) fn kind_of(&self, st: &State, version: u64) -> Kind {
        // An increment needs the head it was decided against: a global discard may have
        // dropped it since.
        let decided = st.precopy.as_ref().and_then(|p| p.kind_for(version));
        if let Some(k) = decided.filter(|&k| k == Kind::Full || st.head.is_some()) {
            return k;
        }
        let chosen = match (self.cfg.policy, st.head) {
            (policy::KindPolicy::Cost, Some(h)) => {
                policy::cost_kind(&st.chain_costs, h.chain_depth, self.cfg.restore_weight).0
            }
            _ => policy::next_kind(st.head, self.cfg.full_every),
        };
        self.within_restart_bound(st, chosen, version)
    }

    /// The kind `chosen` by the policy, or full where an increment would pass the restart
    /// bound. The increment's size, when needed: the pages pre-copied for `version` if
    /// pre-copy began its file (the pre-copy thread's), else the pages written as tracking
    /// shows them now, without taking them (the collect does that).
    fn within_restart_bound(&self, st: &State, chosen: Kind, version: u64) -> Kind {
        let ps = page_size() as u64;
        // A stored page's bytes with its share of the metadata (CRC, index).
        let per_page = ps + 16;
        let pages_of = |s: &super::RegionSlot| s.tr.npages as u64;
        let most: u64 = st.regions.values().map(pages_of).sum::<u64>() * per_page;
        policy::bounded_kind(chosen, st.chain_bytes, self.cfg.restart_bound, most, || {
            if let Some(n) = st.precopy.as_ref().and_then(|p| p.pages_for(version)) {
                return n as u64 * per_page;
            }
            let mut bits = Vec::new();
            let written: u64 = st
                .regions
                .values()
                .map(|s| {
                    if s.born.is_none() {
                        return pages_of(s);
                    }
                    match self.tracker.peek_written(&s.tr, &mut bits) {
                        Ok(()) => bits.iter().map(|w| u64::from(w.count_ones())).sum(),
                        // Not known: as if every page were written.
                        Err(_) => pages_of(s),
                    }
                })
                .sum();
            written * per_page
        })
    }
}
