//! Pre-copy (PRWIP): pages written out between checkpoints, written again when
//! the application rewrites them (conflicts), and a version that still restores to memory
//! exactly as it was at its checkpoint call, for every strategy, sync and async, with a
//! store that fails under the pre-copier or under the commit that takes its file over, and
//! with checkpoints far earlier or later than the interval given. Run on every backend
//! (scripts/each-backend.sh).

use crate::common;
use common::hook_store::gated_store;
use common::{noise, scratch_dir, spin_until, Buf};
use ickpt::format::{CommitMode, FlushOrder, Kind};
use ickpt::policy::prwip::Strategy;
use ickpt::store::{DirStore, Fault, FaultPlan, FaultyStore, Store};
use ickpt::track::Backend;
use ickpt::{Config, Engine};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const PS: usize = 4096;
const PAGES: usize = 16;
const STRATEGIES: [Strategy; 3] = [Strategy::Blind, Strategy::Prwip, Strategy::PrwipOpt];

fn config(dir: &Path, strategy: Strategy, thread: bool) -> Config {
    let mut c = Config::new(dir);
    c.precopy = strategy;
    c.checkpoint_interval = Some(Duration::from_secs(10));
    c.precopy_thread = thread;
    // Incremental versions throughout, unless a test asks otherwise.
    c.full_every = 1000;
    c
}

/// Memory as the test last wrote it, per version.
type Snapshots = Vec<(u64, Vec<u8>)>;

/// Every version in `snaps` restores, in a fresh engine over `dir`, to its snapshot.
fn restores_as_written(dir: &Path, len: usize, snaps: &Snapshots) {
    let e = Engine::open(Config::new(dir)).unwrap();
    let buf = Buf::new(len);
    // SAFETY: the buffer outlives the engine (dropped first below).
    unsafe { e.protect(1, buf.ptr, len).unwrap() };
    for (v, want) in snaps {
        e.restore(*v).unwrap();
        let got = buf.slice();
        if let Some(i) = (0..len).find(|&i| got[i] != want[i]) {
            panic!("version {v}: byte {i} (page {}) differs", i / PS);
        }
    }
    drop(e);
}

fn fill(buf: &mut Buf, pages: impl IntoIterator<Item = usize>, v: u8) {
    for p in pages {
        buf.slice_mut()[p * PS..(p + 1) * PS].fill(v);
    }
}

#[test]
fn a_pass_precopies_and_a_rewrite_is_a_conflict_copied_again() {
    for strategy in STRATEGIES {
        let dir = scratch_dir("precopy-conflict");
        let e = Engine::open(config(&dir, strategy, false)).unwrap();
        let mut buf = Buf::new(PAGES * PS);
        noise(buf.slice_mut(), 1);
        // SAFETY: the buffer outlives the engine.
        unsafe { e.protect(1, buf.ptr, PAGES * PS).unwrap() };
        let mut snaps = Snapshots::new();
        let v1 = e.checkpoint().unwrap();
        snaps.push((v1.version, buf.slice().to_vec()));
        assert!(v1.precopy.as_ref().is_some_and(|p| p.pages == 0));

        fill(&mut buf, 0..8, 1);
        assert!(e.precopy_pass());
        // Written again after their pre-copy: conflicts; page 10 is new.
        fill(&mut buf, [2, 3], 2);
        fill(&mut buf, [10], 3);
        assert!(e.precopy_pass());
        // Page 3 once more, after the pass: the checkpoint copies it again.
        fill(&mut buf, [3], 4);
        let v2 = e.checkpoint().unwrap();
        snaps.push((v2.version, buf.slice().to_vec()));
        assert_eq!(v2.kind, Kind::Incremental);
        let p = v2.precopy.clone().unwrap();
        assert_eq!(p.strategy, Some(strategy));
        assert_eq!(p.pages, 9, "{strategy:?}: pages 0-7 and 10 were pre-copied");
        assert_eq!(p.conflicts, 2, "{strategy:?}: pages 2 and 3, each once");
        assert_eq!(v2.pages, 9, "{strategy:?}: each page once in the version");
        assert_eq!(p.passes, 2);
        // Blind copies pages 2 and 3 again at the second pass, PRWIP leaves them to the
        // checkpoint (their interval is now known to be short); page 3 again at the commit.
        let twice = match strategy {
            Strategy::Blind => 3,
            _ => 2,
        };
        assert_eq!(p.rewritten_bytes, twice * PS as u64, "{strategy:?}");

        // A second epoch, over pages pre-copied before, and a checkpoint with no pass.
        fill(&mut buf, 4..12, 5);
        assert!(e.precopy_pass());
        fill(&mut buf, [15], 6);
        let v3 = e.checkpoint().unwrap();
        snaps.push((v3.version, buf.slice().to_vec()));
        let v4 = e.checkpoint().unwrap();
        assert_eq!(v4.pages, 0, "nothing written since");
        snaps.push((v4.version, buf.slice().to_vec()));
        let s = e.stats();
        assert_eq!(s.precopy_passes, 3);
        assert!(s.precopy_pages >= 9 && s.precopy_conflicts >= 2, "{s:?}");
        drop(e);
        restores_as_written(&dir, PAGES * PS, &snaps);
    }
}

