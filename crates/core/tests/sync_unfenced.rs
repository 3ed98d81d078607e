//! Sync commits without a fence (uffd-async, `Guard::Check`): a sync checkpoint collects
//! without write-protecting its regions with mprotect and asks after the copy whether any
//! collected page was written meanwhile; if one was, it commits nothing and is taken again
//! with fences. Whatever the backend, a version is memory as it stood at one instant of the
//! checkpoint call, never a mix of older and newer pages.

mod common;
use common::between_collects::{two_regions_of_ones, writes_after_the_first_collect};
use common::hook_store::gated_store;
use common::pass_writers::one_instant_among_writers;
use common::{scratch_dir, Buf};
use ickpt::track::Backend;
use ickpt::{Config, Engine};

const PS: usize = 4096;
/// More pages than a sync commit fences anyway (small regions are always fenced).
const PAGES: usize = 64;

/// Whether `b` takes sync commits without a fence (and so must retry some): uffd-async.
fn unfenced(b: Backend) -> bool {
    b == Backend::UffdAsync
}

/// A sync checkpoint of a region `offset` bytes into a fresh buffer (its first and last
/// pages then shared with bytes outside it), held at its first store write (before any page
/// is copied) while the test writes 7 at byte `at` of the region. Returns whether the
/// commit was taken again, the byte the version holds there, and the backend.
fn write_during_a_sync_commit(name: &str, offset: usize, at: usize) -> (bool, u8, Backend) {
    // The gate bounds a write held there, not a retry that never ends: `join` below would.
    let _watchdog = common::watchdog("write_during_a_sync_commit", 120);
    let dir = scratch_dir(name);
    let (store, gate) = gated_store(&dir);
    gate.set(true);
    let mut c = Config::new(&dir);
    c.cow_bytes = 16 * PS;
    // The buffer first: it is dropped after the engine, also when the test panics.
    let mut buf = Buf::new(PAGES * PS + offset.next_multiple_of(PS));
    let e = Engine::with_store(c, store).unwrap();
    buf.slice_mut().fill(1);
    let region = (buf.ptr as usize + offset) as *mut u8;
    // SAFETY: inside `buf`, which outlives the engine.
    unsafe { e.protect(1, region, PAGES * PS).unwrap() };

    let info = std::thread::scope(|s| {
        // However the test fails, the commit is let go, so the scope can end.
        let _open = gate.open_on_drop();
        let committer = s.spawn(|| e.checkpoint().unwrap());
        common::spin_until("the commit reaching its first write", || gate.entered() > 0);
        // SAFETY: inside the protected region; the committer only reads it.
        unsafe { std::ptr::write_volatile(region.add(at), 7) };
        gate.set(false);
        committer.join().unwrap()
    });

    let raced = e.stats().raced_commits;
    assert_eq!(u64::from(info.commit.phases.attempts), raced + 1);
    assert!(raced <= 1, "{raced} races with one write");
    buf.slice_mut().fill(9);
    e.restore(info.version).unwrap();
    let held = buf.slice()[offset + at];
    assert!(
        buf.slice()[offset..offset + PAGES * PS]
            .iter()
            .enumerate()
            .all(|(i, &b)| b == if i == at { held } else { 1 }),
        "the version holds more than the one write"
    );
    // The retried version took the number the abandoned attempt had, and its file is the
    // only one in the store.
    assert_eq!(info.version, 1);
    assert_eq!(ickpt::read::catalog::versions(e.store()).unwrap(), vec![1]);
    let backend = e.backend();
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
    (raced == 1, held, backend)
}

/// A write that lands on a collected page before the commit copies it. With a fence the
/// write is decided by the page protocol (copied aside first: the version has the old
/// byte); without one the commit sees the write afterwards and commits again (the version
/// has the new byte). Never a failure, never a version that mixes the two.
#[test]
fn a_write_during_an_unfenced_sync_commit_makes_it_commit_again() {
    let want = |b: Backend| if unfenced(b) { (true, 7) } else { (false, 1) };
    let (raced, held, backend) = write_during_a_sync_commit("sync-unfenced-race", 0, 40 * PS + 8);
    assert_eq!(
        (raced, held),
        want(backend),
        "(taken again, byte in the version)"
    );
    // An unaligned region (a heap buffer's) is checked the same way, not fenced whole.
    let (raced, held, backend) =
        write_during_a_sync_commit("sync-unfenced-unaligned", 100, 40 * PS + 8);
    assert_eq!(
        (raced, held),
        want(backend),
        "(taken again, byte in the version), unaligned region"
    );
}

/// The pages an unaligned region shares with memory outside it (where the commit's own
/// allocations may write) are fenced even when the rest is not: a write there is decided
/// (copied aside), so the version keeps the old byte and the commit is not taken again, on
/// every backend. Both edges: the region's first page and its last.
#[test]
fn a_write_to_a_shared_edge_page_is_decided_not_retried() {
    for at in [8, PAGES * PS - 8] {
        let (raced, held, _) = write_during_a_sync_commit("sync-unfenced-edge", 100, at);
        assert_eq!(
            (raced, held),
            (false, 1),
            "(taken again, byte in the version) at {at}"
        );
    }
}

