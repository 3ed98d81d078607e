//! Committing a scheduled version (AI-Ckpt Algorithms 3 and 4): take each scheduled page
//! once, in the order the protocol's `Selector` gives, either from its copy-on-write slot or
//! from (still read-only) application memory, and append it to the version's log. Runs on a
//! committer thread (async) or on the caller (sync); the fault path competes for the same
//! pages through the protocol (`track/protocol`).

use super::drain::TierDrain;
use super::precopy::{PreFile, PrecopyInfo};
use super::sink::Sink;
use super::{gc, CheckpointInfo, Phases};
use crate::error::CheckpointError;
use crate::policy::{Head, Retention};
use crate::read::catalog::Catalog;
use crate::store::{version_name, Store, StoreId};
use crate::sys::thread;
use crate::track::protocol::committer::{
    self, scheduled, Drain, LiftBehind, Scheduled, Selector, Take,
};
use crate::track::{Guard, OwnBytes, Protocol, Tracker};
use ickpt_format::{CommitStats, Kind, NewVersion, RegionEntry, StoredPhases, VersionLayout};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Everything a commit needs, moved to the thread that runs it.
pub(crate) struct Job {
    pub version: u64,
    /// The application's value for the version (`Engine::checkpoint_tagged`).
    pub tag: u64,
    pub kind: Kind,
    pub parent: u64,
    /// The parent file's `meta_crc` (0 for a full version), recorded to bind the chain.
    pub parent_meta_crc: u32,
    pub store_id: StoreId,
    pub head: Head,
    pub entries: Vec<RegionEntry>,
    /// Sorted by region id, as `entries`.
    pub regions: Vec<Scheduled>,
    /// Pages the adaptive order takes before the rest, as (region index, page).
    pub priority: Vec<(u32, usize)>,
    /// Pages scheduled.
    pub total: u64,
    pub store: Arc<dyn Store>,
    /// The first tier, which the collection after a full version cleans (lower tiers are the
    /// drain's to clean).
    pub gc_store: Arc<dyn Store>,
    pub protocol: Arc<Protocol>,
    /// Told when the commit no longer needs its regions' writes decided page by page.
    pub tracker: Arc<dyn Tracker>,
    pub staging: Arc<Mutex<OwnBytes>>,
    pub encoder: Arc<Mutex<ickpt_format::FrameEncoder>>,
    pub requested: Instant,
    pub phases: Phases,
    pub retention: Retention,
    pub stats: CommitStats,
    pub page_size: usize,
    /// Told of the version once committed; None without lower tiers.
    pub tiers: Option<Arc<TierDrain>>,
    /// `Config::drained_elsewhere`: an outside drain's mark bounds the collection too.
    pub drained_elsewhere: bool,
    /// The file pre-copy began for this version (PRWIP), which the commit goes on
    /// writing; None: the commit creates it.
    pub pre: Option<PreFile>,
    /// What pre-copy did for the version.
    pub precopy: Option<PrecopyInfo>,
    /// Return the pages taken to Idle once the commit ends (`committer::idle_taken`): an
    /// async commit, on a tracker none of whose writes reach ickpt between commits.
    pub idle_taken: bool,
}

/// What a finished commit hands back to the engine.
pub(crate) struct Outcome {
    pub result: Result<CheckpointInfo, CheckpointError>,
    pub head: Head,
    pub ids: Vec<u64>,
    /// A write reached a page collected under `Guard::Check` before the check: nothing was
    /// committed (`result` is `CommitAborted`) and the checkpoint is to be taken again
    /// with fences.
    pub raced: bool,
}

