//! Async calls that fence only the pages they collected (uffd-async,
//! `Guard::FenceWrittenChecked`): the call scans each region, fences what it found written,
//! and once every region is collected asks whether any page was written since its scan; if
//! one was, it schedules nothing and takes the version again with fences. Whatever the
//! backend, a version is memory as it stood at one instant of the call.

use crate::common;
use common::between_collects::{two_regions_of_ones, writes_after_the_first_collect};
use common::hook_store::gated_store;
use common::pass_writers::one_instant_among_writers;
use common::{scratch_dir, Buf, Scratch};
use ickpt::format::{CommitMode, Kind};
use ickpt::Backend;
use ickpt::{Config, Engine};

const PS: usize = 4096;

/// Whether `b` lets other threads' writes through an async call's collect (and so must
/// schedule some twice): uffd-async, whose writes never reach ickpt.
fn unfenced(b: Backend) -> bool {
    b == Backend::UffdAsync
}

fn async_engine(name: &str) -> (Engine, Scratch) {
    async_engine_with(name, None)
}

/// An async engine, with a copy-on-write buffer of `cow_bytes` where given.
fn async_engine_with(name: &str, cow_bytes: Option<usize>) -> (Engine, Scratch) {
    let dir = scratch_dir(name);
    let mut c = Config::new(&dir);
    c.mode = CommitMode::Async;
    c.keep_chains = 1;
    c.cow_bytes = cow_bytes.unwrap_or(c.cow_bytes);
    (Engine::open(c).unwrap(), dir)
}

/// With no other thread writing, an async call never meets a write, whether it fences the
/// written runs alone and copies the lone pages (one run and a few pages in a large region)
/// or fences the whole region (a page in two: more lone pages than the 64-page
/// copy-on-write buffer's half, and too many runs to fence one by one): quiet calls are
/// scheduled once each (a check that saw writes where there were none, e.g. on pages never
/// touched or on the fenced runs, would schedule every one twice), and each version
/// restores memory exactly. Also an unaligned heap buffer, whose edge pages the allocator
/// shares with the call's own allocations.
#[test]
fn quiet_async_calls_are_scheduled_once() {
    const PAGES: usize = 1024;
    let (e, dir) = async_engine_with("narrow-fence-quiet", Some(64 * PS));
    let mut buf = Buf::new(PAGES * PS);
    // Below the allocator's mmap threshold: in the heap, among other chunks.
    let mut heap = vec![0u8; 20 * PS + 100];
    // Half the pages are never touched before the first (whole) version.
    buf.slice_mut()[..PAGES / 2 * PS].fill(3);
    // SAFETY: `buf` and `heap` are neither moved nor resized, and outlive the engine.
    unsafe {
        e.protect(1, buf.ptr, buf.len).unwrap();
        e.protect(2, heap.as_mut_ptr(), heap.len()).unwrap();
    }
    let mut versions = Vec::new();
    for round in 0..8usize {
        let (from, step) = match round % 2 {
            0 => (100 + round, 97),
            _ => (round, 2),
        };
        buf.slice_mut()[(10 + round) * PS..(40 + round) * PS].fill(round as u8 + 10);
        for p in (from..PAGES).step_by(step) {
            buf.slice_mut()[p * PS + round] = round as u8 + 20;
        }
        for at in (round * 97..heap.len()).step_by(3 * PS + 5) {
            heap[at] = round as u8 + 30;
        }
        let info = e.checkpoint().unwrap();
        e.wait().unwrap();
        versions.push((info.version, buf.slice().to_vec(), heap.clone()));
    }
    assert_eq!(e.stats().raced_commits, 0, "a quiet call met a write");
    for (v, memory, heap_then) in versions {
        buf.slice_mut().fill(0xee);
        heap.fill(0xee);
        e.restore(v).unwrap();
        assert!(buf.slice() == memory, "version {v} differs from memory");
        assert!(
            heap == heap_then,
            "version {v} differs from the heap buffer"
        );
    }
    drop(e);
    drop(dir);
}

/// Pages in short runs are copied into slots during the call (uffd-async), longer runs
/// fenced: with the commit held before its first write, this thread rewrites three lone
/// pages and a run of 14; only the run's writes are copied aside by the fault path (the
/// lone pages were copied ahead, and their writes go on untrapped), and the version holds
/// every page as it stood at the call. Other backends trap every write: all 17 copied aside.
#[test]
fn short_runs_are_copied_during_the_call_and_long_ones_fenced() {
    let _watchdog = common::watchdog("short_runs_are_copied", 120);
    let pages: Vec<usize> = [3, 20, 40].into_iter().chain(50..64).collect();
    let (aside, backend) =
        rewritten_during_a_held_commit("narrow-fence-copy-ahead", 64, 128, &pages);
    let want = if unfenced(backend) { 14 } else { 17 };
    assert_eq!(aside, want, "on {backend:?}");
}

/// Copies ahead have room of their own, beyond the writers' copy-on-write buffer: 40 lone
/// pages of 1,024 are copied ahead with a buffer of 8 slots (uffd-async), so none of their
/// rewrites during the commit is trapped; where a whole fence would have been taken
/// instead, each would be. Other backends trap every write, as many as the buffer holds
/// before waiting for the held commit, so they are given slots for all.
#[test]
fn copies_ahead_are_not_bounded_by_the_writers_buffer() {
    let _watchdog = common::watchdog("copies_ahead_beyond_the_buffer", 120);
    let pages: Vec<usize> = (0..40).map(|k| 7 + 25 * k).collect();
    let (aside, backend) = match unfenced(backend_here()) {
        true => rewritten_during_a_held_commit("narrow-fence-ahead-room", 1024, 8, &pages),
        false => rewritten_during_a_held_commit("narrow-fence-ahead-room", 1024, 64, &pages),
    };
    let want = if unfenced(backend) { 0 } else { 40 };
    assert_eq!(aside, want, "on {backend:?}");
}

