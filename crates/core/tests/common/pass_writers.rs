//! Threads writing while checkpoints are taken, and the check that a version is one instant
//! of memory: each thread writes its pass number into its own bytes of every page of a
//! stretch, in page order, so memory at any instant holds, per thread, pass k on a first
//! part of the stretch and k-1 on the rest. A version mixing pages from different instants
//! breaks that.

use super::{spin_until, Buf, StopOnDrop};
use ickpt::Engine;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

const PS: usize = 4096;
const THREADS: usize = 2;

/// Rounds of: writers on the first `pages` pages of `buf` (tracked by `e` as one region),
/// checkpoints (`take`, which returns the version to restore) until one provably overlapped
/// a write, then a restore of it checked for one instant. At least `rounds.min(20)` rounds,
/// and more until `e` has counted `want_races` raced commits (each round's checkpoints
/// overlap writes, which is what raced ones need). Returns the rounds run.
pub fn one_instant_among_writers(
    e: &Engine,
    buf: &mut Buf,
    pages: usize,
    want_races: u64,
    take: impl Fn(&Engine) -> u64,
) -> usize {
    let base = buf.ptr as usize;
    let rounds: usize = super::env_knob("ICKPT_RACE_ROUNDS", 150);
    let mut round = 0;
    while round < rounds.min(20) || e.stats().raced_commits < want_races {
        assert!(
            round < 20 + rounds * 10,
            "{round} rounds and only {} checkpoints met a write",
            e.stats().raced_commits
        );
        round += 1;
        buf.slice_mut().fill(0);
        let stop = AtomicBool::new(false);
        let passes = AtomicU32::new(0);
        let taken = std::thread::scope(|s| {
            let _stop = StopOnDrop(&stop);
            for t in 0..THREADS {
                let (stop, passes) = (&stop, &passes);
                s.spawn(move || {
                    let mut pass = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        pass += 1;
                        for p in 0..pages {
                            // SAFETY: inside the buffer; each thread owns its bytes.
                            unsafe {
                                std::ptr::write_volatile((base + p * PS + t * 8) as *mut u32, pass)
                            };
                        }
                        passes.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            spin_until("the writers starting", || {
                passes.load(Ordering::Relaxed) >= THREADS as u32
            });
            // Checkpoints until one provably ran while the threads wrote.
            let mut n = 0;
            loop {
                let before = passes.load(Ordering::Relaxed);
                let v = take(e);
                if passes.load(Ordering::Relaxed) != before {
                    break v;
                }
                n += 1;
                assert!(n < 10_000, "no checkpoint in 10,000 overlapped a write");
            }
        });
        buf.slice_mut().fill(0);
        e.restore(taken).unwrap();
        for t in 0..THREADS {
            let col: Vec<u32> = (0..pages)
                .map(|p| {
                    let at = p * PS + t * 8;
                    u32::from_ne_bytes(buf.slice()[at..at + 4].try_into().unwrap())
                })
                .collect();
            let ordered = col.windows(2).all(|w| w[0] >= w[1]);
            assert!(
                ordered && col[0] - col[pages - 1] <= 1,
                "round {round}, version {taken}, thread {t}: pages from different instants: {col:?}"
            );
        }
    }
    round
}