/// Run a commit to the end. Every scheduled page is released whatever happens (an I/O error
/// stops the writing, not the draining), so no writer is left waiting.
pub(super) fn run(job: Job) -> Outcome {
    let Job {
        version,
        tag,
        kind,
        parent,
        parent_meta_crc,
        store_id,
        mut head,
        entries,
        regions,
        priority,
        total,
        store,
        gc_store,
        protocol,
        tracker,
        staging,
        encoder,
        requested,
        mut phases,
        retention,
        mut stats,
        page_size: ps,
        tiers,
        drained_elsewhere,
        pre,
        precopy,
        idle_taken,
    } = job;
    let drain = Drain::new(&regions, &protocol, &*tracker);
    let ids: Vec<u64> = regions.iter().map(|r| r.tr.id).collect();
    let name = version_name(version);
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut layout = VersionLayout::new(
        NewVersion {
            kind,
            page_size: ps as u32,
            version,
            parent,
            chain_depth: head.chain_depth,
            parent_meta_crc,
            store_id: store_id.0,
            created_unix_ns: created,
            tag,
        },
        entries,
    );
    // No allocation while pages are being taken (a waiting writer may hold malloc's lock).
    layout.reserve(total as usize + pre.as_ref().map_or(0, |f| f.pages()));
    // A pre-copied version's first pages are in its file already: they come first in the
    // layout, and a page the commit stores again goes over its slot.
    let index_of = |id: u64| scheduled(&regions, id).map_or(u32::MAX, |i| i as u32);
    let resumed = pre.map(|f| {
        let file = f.file.clone();
        let (w, end, slots) = f.into_commit(&mut layout, index_of);
        (w, file, end, slots)
    });
    let mut page_buf = if resumed.is_some() {
        vec![0u8; ps]
    } else {
        Vec::new()
    };
    // Before any store I/O, which may block: chunks with nothing to take open now.
    let mut lift = LiftBehind::start(&regions, &protocol, &*tracker);
    // One commit runs at a time; a commit that panicked left nothing to mend in it.
    let mut staging = staging.lock().unwrap_or_else(|e| e.into_inner());
    let staging = staging.as_mut_slice();
    let mut encoder = encoder.lock().unwrap_or_else(|e| e.into_inner());
    let (resumed, slots) = match resumed {
        Some((w, file, end, slots)) => (Some((w, file, end)), Some(slots)),
        None => (None, None),
    };
    let (result, raced) = {
        // Dropped in here, also when this unwinds: every scheduled page is released.
        let mut drain = drain;
        let prefix = layout.prefix();
        // The prefix first, on this thread: a commit held at its first write (tests) has
        // then taken no page yet.
        let (writer, file, written) = match resumed {
            Some((w, file, end)) => (Ok(w), file, end),
            None => (store.create(&name), store.describe(&name), 0),
        };
        let mut sink = Sink::start(writer, file, written, staging, &mut encoder, ps);
        if slots.is_none() {
            sink.write(&prefix);
        }
        // The prefix's write came before the copying began.
        let wait_before = sink.write_time;
        let started = Instant::now();
        let mut sel = Selector::new(&regions, priority);
        let mut done = 0u64;
        while done < total {
            // Pass a full batch on before claiming the next page: a page claimed first would
            // stay FLUSHING, and a writer wanting it would wait, for the whole write.
            sink.make_room(&mut layout);
            let Some(take) = sel.next(&protocol) else {
                // Only pages a writer is still copying into a slot are left: a memcpy away.
                thread::yield_now();
                continue;
            };
            // The page is released (TAKEN) as soon as its bytes are copied, before its CRC
            // (taken with its batch): a writer waiting for it then waits for a memcpy only,
            // and never across anything that could take a lock.
            let (ri, page) = take.page();
            if let Some(slot) = slots.as_ref().and_then(|s| s.of(regions[ri].tr.id, page)) {
                // Pre-copied, and written since: its slot gets the page as it is now.
                match take {
                    Take::Memory(..) => regions[ri].tr.copy_page_out(page, &mut page_buf),
                    Take::Slot(cow, ..) => {
                        page_buf.copy_from_slice(protocol.cow.bytes(cow));
                        protocol.cow.free(cow);
                    }
                }
                protocol.taken(&regions[ri].tr, page);
                lift.taken(ri, page);
                let crc = ickpt_format::crc(&page_buf);
                layout.set_page_crc(slot, crc);
                let at = slots.as_ref().map_or(0, |s| s.offset(slot, ps));
                sink.overwrite(at, &page_buf);
                done += 1;
                continue;
            }
            let (ri, page) = match take {
                Take::Memory(ri, page) => {
                    if let Some(dst) = sink.slot() {
                        // The region stays tracked (mapped, readable) until the commit
                        // settles; the page is Flushing, so no writer can open it before we
                        // are done.
                        regions[ri].tr.copy_page_out(page, dst);
                    }
                    (ri, page)
                }
                Take::Slot(slot, ri, page) => {
                    if let Some(dst) = sink.slot() {
                        dst.copy_from_slice(protocol.cow.bytes(slot));
                    }
                    protocol.cow.free(slot);
                    (ri, page)
                }
            };
            protocol.taken(&regions[ri].tr, page);
            lift.taken(ri, page);
            sink.seal(ri, page);
            done += 1;
        }
        let t = Instant::now();
        let (counts, peak) = drain.end_commit();
        let raced =
            !sink.failed() && !unwritten_since_collect(&regions, &*tracker, |g| *g == Guard::Check);
        if raced {
            sink.abort(CheckpointError::CommitAborted { version });
        }
        phases.release = t.elapsed();
        sink.flush(&mut layout);
        let raced = raced && sink.aborted();
        phases.crc = sink.crc_time;
        phases.copy = started
            .elapsed()
            .saturating_sub(sink.write_time - wait_before)
            .saturating_sub(sink.crc_time)
            .saturating_sub(phases.release);

        stats.commit_ns = requested.elapsed().as_nanos() as u64;
        stats.wait_ns = counts.wait_ns;
        stats.cow_pages = counts.cow;
        stats.wait_pages = counts.wait;
        stats.avoided_pages = counts.avoided;
        stats.peak_cow_bytes = peak;
        stats.phases = StoredPhases {
            collect_ns: phases.collect.as_nanos() as u64,
            copy_ns: phases.copy.as_nanos() as u64,
            crc_ns: phases.crc.as_nanos() as u64,
            release_ns: phases.release.as_nanos() as u64,
            // The trailer's own write is not in it: the file records what came before it.
            write_ns: sink.write_time.as_nanos() as u64,
            attempts: stats.phases.attempts,
        };
        layout.set_stats(stats);
        let trailer = layout.trailer();
        head.meta_crc = VersionLayout::meta_crc_of_trailer(&trailer);
        sink.write(&trailer);
        if slots.is_some() {
            // The header and region table, left as zeros by the pre-copy.
            sink.overwrite(0, &prefix);
        }
        if protocol.poisoned() && !sink.failed() {
            sink.abort(CheckpointError::CommitAborted { version });
        }
        phases.write = sink.write_time;
        let result = sink.commit(&mut phases.commit).map(|bytes| {
            // Limits by count or age move with every version; the chain limit only with a
            // full one. A failure leaves extra old versions, never a broken one.
            if kind == Kind::Full || retention.per_version() {
                let t = Instant::now();
                let _ = gc::collect(
                    &Catalog::with_identity(&*gc_store, Some(store_id)),
                    &retention,
                    Some(version),
                    super::outside_drain::undrained_after(
                        tiers.as_deref(),
                        drained_elsewhere,
                        &*gc_store,
                    ),
                );
                phases.gc = t.elapsed();
            }
            CheckpointInfo {
                version,
                tag,
                kind,
                parent,
                pages: layout.page_count(),
                bytes,
                duration: requested.elapsed(),
                phases: phases.clone(),
                commit: stats,
                precopy: precopy.clone(),
            }
        });
        if result.is_err() {
            // The version did not commit: the pre-copied pages go back with the rest.
            if let Some(s) = &slots {
                s.give_back(|id| scheduled(&regions, id).map(|i| regions[i].tr.clone()));
            }
        }
        if result.is_ok() {
            drain.committed();
            if let Some(t) = &tiers {
                t.committed();
            }
        }
        (result, raced)
    };
    if idle_taken {
        committer::idle_taken(&regions);
    }
    Outcome {
        result,
        head,
        ids,
        raced,
    }
}

/// Whether no page of a region collected under a guard `checked` picks was written since
/// its collect (a failed scan counts as written: the fenced retry is always right).
pub(super) fn unwritten_since_collect(
    regions: &[Scheduled],
    tracker: &dyn Tracker,
    checked: fn(&Guard) -> bool,
) -> bool {
    regions
        .iter()
        .filter(|r| checked(&r.guard))
        .all(|r| tracker.unwritten_since_collect(&r.tr).unwrap_or(false))
}