/// With no other thread writing, an unfenced sync commit never meets a write: quiet
/// checkpoints are never taken twice (a check that saw writes where there were none, e.g.
/// on pages never touched, would retry every one), and each restores memory exactly.
#[test]
fn quiet_sync_checkpoints_commit_once() {
    let dir = scratch_dir("sync-unfenced-quiet");
    let e = Engine::open(Config::new(&dir)).unwrap();
    let mut buf = Buf::new(PAGES * PS);
    // Half the pages are never touched before the first (whole) version.
    buf.slice_mut()[..PAGES / 2 * PS].fill(3);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    let mut versions = Vec::new();
    for round in 0..6u8 {
        for p in (round as usize..PAGES).step_by(7) {
            buf.slice_mut()[p * PS + round as usize] = round + 10;
        }
        versions.push((e.checkpoint().unwrap().version, buf.slice().to_vec()));
    }
    assert_eq!(e.stats().raced_commits, 0);
    for (v, memory) in versions {
        buf.slice_mut().fill(0xee);
        e.restore(v).unwrap();
        assert!(buf.slice() == memory, "version {v} differs from memory");
    }
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same for a heap buffer, unaligned and between the allocator's headers, which the
/// commit's own allocations may write: its shared edge pages are fenced, the rest checked,
/// and quiet checkpoints are still taken once each and restore exactly. A smoke test: it
/// meets an unfenced edge page only where the allocator puts the commit's allocations
/// beside the buffer (the edge test above pins the fencing itself).
#[test]
fn quiet_sync_checkpoints_of_a_heap_buffer_commit_once() {
    let dir = scratch_dir("sync-unfenced-heap");
    // Below the allocator's mmap threshold: in the heap, among other chunks.
    let mut heap = vec![0u8; 20 * PS + 100];
    let e = Engine::open(Config::new(&dir)).unwrap();
    // SAFETY: `heap` is neither moved nor resized, and outlives the engine.
    unsafe { e.protect(1, heap.as_mut_ptr(), heap.len()).unwrap() };
    let mut versions = Vec::new();
    for round in 0..6u8 {
        for at in (round as usize * 97..heap.len()).step_by(3 * PS + 5) {
            heap[at] = round + 10;
        }
        let v = e.checkpoint().unwrap().version;
        versions.push((v, heap.clone()));
    }
    assert_eq!(e.stats().raced_commits, 0);
    for (v, memory) in versions {
        heap.fill(0xee);
        e.restore(v).unwrap();
        assert!(heap == memory, "version {v} differs from memory");
    }
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Threads writing while sync checkpoints are taken (`common::pass_writers`): a version
/// mixing pages copied at different instants (a copy the writers overtook) breaks what they
/// write. On uffd-async this goes on until unfenced commits have met writes more than once
/// (each followed by fenced ones), so both ways are exercised.
#[test]
fn versions_taken_among_writers_are_one_instant_of_memory() {
    let _watchdog = common::watchdog("versions_taken_among_writers", 300);
    let dir = scratch_dir("sync-unfenced-writers");
    let mut c = Config::new(&dir);
    c.keep_chains = 1;
    let e = Engine::open(c).unwrap();
    let mut buf = Buf::new(PAGES * PS);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    let want_races = if unfenced(e.backend()) { 2 } else { 0 };
    let round = one_instant_among_writers(&e, &mut buf, PAGES, want_races, |e| {
        e.checkpoint().unwrap().version
    });
    eprintln!(
        "{round} rounds, {} unfenced commits met a write",
        e.stats().raced_commits
    );
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A write the version leaves out may come, in the writer's order, before one it holds:
/// regions are collected one after another, so a page of the first region written clean
/// after its collect, then a page of the second written before its collect, gave a version
/// holding the second write and not the first (found in review, when the check counted only
/// writes to pages the version stores). A hook after region 1's collect lets another thread
/// write page 5 of region 1, then page 0 of region 2, and waits for it. Only uffd-async
/// lets that thread through during the call; with a fence it waits at the gate, which the
/// hook would wait for in turn.
#[test]
fn a_version_never_holds_a_write_without_the_writes_before_it() {
    let dir = scratch_dir("sync-unfenced-order");
    let e = Engine::open(Config::new(&dir)).unwrap();
    if !unfenced(e.backend()) {
        eprintln!(
            "backend {:?} fences sync commits: nothing to race",
            e.backend()
        );
        return;
    }
    let (mut r1, mut r2) = two_regions_of_ones(&e, PAGES);
    e.checkpoint().unwrap();
    let (b1, b2) = (r1.ptr as usize, r2.ptr as usize);
    let info = writes_after_the_first_collect(b1 + 5 * PS, b2, || e.checkpoint().unwrap());
    assert_eq!(
        e.stats().raced_commits,
        1,
        "the write to region 1 went unseen"
    );
    r1.slice_mut().fill(0);
    r2.slice_mut().fill(0);
    e.restore(info.version).unwrap();
    assert_eq!(r2.slice()[0], 7);
    assert_eq!(
        r1.slice()[5 * PS],
        7,
        "the version holds region 2's write but not region 1's, written before it"
    );
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}