#[test]
fn prwip_learns_to_leave_a_page_rewritten_every_pass_to_the_checkpoint() {
    let dir = scratch_dir("precopy-learn");
    let e = Engine::open(config(&dir, Strategy::Prwip, false)).unwrap();
    let mut buf = Buf::new(PAGES * PS);
    // SAFETY: the buffer outlives the engine.
    unsafe { e.protect(1, buf.ptr, PAGES * PS).unwrap() };
    e.checkpoint().unwrap();
    let mut snaps = Snapshots::new();
    for round in 0..3u8 {
        let faults = e.stats().faults;
        // Page 0 is rewritten before every pass: after its first conflict it is left to the
        // checkpoint. Page 1 is written once an epoch: pre-copied, never a conflict.
        for pass in 0..4u8 {
            fill(&mut buf, [0], round * 10 + pass);
            if pass == 0 {
                fill(&mut buf, [1], round + 100);
            }
            assert!(e.precopy_pass());
        }
        let info = e.checkpoint().unwrap();
        snaps.push((info.version, buf.slice().to_vec()));
        let p = info.precopy.unwrap();
        let want = if round == 0 { (2, 1) } else { (1, 0) };
        assert_eq!((p.pages, p.conflicts), want, "round {round}");
        if round > 0 && e.backend() != ickpt::Backend::UffdAsync {
            // A page left to the checkpoint stays open: one trap an epoch, as without
            // pre-copy, however often it is written (uffd-async counts no traps).
            assert_eq!(
                e.stats().faults - faults,
                2,
                "round {round}: pages 0 and 1 once"
            );
        }
    }
    drop(e);
    restores_as_written(&dir, PAGES * PS, &snaps);
}

/// Pages of the regions the stopped fence is tested on: enough that a few runs of written
/// pages are fenced one by one, not the whole region (one run per 50 pages at most).
const BIG: usize = 1024;

/// `ickpt run`'s way: pre-copy off, every written page copied at once before the
/// checkpoint (`Engine::precopy_written`), and the program's other threads stopped during
/// the collect, so an async commit fences only what it collected. Pages written after the
/// copy, and pages written while the commit runs (pre-copied ones, unfenced, among them),
/// leave each version as memory was at its call.
#[test]
fn pages_copied_before_a_stop_and_the_fence_over_the_rest_keep_each_version() {
    for mode in [CommitMode::Sync, CommitMode::Async] {
        let dir = scratch_dir("precopy-written");
        let mut c = config(&dir, Strategy::Off, false);
        c.mode = mode;
        c.others_stopped = true;
        c.flush_order = FlushOrder::Address;
        // Writes wait at the gate while it is closed: an async commit is held there after its
        // first batch, with the pages after it still to take from memory.
        let (store, gate) = gated_store(&dir);
        let e = Engine::with_store(c, store).unwrap();
        let mut buf = Buf::new(BIG * PS);
        noise(buf.slice_mut(), 7);
        // SAFETY: the buffer outlives the engine.
        unsafe { e.protect(1, buf.ptr, BIG * PS).unwrap() };
        assert_eq!(e.precopy_written(), 0, "{mode:?}: nothing stored yet");
        let mut snaps = Snapshots::new();
        let v1 = e.checkpoint().unwrap();
        snaps.push((v1.version, buf.slice().to_vec()));
        // A full version stores every page, written since or not: all of them are fenced.
        fill(&mut buf, [9, BIG - 1], 1);
        assert_eq!(e.wait().unwrap().unwrap_or(v1).kind, Kind::Full);
        for round in 0..3u8 {
            fill(&mut buf, 0..8, 10 + round);
            // Pages 0-7, and two written during the last commit.
            let written = 10;
            assert_eq!(e.precopy_written(), written, "{mode:?} round {round}");
            // After the copy: page 3 again (stored again, in its slot), a run of 200 (more
            // than a batch) and one late page.
            fill(&mut buf, [3], 20 + round);
            fill(&mut buf, (100..300).chain([BIG - 4]), 30 + round);
            let held = gate.open_on_drop();
            gate.set(mode == CommitMode::Async);
            let v = e.checkpoint().unwrap();
            snaps.push((v.version, buf.slice().to_vec()));
            // While an async commit is held: a page it fenced and has not taken, one
            // pre-copied (not fenced) and one it does not store.
            fill(&mut buf, [BIG - 4, 5, BIG - 2], 40 + round);
            drop(held);
            let done = e.wait().unwrap().unwrap_or(v);
            assert_eq!(done.kind, Kind::Incremental);
            assert_eq!(
                done.precopy.unwrap().pages,
                written,
                "{mode:?} round {round}"
            );
            let pages = if round == 0 { 211 } else { 210 };
            assert_eq!(done.pages, pages, "{mode:?} round {round}: each page once");
        }
        drop(e);
        restores_as_written(&dir, BIG * PS, &snaps);
    }
}