/// The backend an engine opened here runs on.
fn backend_here() -> Backend {
    let dir = scratch_dir("narrow-fence-backend");
    let backend = Engine::open(Config::new(&dir)).unwrap().backend();
    drop(dir);
    backend
}

/// An async engine on a region of `region_pages`, with a copy-on-write buffer of
/// `cow_pages`, whose commit is held before its first write while this thread rewrites
/// `pages` (written once before the call): the version must hold every page as it stood at
/// the call. Returns the pages the fault path copied aside, and the backend.
fn rewritten_during_a_held_commit(
    name: &str,
    region_pages: usize,
    cow_pages: usize,
    pages: &[usize],
) -> (u64, Backend) {
    let dir = scratch_dir(name);
    let (store, gate) = gated_store(&dir);
    let mut c = Config::new(&dir);
    c.mode = CommitMode::Async;
    c.cow_bytes = cow_pages * PS;
    let mut buf = Buf::new(region_pages * PS);
    let e = Engine::with_store(c, store).unwrap();
    let _open = gate.open_on_drop();
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    buf.slice_mut().fill(1);
    e.checkpoint().unwrap();
    e.wait().unwrap();
    for &p in pages {
        buf.slice_mut()[p * PS..(p + 1) * PS].fill(2);
    }
    let want = buf.slice().to_vec();
    gate.set(true);
    let entered = gate.entered();
    let info = e.checkpoint().unwrap();
    common::spin_until("the commit at its first write", || gate.entered() > entered);
    for &p in pages {
        buf.slice_mut()[p * PS + 8] = 3;
    }
    gate.set(false);
    let done = e.wait().unwrap().unwrap();
    assert_eq!(done.version, info.version);
    buf.slice_mut().fill(0);
    e.restore(info.version).unwrap();
    assert!(
        buf.slice() == &want[..],
        "the version differs from memory at the call"
    );
    (done.commit.cow_pages, e.backend())
}

/// A write the version leaves out may come, in the writer's order, before one it holds:
/// a hook after region 1's collect lets another thread write page 5 of region 1 (clean, so
/// not fenced), then page 0 of region 2 (not collected yet), and waits for it. A call that
/// fenced the collected pages and asked nothing would store region 2's write and not
/// region 1's; this one schedules again with fences and the version holds both. Only
/// uffd-async lets that thread through during the call; other backends trap its write,
/// which waits at the gate, which the hook would wait for in turn.
#[test]
fn an_async_call_never_holds_a_write_without_the_writes_before_it() {
    const PAGES: usize = 64;
    let (e, dir) = async_engine("narrow-fence-order");
    if !unfenced(e.backend()) {
        eprintln!(
            "backend {:?} traps every write: nothing to race",
            e.backend()
        );
        return;
    }
    let (mut r1, mut r2) = two_regions_of_ones(&e, PAGES);
    e.checkpoint().unwrap();
    e.wait().unwrap();
    // One page written in each region: the next call fences one run of each.
    r1.slice_mut()[40 * PS] = 2;
    r2.slice_mut()[40 * PS] = 2;
    let (b1, b2) = (r1.ptr as usize, r2.ptr as usize);
    let info = writes_after_the_first_collect(b1 + 5 * PS, b2, || e.checkpoint().unwrap());
    e.wait().unwrap();
    assert_eq!(info.kind, Kind::Incremental);
    assert_eq!(
        e.stats().raced_commits,
        1,
        "the write to region 1 went unseen"
    );
    assert_eq!(info.commit.phases.attempts, 2);
    r1.slice_mut().fill(0);
    r2.slice_mut().fill(0);
    e.restore(info.version).unwrap();
    assert_eq!((r1.slice()[40 * PS], r2.slice()[40 * PS]), (2, 2));
    assert_eq!(r2.slice()[0], 7);
    assert_eq!(
        r1.slice()[5 * PS],
        7,
        "the version holds region 2's write but not region 1's, written before it"
    );
    drop(e);
    drop(dir);
}

/// Threads writing while async calls are taken (`common::pass_writers`): a version mixing
/// pages from different instants (a write let through between a scan and its fence) breaks
/// what they write. They write an eighth of the region, so each call finds one run and
/// fences it alone. On uffd-async this goes on until calls have met writes more than once
/// (each followed by fenced ones), so both ways are exercised.
#[test]
fn async_calls_among_writers_are_one_instant_of_memory() {
    const PAGES: usize = 256;
    let _watchdog = common::watchdog("async_calls_among_writers", 300);
    let (e, dir) = async_engine("narrow-fence-writers");
    let mut buf = Buf::new(PAGES * PS);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    let want_races = if unfenced(e.backend()) { 2 } else { 0 };
    let round = one_instant_among_writers(&e, &mut buf, PAGES / 8, want_races, |e| {
        let v = e.checkpoint().unwrap().version;
        e.wait().unwrap();
        v
    });
    eprintln!(
        "{round} rounds, {} async calls met a write",
        e.stats().raced_commits
    );
    drop(e);
    drop(dir);
}
