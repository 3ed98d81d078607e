//! Asynchronous commits (AI-Ckpt): a version equals memory at the instant `checkpoint` was
//! called, whatever threads write while it commits, with any copy-on-write budget, flush
//! order and write pattern; copies stay within the budget; failures surface at `wait`;
//! and the flush order follows Algorithm 4.
//! ICKPT_ASYNC_ROUNDS sets the number of random rounds (default 36).

use crate::common;
use common::hook_store::{gated_store, Gate, HookStore};
use common::{scratch_dir, Buf, Scratch};
use ickpt::format::{CommitMode, FlushOrder};
use ickpt::read::catalog;
use ickpt::store::{DirStore, Fault, FaultPlan, FaultyStore, Store};
use ickpt::{Backend, CheckpointError, Config, Engine, FileError};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

const PS: usize = 4096;

fn async_config(dir: &std::path::Path, cow_pages: usize, order: FlushOrder) -> Config {
    let mut c = Config::new(dir);
    c.mode = CommitMode::Async;
    c.cow_bytes = cow_pages * PS;
    c.flush_order = order;
    c
}

#[derive(Debug, Clone, Copy)]
enum Pattern {
    Ascending,
    Descending,
    Random,
}

fn page_order(p: Pattern, pages: usize, rng: &mut impl Rng) -> Vec<usize> {
    let mut v: Vec<usize> = (0..pages).collect();
    match p {
        Pattern::Ascending => {}
        Pattern::Descending => v.reverse(),
        Pattern::Random => v.shuffle(rng),
    }
    v
}

/// Writer threads add to every page in `order` (each thread its own slice of the order)
/// while the commit started just before runs.
fn write_pages(buf: &Buf, order: &[usize], threads: usize, add: u8) {
    let base = buf.ptr as usize;
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for (k, &page) in order.iter().enumerate() {
                    if k % threads != t {
                        continue;
                    }
                    for at in (page * PS..(page + 1) * PS).step_by(64) {
                        let p = (base + at) as *mut u8;
                        // SAFETY: `at` is inside `buf`; each page has one writer thread.
                        unsafe { p.write_volatile(p.read_volatile().wrapping_add(add)) };
                    }
                }
            });
        }
    });
}