/// A full version after increments, the program's other threads stopped: every page is
/// stored, so every page is fenced, not only those written since the last version.
#[test]
fn a_full_version_with_the_program_stopped_fences_every_page() {
    let dir = scratch_dir("precopy-written-full");
    let mut c = config(&dir, Strategy::Off, false);
    c.mode = CommitMode::Async;
    c.others_stopped = true;
    c.full_every = 2;
    let e = Engine::open(c).unwrap();
    let mut buf = Buf::new(BIG * PS);
    noise(buf.slice_mut(), 9);
    // SAFETY: the buffer outlives the engine.
    unsafe { e.protect(1, buf.ptr, BIG * PS).unwrap() };
    let mut snaps = Snapshots::new();
    for (round, kind) in [Kind::Full, Kind::Incremental, Kind::Full]
        .into_iter()
        .enumerate()
    {
        fill(&mut buf, [round], 1 + round as u8);
        let v = e.checkpoint().unwrap();
        snaps.push((v.version, buf.slice().to_vec()));
        // Not written since the last version: stored only by a full one. Near the end, so
        // that the commit has not taken it yet.
        fill(&mut buf, [BIG - 10 + round], 50 + round as u8);
        assert_eq!(e.wait().unwrap().unwrap_or(v).kind, kind);
    }
    drop(e);
    restores_as_written(&dir, BIG * PS, &snaps);
}

#[test]
fn off_leaves_no_precopy_figures() {
    let dir = scratch_dir("precopy-off");
    let e = Engine::open(config(&dir, Strategy::Off, false)).unwrap();
    let buf = Buf::new(PS);
    // SAFETY: the buffer outlives the engine.
    unsafe { e.protect(1, buf.ptr, PS).unwrap() };
    assert!(!e.precopy_pass());
    assert_eq!(e.checkpoint().unwrap().precopy, None);
    drop(e);
}

/// The pre-copier's own thread against an application writing all the time: versions taken
/// at random moments (so checkpoints come far earlier than the 10 s given, and, in the
/// second half, later than the learnt cadence says) restore to memory at their call.
#[test]
fn the_thread_precopies_while_the_application_writes() {
    for mode in [CommitMode::Sync, CommitMode::Async] {
        for strategy in STRATEGIES {
            let dir = scratch_dir("precopy-thread");
            let mut c = config(&dir, strategy, true);
            c.mode = mode;
            // Learnt from the calls, not given.
            c.checkpoint_interval = None;
            let e = Engine::open(c).unwrap();
            const N: usize = 64;
            let mut buf = Buf::new(N * PS);
            // SAFETY: the buffer outlives the engine.
            unsafe { e.protect(1, buf.ptr, N * PS).unwrap() };
            let mut snaps = Snapshots::new();
            let mut rng = 0x9E37_79B9u64;
            let mut next = |n: u64| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng % n
            };
            for round in 0..12u64 {
                let passes = e.stats().precopy_passes;
                // Write until the pre-copier has passed at least once (the first two rounds
                // only teach it the cadence).
                let mut k = 0u64;
                spin_until("a pre-copy pass", || {
                    k += 1;
                    let p = next(N as u64) as usize;
                    buf.slice_mut()[p * PS + (k as usize % PS)] = (k ^ round) as u8;
                    round < 2 || e.stats().precopy_passes > passes
                });
                let info = e.checkpoint().unwrap();
                if mode == CommitMode::Async {
                    e.wait().unwrap();
                }
                snaps.push((info.version, buf.slice().to_vec()));
            }
            let s = e.stats();
            assert!(s.precopy_passes >= 10, "{strategy:?} {mode:?}: {s:?}");
            drop(e);
            restores_as_written(&dir, N * PS, &snaps);
        }
    }
}

