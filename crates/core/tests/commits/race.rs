//! Writes that race with a checkpoint are never lost: threads keep writing while checkpoints
//! are taken; once they stop, a quiet checkpoint must restore memory exactly. (A handler that
//! marked a page dirty before opening it lost such writes in about half of the runs of the C
//! threads test; this loops enough rounds to catch that reliably.)

use crate::common;
use common::scratch_dir;
use ickpt::{Config, Engine};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const PS: usize = 4096;
const PAGES: usize = 64;
const THREADS: usize = 3;

#[test]
fn writes_racing_checkpoints_are_never_lost() {
    let rounds: usize = common::env_knob("ICKPT_RACE_ROUNDS", 150);
    writes_racing_checkpoints(PAGES, rounds);
}

/// 32 batches (8 MiB, 2048 pages of 4 KiB): writers meet a commit that hands batches to the
/// store while it still copies.
#[test]
fn writes_racing_checkpoints_of_many_batches_are_never_lost() {
    let rounds: usize = common::env_knob("ICKPT_RACE_ROUNDS", 150);
    writes_racing_checkpoints(32 * PAGES, rounds.div_ceil(10));
}

fn writes_racing_checkpoints(pages: usize, rounds: usize) {
    // A commit that never ends hangs the test.
    let _watchdog = common::watchdog("writes_racing_checkpoints", 300);
    let dir = scratch_dir("race");
    let mut c = Config::new(&dir);
    c.keep_chains = 1;
    let e = Engine::open(c).unwrap();
    let base = e.alloc(1, pages * PS).unwrap() as usize;
    let mut raced_total = 0u64;
    for round in 0..rounds {
        let stop = AtomicBool::new(false);
        // Writes done by all threads: a checkpoint during which it moved raced the writers.
        let writes = AtomicU64::new(0);
        std::thread::scope(|s| {
            let _stop = common::StopOnDrop(&stop);
            for t in 0..THREADS {
                let (stop, writes) = (&stop, &writes);
                s.spawn(move || {
                    let mut pass = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        pass += 1;
                        for p in 0..pages {
                            let at = base + p * PS + t * 8;
                            // SAFETY: inside the allocated region; each thread owns its bytes.
                            unsafe {
                                std::ptr::write_volatile(at as *mut u32, pass ^ round as u32)
                            };
                            writes.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
            common::spin_until("the writers starting", || {
                writes.load(Ordering::Relaxed) >= (THREADS * pages) as u64
            });
            // At least three checkpoints, and go on until one of them provably ran while the
            // threads wrote (the round proves nothing otherwise).
            let (mut taken, mut raced) = (0, 0);
            while taken < 3 || raced == 0 {
                let before = writes.load(Ordering::Relaxed);
                e.checkpoint().unwrap();
                let overlapped = writes.load(Ordering::Relaxed) != before;
                raced += u64::from(overlapped);
                taken += 1;
                assert!(
                    taken <= 10_000,
                    "round {round}: no checkpoint in 10,000 overlapped a write"
                );
            }
            raced_total += raced;
        });
        // SAFETY: the region is pages*PS bytes; the writers have stopped.
        let mem = unsafe { std::slice::from_raw_parts(base as *const u8, pages * PS) };
        let before = mem.to_vec();
        let v = e.checkpoint().unwrap().version;
        e.restore(v).unwrap();
        let bad = (0..pages)
            .filter(|p| mem[p * PS..(p + 1) * PS] != before[p * PS..(p + 1) * PS])
            .count();
        assert_eq!(
            bad, 0,
            "round {round}: {bad} pages lost writes that raced with a checkpoint"
        );
    }
    eprintln!("{raced_total} checkpoints overlapped writes in {rounds} rounds");
}

/// A first write that traps just before its region is unprotected finds the region gone
/// when the handler looks: it must retry the write (the page is open now), not treat it as
/// a genuine segfault and reset the SIGSEGV disposition for the whole process.
#[test]
fn unprotect_racing_first_writes_keeps_tracking_alive() {
    let rounds: usize = common::env_knob("ICKPT_RACE_ROUNDS", 150);
    let dir = scratch_dir("race-unprotect");
    let e = Engine::open(Config::new(&dir)).unwrap();
    // Rounds in which a thread's first pass (on the backends that trap, a first-write fault
    // per page) spanned the whole of unprotect: begun before it, not finished after it. The
    // race the test is about can only happen in such a round.
    let mut raced = 0;
    let mut round = 0;
    // Extra rounds until one raced: a round is cheap, and with uffd-async (no traps to slow
    // the first pass) only a few percent of them catch a thread inside it.
    while round < rounds || raced == 0 {
        assert!(
            round < rounds + 10_000,
            "no round in {round} unprotected while a thread was in its first pass"
        );
        let mut buf = common::Buf::new(PAGES * PS);
        let base = buf.ptr as usize;
        // SAFETY: `buf` outlives the region (unprotected below, before it drops).
        unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
        let stop = AtomicBool::new(false);
        // Threads that have written their first byte, and that have finished their first pass.
        let (writing, first_pass_done) = (AtomicU64::new(0), AtomicU64::new(0));
        std::thread::scope(|s| {
            let _stop = common::StopOnDrop(&stop);
            for t in 0..THREADS {
                let (stop, writing, first_pass_done) = (&stop, &writing, &first_pass_done);
                s.spawn(move || {
                    let mut first = true;
                    while !stop.load(Ordering::Relaxed) {
                        for p in 0..PAGES {
                            // SAFETY: inside `buf`; each thread owns its bytes.
                            unsafe {
                                std::ptr::write_volatile(
                                    (base + p * PS + t * 8) as *mut u32,
                                    round as u32,
                                )
                            };
                            if first && p == 0 {
                                writing.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        if std::mem::take(&mut first) {
                            first_pass_done.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
            }
            common::spin_until("a writer starting", || writing.load(Ordering::SeqCst) > 0);
            let began = writing.load(Ordering::SeqCst);
            e.unprotect(1).unwrap();
            if began > first_pass_done.load(Ordering::SeqCst) {
                raced += 1;
            }
        });
        buf.slice_mut()[0] = 1;
        round += 1;
    }
    eprintln!("{raced} of {round} rounds unprotected during first writes");
    // Tracking still works: a new region's writes are trapped and checkpointed.
    let mut buf = common::Buf::new(4 * PS);
    // SAFETY: as above.
    unsafe { e.protect(2, buf.ptr, buf.len).unwrap() };
    e.checkpoint().unwrap();
    buf.slice_mut()[PS] = 9;
    assert_eq!(e.checkpoint().unwrap().pages, 1);
}