#[test]
fn writes_during_an_async_commit_never_reach_it() {
    let rounds: u64 = common::env_knob("ICKPT_ASYNC_ROUNDS", 36);
    let pages = 96;
    for round in 0..rounds {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0xA1C + round);
        let pattern =
            [Pattern::Ascending, Pattern::Descending, Pattern::Random][round as usize % 3];
        let cow_pages = [0, 3, 200][(round / 3) as usize % 3];
        let order = [FlushOrder::Address, FlushOrder::Adaptive][(round / 9) as usize % 2];
        let threads = rng.gen_range(1..=3);
        let around = [1, 16][(round / 18) as usize % 2];
        let ctx = format!(
            "round {round}: {pattern:?}, cow {cow_pages} pages, {order:?}, {threads} threads, fault-around {around}"
        );
        let dir = scratch_dir("async");
        let mut c = async_config(&dir, cow_pages, order);
        // Slow enough that the writers run into the commit, not a timing assumption: any
        // overlap (or none) must give the same bytes.
        c.bandwidth = Some(40 << 20);
        c.full_every = 3;
        c.fault_around = around;
        let e = Engine::open(c).unwrap();
        let mut buf = Buf::new(pages * PS);
        for (i, b) in buf.slice_mut().iter_mut().enumerate() {
            *b = (i * 7 + round as usize) as u8;
        }
        // SAFETY: `buf` outlives the engine.
        unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
        let mut snapshots = Vec::new();
        for step in 0..5u8 {
            let before = buf.slice().to_vec();
            let info = e.checkpoint().unwrap();
            assert_eq!(info.pages, pages as u64, "{ctx}: every page was written");
            snapshots.push((info.version, before));
            write_pages(
                &buf,
                &page_order(pattern, pages, &mut rng),
                threads,
                step + 1,
            );
        }
        // One more version, so the last epoch's AFTER writes are counted too.
        e.checkpoint().unwrap();
        let last = e.wait().unwrap().unwrap();
        let s = &last.commit;
        assert!(s.peak_cow_bytes <= s.cow_limit_bytes, "{ctx}: {s:?}");
        if cow_pages == 0 {
            assert_eq!((s.cow_pages, s.peak_cow_bytes), (0, 0), "{ctx}");
        }
        // Every page was written once in the epoch that followed each commit: its first
        // write met the commit as COW, WAIT or AVOIDED, or came after it.
        let st = e.stats();
        assert_eq!(
            st.cow_pages + st.wait_pages + st.avoided_pages + st.after_pages,
            pages as u64 * 5,
            "{ctx}: {st:?}"
        );
        for (v, want) in snapshots.iter().rev() {
            e.restore(*v).unwrap();
            assert!(
                buf.slice() == &want[..],
                "{ctx}: version {v} differs from memory at its checkpoint call"
            );
        }
        drop(e);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// An async engine over a store that fails when `plan` says so.
fn faulty_engine(
    dir: &std::path::Path,
    cow_pages: usize,
    order: FlushOrder,
) -> (Engine, Arc<FaultPlan>) {
    let plan = FaultPlan::new();
    let store: Arc<dyn Store> = Arc::new(FaultyStore::new(
        DirStore::open_write(dir).unwrap(),
        plan.clone(),
    ));
    let e = Engine::with_store(async_config(dir, cow_pages, order), store).unwrap();
    (e, plan)
}

#[test]
fn a_failed_async_commit_is_reported_by_wait_and_loses_nothing() {
    let dir = scratch_dir("async-fail");
    let (e, plan) = faulty_engine(&dir, 2, FlushOrder::Adaptive);
    let mut buf = Buf::new(16 * PS);
    buf.slice_mut().fill(1);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    e.checkpoint().unwrap();
    e.wait().unwrap();
    buf.slice_mut()[5 * PS] = 2;
    buf.slice_mut()[9 * PS] = 3;
    plan.arm(Fault::NoSpaceAfter(PS as u64 + 10));
    let info = e.checkpoint().unwrap();
    assert_eq!(info.pages, 2);
    // Writes during the failing commit must not block or be lost.
    buf.slice_mut()[9 * PS + 1] = 4;
    let err = e.wait().unwrap_err();
    assert!(
        matches!(err, CheckpointError::File(FileError::NoSpace { .. })),
        "{err}"
    );
    assert_eq!(catalog::versions(e.store()).unwrap(), vec![1]);
    assert!(
        e.wait().unwrap().is_some_and(|i| i.version == 1),
        "reported once"
    );
    let want = buf.slice().to_vec();
    let retry = e.checkpoint().unwrap();
    let done = e.wait().unwrap().unwrap();
    assert_eq!(done.version, retry.version);
    assert_eq!(done.pages, 2, "the failed commit's pages are in the retry");
    buf.slice_mut().fill(9);
    e.restore(retry.version).unwrap();
    assert!(buf.slice() == &want[..]);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failed_async_commit_is_reported_by_the_next_checkpoint() {
    let dir = scratch_dir("async-fail-next");
    let (e, plan) = faulty_engine(&dir, 0, FlushOrder::Address);
    let mut buf = Buf::new(4 * PS);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    plan.arm(Fault::IoErrorAfter(0));
    e.checkpoint().unwrap();
    buf.slice_mut()[PS] = 1;
    assert!(matches!(
        e.checkpoint(),
        Err(CheckpointError::File(FileError::Io { .. }))
    ));
    let v = e.checkpoint().unwrap().version;
    e.wait().unwrap();
    assert_eq!(catalog::versions(e.store()).unwrap(), vec![v]);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Pages of `version` in the order the committer wrote them.
fn flush_order(e: &Engine, version: u64) -> Vec<u64> {
    let ov = e.catalog().open(version).unwrap();
    ov.meta
        .runs
        .iter()
        .flat_map(|r| r.first_page..r.first_page + r.page_count as u64)
        .collect()
}

/// An async engine over a store whose writes a gate (open) can hold.
fn gated_engine(name: &str, cow_pages: usize, order: FlushOrder) -> (Scratch, Engine, Arc<Gate>) {
    let dir = scratch_dir(name);
    let (store, gate) = gated_store(&dir);
    let e = Engine::with_store(async_config(&dir, cow_pages, order), store).unwrap();
    (dir, e, gate)
}

/// An async engine over a gated store (open) tracking `pages` pages, committed once as all
/// 1s and then written all 2s: the next checkpoint stores every page.
fn written_after_a_commit(
    name: &str,
    cow_pages: usize,
    order: FlushOrder,
    pages: usize,
) -> (Scratch, Buf, Engine, Arc<Gate>) {
    let mut buf = Buf::new(pages * PS);
    let (dir, e, gate) = gated_engine(name, cow_pages, order);
    // SAFETY: `buf` outlives the engine (callers drop the engine first).
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    buf.slice_mut().fill(1);
    e.checkpoint().unwrap();
    e.wait().unwrap();
    buf.slice_mut().fill(2);
    // The buffer first: it is dropped after the engine, also when a test panics.
    (dir, buf, e, gate)
}

/// Algorithms 2–4 step by step, with the commit held at its first write so every access
/// type is certain: one copy-on-write slot, so the first write to a scheduled page copies
/// it (COW) and the second waits (WAIT); the waited page is flushed first, then the copied
/// one, then the rest by address. The next version's order learns from that epoch.
fn learnt_order(order: FlushOrder) -> (Vec<u64>, Vec<u64>) {
    let (dir, mut buf, e, gate) = written_after_a_commit("async-order", 1, order, 8);
    let _open = gate.open_on_drop();

    gate.set(true);
    let v2 = e.checkpoint().unwrap().version;
    let base = buf.ptr as usize;
    // SAFETY: inside `buf`; page 4 is scheduled and a slot is free: it is copied aside.
    unsafe { ((base + 4 * PS) as *mut u8).write_volatile(3) };
    std::thread::scope(|s| {
        // SAFETY: inside `buf`; no slot is left, so this write waits for the committer.
        s.spawn(|| unsafe { ((base + 6 * PS) as *mut u8).write_volatile(3) });
        common::spin_until("a writer waiting for the committer", || e.writers_waiting());
        gate.set(false);
    });
    let done = e.wait().unwrap().unwrap();
    assert_eq!(done.version, v2);
    assert_eq!(
        (
            done.commit.cow_pages,
            done.commit.wait_pages,
            done.commit.avoided_pages
        ),
        (1, 1, 0)
    );
    assert_eq!(done.commit.peak_cow_bytes, PS as u64);
    let first = flush_order(&e, v2);
    // After the commit: AFTER.
    buf.slice_mut()[PS] = 3;
    let v3 = e.checkpoint().unwrap().version;
    let info3 = e.wait().unwrap().unwrap();
    assert_eq!(info3.commit.after_previous, 1);
    let second = flush_order(&e, v3);
    // Both versions hold memory as it was at their call.
    let mut want = vec![2u8; 8 * PS];
    e.restore(v2).unwrap();
    assert!(buf.slice() == &want[..]);
    want[4 * PS] = 3;
    want[6 * PS] = 3;
    want[PS] = 3;
    e.restore(v3).unwrap();
    assert!(buf.slice() == &want[..]);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
    (first, second)
}

#[test]
fn adaptive_order_flushes_the_waited_page_then_copies_then_what_the_last_epoch_taught() {
    let (first, second) = learnt_order(FlushOrder::Adaptive);
    assert_eq!(first, vec![6, 4, 0, 1, 2, 3, 5, 7]);
    // Last epoch: page 6 waited, page 4 was copied, page 1 came after the commit.
    assert_eq!(second, vec![6, 4, 1]);
}

#[test]
fn address_order_still_takes_the_waited_page_and_copies_first() {
    let (first, second) = learnt_order(FlushOrder::Address);
    assert_eq!(first, vec![6, 4, 0, 1, 2, 3, 5, 7]);
    assert_eq!(second, vec![1, 4, 6]);
}

/// Two regions share a page. A writer that must wait for one region's copy of the page may
/// not leave it writable for the other: every region decides before the page opens, so a
/// later write by another thread never reaches the version.
#[test]
fn a_page_shared_by_two_regions_opens_only_after_both_decided() {
    let buf = Buf::new(2 * PS);
    let (dir, e, gate) = gated_engine("async-shared", 1, FlushOrder::Address);
    let _open = gate.open_on_drop();
    let base = buf.ptr as usize;
    // A covers pages 0 and 1; B lies inside page 1.
    // SAFETY: both ranges are inside `buf`, which outlives the engine.
    unsafe {
        e.protect(1, (base + 100) as *mut u8, PS).unwrap();
        e.protect(2, (base + PS + 200) as *mut u8, 100).unwrap();
    }
    let w = move |off: usize, v: u8| {
        // SAFETY: every offset used is inside `buf`.
        unsafe { ((base + off) as *mut u8).write_volatile(v) }
    };
    e.checkpoint().unwrap();
    e.wait().unwrap();
    w(PS + 60, 1);
    w(PS + 250, 1);
    gate.set(true);
    let v = e.checkpoint().unwrap().version;
    std::thread::scope(|s| {
        // One slot: B's copy of page 1 takes it, A's must wait for the committer.
        s.spawn(|| w(PS + 50, 7));
        common::spin_until("a writer waiting for the committer", || e.writers_waiting());
        // Issued while the first writer waits; must not land in version v.
        s.spawn(|| w(PS + 60, 0xEE));
        gate.set(false);
    });
    e.wait().unwrap();
    e.restore(v).unwrap();
    // SAFETY: inside `buf`.
    let got = unsafe { ((base + PS + 60) as *const u8).read_volatile() };
    assert_eq!(
        got, 1,
        "version {v} holds a write made after its checkpoint"
    );
    // SAFETY: inside `buf`.
    let in_b = unsafe { ((base + PS + 250) as *const u8).read_volatile() };
    assert_eq!(
        in_b, 1,
        "version {v} lost region 2's write to the shared page"
    );
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_commit_that_panics_is_reported_as_a_panic_and_loses_no_dirty_page() {
    // Reported as such (it used to read "a thread wrote to a protected page"), with the
    // version and the panic's message, as ICKPT_ERR_INTERNAL; in sync mode too, where the
    // panic used to unwind through `checkpoint`. A commit of 4 pages panics in its first
    // write; one of 2048 (32 batches) in its third, with pages still to take.
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    for (mode, pages) in [
        (CommitMode::Async, 4),
        (CommitMode::Sync, 4),
        (CommitMode::Async, 2048),
        (CommitMode::Sync, 2048),
    ] {
        let ctx = format!("{mode:?}, {pages} pages");
        // A commit that never ends hangs the test.
        let _watchdog = common::watchdog("a commit that panics", 120);
        let dir = scratch_dir("async-panic");
        // Writes left until the one that panics; 0: none does.
        let left = Arc::new(AtomicUsize::new(0));
        let l = left.clone();
        // The thread the panicking write ran on.
        let on = Arc::new(std::sync::Mutex::new(String::new()));
        let o = on.clone();
        let hook = move || match l.load(SeqCst) {
            0 => {}
            1 => {
                l.store(0, SeqCst);
                *o.lock().unwrap() = std::thread::current().name().unwrap_or("").to_string();
                panic!("a store bug");
            }
            n => l.store(n - 1, SeqCst),
        };
        let store: Arc<dyn Store> = Arc::new(HookStore {
            inner: DirStore::open_write(&dir).unwrap(),
            hook: Arc::new(hook),
        });
        let mut c = async_config(&dir, 4, FlushOrder::Address);
        c.mode = mode;
        // The buffer first: it is dropped after the engine, also when the test panics.
        let mut buf = Buf::new(pages * PS);
        let e = Engine::with_store(c, store).unwrap();
        // SAFETY: `buf` outlives the engine.
        unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
        let v1 = e.checkpoint().unwrap().version;
        e.wait().unwrap();
        let dirty: Vec<usize> = if pages > 4 {
            (0..pages).collect()
        } else {
            vec![2]
        };
        for &p in &dirty {
            buf.slice_mut()[p * PS] = 42;
        }
        left.store(if pages > 4 { 3 } else { 1 }, SeqCst);
        let failed = match mode {
            CommitMode::Async => e.checkpoint().and_then(|_| e.wait()).map(drop),
            CommitMode::Sync => e.checkpoint().map(drop),
        };
        let err = failed.expect_err("the commit panicked");
        match &err {
            CheckpointError::CommitPanicked { version, message } => {
                assert_eq!(*version, v1 + 1, "{ctx}");
                assert_eq!(message, "a store bug", "{ctx}");
            }
            other => panic!("{ctx}: {other:?}"),
        }
        assert_eq!(left.load(SeqCst), 0, "{ctx}: the store panicked");
        // A sync commit runs on the caller, an async one on the committer's thread.
        let ran_on = on.lock().unwrap().clone();
        assert_eq!(
            Some(ran_on.as_str()) == std::thread::current().name(),
            mode == CommitMode::Sync,
            "{ctx}: the panicking write ran on {ran_on:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("panicked") && msg.contains("a store bug"),
            "{msg}"
        );
        assert_eq!(
            ickpt::capi::code_of(&err.into()),
            ickpt::capi::ickpt_result::ICKPT_ERR_INTERNAL
        );
        buf.slice_mut()[0] = 7;
        let v = e.checkpoint().unwrap().version;
        let want_pages = dirty.len() + usize::from(!dirty.contains(&0));
        assert_eq!(
            e.wait().unwrap().unwrap().pages,
            want_pages as u64,
            "{ctx}: the abandoned commit's pages too"
        );
        let want = buf.slice().to_vec();
        buf.slice_mut().fill(0);
        e.restore(v).unwrap();
        assert!(buf.slice() == &want[..], "{ctx}");
        drop(e);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Whether this run's commits lift a fenced region chunk by chunk behind themselves: on
/// uffd-async.
fn lifts_behind(e: &Engine) -> bool {
    e.backend() == Backend::UffdAsync
}

/// Start an async checkpoint held at the gate after its first batch: its prefix passes,
/// the write of its first 64 pages waits. Returns the version and the gate's count of
/// writes before it.
fn checkpoint_held_at_first_batch(e: &Engine, gate: &Gate) -> (u64, usize) {
    gate.set(true);
    gate.let_through(1);
    let entered = gate.entered();
    let v = e.checkpoint().unwrap().version;
    common::spin_until("the commit's first batch at the gate", || {
        gate.entered() == entered + 2
    });
    (v, entered)
}

/// Let the write held at the gate through and hold the next: the gate has then seen
/// `entered` writes.
fn let_next_batch_through(gate: &Gate, entered: usize) {
    gate.let_through(1);
    common::spin_until("the commit's next batch at the gate", || {
        gate.entered() == entered
    });
}

/// A commit held after its first batch (pages 0..64, the region's first chunk of 64 pages)
/// and again after its second. At the first stop the application writes `behind` taken
/// pages (each decided: AVOIDED); at the second, a page of the second chunk, now taken too,
/// and two pages still to take (copied aside). Once 64 writes came behind the committer,
/// the chunks it completes are lifted (uffd-async), so the second-chunk write passes
/// unseen; after a single one, nothing is lifted and it is decided as before. Both versions
/// hold memory as it was at their call either way.
fn lift_behind_the_committer(behind: usize) {
    let pages = 1024;
    let (dir, buf, e, gate) = written_after_a_commit("async-lift", 4, FlushOrder::Address, pages);
    let _open = gate.open_on_drop();
    let base = buf.ptr as usize;
    let write = |page: usize| {
        // SAFETY: every page written is inside `buf`.
        unsafe { ((base + page * PS) as *mut u8).write_volatile(3) }
    };
    // Its first batch: pages 0..64, taken in address order.
    let (v2, entered) = checkpoint_held_at_first_batch(&e, &gate);
    (0..behind).for_each(write);
    let_next_batch_through(&gate, entered + 3);
    let written = [70, 128, 200];
    written.into_iter().for_each(write);
    gate.set(false);
    let done = e.wait().unwrap().unwrap();
    assert_eq!(done.version, v2);
    let lifted = lifts_behind(&e) && behind >= 64;
    let avoided = behind as u64 + u64::from(!lifted);
    assert_eq!(
        (done.commit.cow_pages, done.commit.avoided_pages),
        (2, avoided),
        "after {behind} writes behind the committer, one to a chunk it completed is {} on {:?}",
        if lifted { "unseen" } else { "decided" },
        e.backend()
    );
    // Unseen or not, the next version has every page written.
    let v3 = e.checkpoint().unwrap().version;
    let info3 = e.wait().unwrap().unwrap();
    assert_eq!(info3.pages, (behind + written.len()) as u64);
    let mut want = vec![2u8; pages * PS];
    e.restore(v2).unwrap();
    assert!(buf.slice() == &want[..]);
    for page in (0..behind).chain(written) {
        want[page * PS] = 3;
    }
    e.restore(v3).unwrap();
    assert!(buf.slice() == &want[..]);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_fence_lifts_behind_the_committer_once_writes_follow_it() {
    lift_behind_the_committer(64);
}

#[test]
fn the_fence_stays_while_no_writes_follow_the_committer() {
    lift_behind_the_committer(1);
}

/// Region 1 (128 pages, two chunks) ends inside page 127, where region 2 begins. The commit
/// is held after region 1's first batch, while 64 writes follow it (so it lifts what it
/// completes), and again after its second, which completes region 1's second chunk: that
/// chunk is lifted (a write to page 100 passes unseen) but not over the shared page, which
/// region 2 still needs: a write there is copied aside, and the version keeps what region 2
/// held at the call. Region 2 is ten pages, a run longer than the call copies ahead: it is
/// fenced.
#[test]
fn a_page_another_region_still_needs_stays_fenced_behind_the_committer() {
    let buf = Buf::new(138 * PS);
    let (dir, e, gate) = gated_engine("async-lift-shared", 4, FlushOrder::Address);
    let _open = gate.open_on_drop();
    let base = buf.ptr as usize;
    let shared = 127 * PS;
    // SAFETY: both ranges are inside `buf`, which outlives the engine.
    unsafe {
        e.protect(1, buf.ptr, shared + PS / 2).unwrap();
        e.protect(2, (base + shared + PS / 2) as *mut u8, PS / 2 + 9 * PS)
            .unwrap();
    }
    let fill = |v: u8| {
        // SAFETY: inside `buf`.
        unsafe { std::ptr::write_bytes(buf.ptr, v, buf.len) }
    };
    let write = |at: usize| {
        // SAFETY: every offset written is inside `buf`.
        unsafe { ((base + at) as *mut u8).write_volatile(3) }
    };
    fill(1);
    e.checkpoint().unwrap();
    e.wait().unwrap();
    fill(2);

    let (v2, entered) = checkpoint_held_at_first_batch(&e, &gate);
    (0..64).for_each(|page| write(page * PS));
    let_next_batch_through(&gate, entered + 3);
    write(100 * PS);
    let in_2 = shared + PS / 2 + 10;
    write(in_2);
    gate.set(false);
    let done = e.wait().unwrap().unwrap();
    let lifted = lifts_behind(&e);
    assert_eq!(
        (done.commit.cow_pages, done.commit.avoided_pages),
        // The shared-page write is AVOIDED for region 1 (taken) and copied for region 2.
        (1, 65 + u64::from(!lifted)),
        "page 100's chunk {} lifted on {:?}",
        if lifted { "is" } else { "is not" },
        e.backend()
    );
    // The next version has the write.
    let v3 = e.checkpoint().unwrap().version;
    e.wait().unwrap();
    let read = || {
        // SAFETY: inside `buf`.
        unsafe { ((base + in_2) as *const u8).read_volatile() }
    };
    e.restore(v2).unwrap();
    assert_eq!(
        read(),
        2,
        "version {v2} holds a write made after its checkpoint"
    );
    e.restore(v3).unwrap();
    assert_eq!(
        read(),
        3,
        "version {v3} lost a write made during the commit before it"
    );
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}