/// An engine over `store`, one region checkpointed once, and its snapshots.
fn over(store: Arc<dyn Store>, strategy: Strategy) -> (Engine, Buf, Snapshots) {
    let e = Engine::with_store(config(Path::new("/unused"), strategy, false), store).unwrap();
    let mut buf = Buf::new(PAGES * PS);
    noise(buf.slice_mut(), 3);
    // SAFETY: the buffer outlives the engine (callers drop it first).
    unsafe { e.protect(1, buf.ptr, PAGES * PS).unwrap() };
    let v = e.checkpoint().unwrap();
    let snaps = vec![(v.version, buf.slice().to_vec())];
    (e, buf, snaps)
}

#[test]
fn a_store_error_under_the_precopier_is_reported_and_loses_nothing() {
    // The pre-copy file's prefix (a page) goes through; its first pages do not.
    for fault in [
        Fault::IoErrorAfter(PS as u64 + 100),
        Fault::NoSpaceAfter(0),
        Fault::CrashAfter(PS as u64),
    ] {
        let dir = scratch_dir("precopy-fault");
        let plan = FaultPlan::new();
        let store = Arc::new(FaultyStore::new(
            DirStore::open_write(&dir).unwrap(),
            plan.clone(),
        ));
        let (e, mut buf, mut snaps) = over(store, Strategy::Blind);
        plan.arm(fault);
        fill(&mut buf, 0..6, 7);
        assert!(e.precopy_pass());
        fill(&mut buf, [9], 8);
        // Pre-copy stopped: this pass does nothing.
        assert!(e.precopy_pass());
        let v = e.checkpoint().unwrap();
        let p = v.precopy.clone().unwrap();
        assert_eq!(p.pages, 0, "{fault:?}");
        let why = p.error.expect("the failure is reported");
        assert!(
            why.contains("v00000002.ickpt"),
            "{fault:?}: names the file: {why}"
        );
        assert_eq!(
            v.pages, 7,
            "{fault:?}: every page written went into the checkpoint"
        );
        snaps.push((v.version, buf.slice().to_vec()));
        // And pre-copy resumes after it.
        fill(&mut buf, [12], 9);
        assert!(e.precopy_pass());
        let v = e.checkpoint().unwrap();
        assert_eq!(
            v.precopy.as_ref().map(|p| (p.pages, p.error.is_none())),
            Some((1, true))
        );
        snaps.push((v.version, buf.slice().to_vec()));
        drop(e);
        restores_as_written(&dir, PAGES * PS, &snaps);
    }
}

#[test]
fn a_commit_that_fails_after_taking_the_file_over_gives_every_page_back() {
    let dir = scratch_dir("precopy-commit-fault");
    let plan = FaultPlan::new();
    let store = Arc::new(FaultyStore::new(
        DirStore::open_write(&dir).unwrap(),
        plan.clone(),
    ));
    let (e, mut buf, mut snaps) = over(store, Strategy::Blind);
    // Prefix and 6 pre-copied pages pass; the commit's own writes do not.
    plan.arm(Fault::IoErrorAfter((7 * PS) as u64));
    fill(&mut buf, 0..6, 7);
    assert!(e.precopy_pass());
    fill(&mut buf, [2, 9], 8);
    let err = e.checkpoint().unwrap_err();
    assert!(err.to_string().contains("v00000002.ickpt"), "{err}");
    // Nothing of the failed version; the next one stores all of it.
    let v = e.checkpoint().unwrap();
    assert_eq!(v.version, 3);
    assert_eq!(v.pages, 7);
    snaps.push((v.version, buf.slice().to_vec()));
    drop(e);
    restores_as_written(&dir, PAGES * PS, &snaps);
}

#[test]
fn a_full_version_or_a_region_gone_drops_the_file_and_stores_its_pages() {
    let dir = scratch_dir("precopy-full");
    let mut c = config(&dir, Strategy::Blind, false);
    c.full_every = 2;
    let e = Engine::open(c).unwrap();
    let mut buf = Buf::new(PAGES * PS);
    let other = Buf::new(2 * PS);
    // SAFETY: both buffers outlive the engine.
    unsafe {
        e.protect(1, buf.ptr, PAGES * PS).unwrap();
        e.protect(2, other.ptr, 2 * PS).unwrap();
    }
    let mut snaps = Snapshots::new();
    e.checkpoint().unwrap();
    e.checkpoint().unwrap();
    // Version 3 is full: the pages pre-copied for it are stored with the rest, and a
    // rewrite of one of them conflicts with nothing the version holds.
    fill(&mut buf, 0..4, 1);
    assert!(e.precopy_pass());
    fill(&mut buf, [0], 5);
    assert!(e.precopy_pass());
    let v3 = e.checkpoint().unwrap();
    let p3 = v3.precopy.as_ref().unwrap();
    assert_eq!((v3.kind, p3.pages, p3.conflicts), (Kind::Full, 0, 0));
    assert_eq!(p3.copies, 5, "4 pages copied, then page 0 again");
    // Version 4: region 2 leaves after its pages and region 1's were pre-copied.
    fill(&mut buf, 4..8, 2);
    assert!(e.precopy_pass());
    e.unprotect(2).unwrap();
    let v4 = e.checkpoint().unwrap();
    assert_eq!(v4.precopy.as_ref().unwrap().pages, 0);
    assert_eq!(
        v4.pages, 4,
        "region 1's pre-copied pages went into the checkpoint"
    );
    snaps.push((v4.version, buf.slice().to_vec()));
    drop(e);
    drop(other);
    restores_as_written(&dir, PAGES * PS, &snaps);
}

#[test]
fn a_freed_region_takes_what_precopy_knew_of_it() {
    let dir = scratch_dir("precopy-free");
    let e = Engine::open(config(&dir, Strategy::Prwip, false)).unwrap();
    let mut buf = Buf::new(PAGES * PS);
    // SAFETY: the buffer outlives the engine.
    unsafe { e.protect(1, buf.ptr, PAGES * PS).unwrap() };
    for round in 0..20u8 {
        let p = e.alloc(2, 8 * PS).unwrap();
        e.checkpoint().unwrap();
        // SAFETY: 8 pages from alloc.
        unsafe { std::ptr::write_bytes(p, round, 8 * PS) };
        fill(&mut buf, [round as usize % PAGES], round);
        assert!(e.precopy_pass());
        assert_eq!(e.precopy_known_regions(), 2, "round {round}");
        e.free(p).unwrap();
        assert_eq!(
            e.precopy_known_regions(),
            1,
            "round {round}: region 2 forgotten"
        );
    }
    drop(e);
}

// Two writers with different code, so the compiler cannot fold them into one function.
// Plain stores, not `write_volatile`: a debug build calls that as a function of its own,
// which would then be the faulting one. Not inlined, the stores to the caller's memory stay.
#[inline(never)]
fn write_from_a(p: *mut u8) {
    // SAFETY: the caller's page, writable by the test.
    unsafe { *p = 0xA };
}

#[inline(never)]
fn write_from_b(p: *mut u8) {
    // SAFETY: as above.
    unsafe {
        *p.wrapping_add(8) = 0xB;
        *p.wrapping_add(16) = 0xC;
    }
}

/// PRWIP keeps a page's history per execution context. On mprotect the fault reports
/// the writing instruction, and the context is its function; userfaultfd reports none, and
/// the context is the region. `ICKPT_PRECOPY_CONTEXT=region` (`Config::precopy_context`)
/// forces the region everywhere.
#[test]
fn the_context_is_the_writing_function_where_the_fault_reports_it() {
    use ickpt::policy::prwip::Context;
    for context in [Context::Function, Context::Region] {
        let dir = scratch_dir("precopy-context");
        let mut c = config(&dir, Strategy::Prwip, false);
        c.precopy_context = context;
        let e = Engine::open(c).unwrap();
        let buf = Buf::new(PAGES * PS);
        // SAFETY: the buffer outlives the engine.
        unsafe { e.protect(7, buf.ptr, PAGES * PS).unwrap() };
        e.checkpoint().unwrap();
        write_from_a(buf.ptr);
        write_from_b(buf.ptr.wrapping_add(PS));
        write_from_a(buf.ptr.wrapping_add(2 * PS));
        let (a, b) = (
            write_from_a as *const () as usize as u64,
            write_from_b as *const () as usize as u64,
        );
        let got: Vec<u64> = (0..3).map(|p| e.precopy_context(7, p).unwrap()).collect();
        let by_function = context == Context::Function && e.backend() == Backend::Mprotect;
        let want = if by_function {
            vec![a, b, a]
        } else {
            vec![7, 7, 7]
        };
        assert_eq!(got, want, "{context:?} on {}", e.backend().as_str());
        // The writes were tracked as ever: the next version holds the 3 pages.
        assert_eq!(e.checkpoint().unwrap().pages, 3);
        drop(e);
    }
}
