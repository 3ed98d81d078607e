//! The restart bound in a running engine: a chain ends before a restart from it would read
//! more than the bound times its full version, with the increment's size known from what
//! tracking shows written or from the pages pre-copied for it, and nothing is pre-copied for
//! a version that will be full; an engine that restored a chain carries on bounding it;
//! without a bound the same writes make increments.

use crate::common;
use common::{noise, scratch_dir, Buf};
use ickpt::format::CommitMode;
use ickpt::format::Kind::{self, Full, Incremental};
use ickpt::store::version_name;
use ickpt::{Config, Engine};
use std::path::Path;

const PS: usize = 4096;
const PAGES: usize = 64;
/// Pages rewritten per step: the whole-process benchmark's 1%, 10% and 50% steps, scaled to
/// 64 pages (a step of 2 rather than 1, so that no step is under 3% of a full version).
const STEPS: [usize; 3] = [2, 8, 32];

fn config(dir: &Path, bound: f64) -> Config {
    let mut c = Config::new(dir);
    c.full_every = 1000;
    c.restart_bound = bound;
    c
}

/// Rewrite `pages` pages (random bytes, so nothing compresses), then checkpoint; with
/// `precopy`, `ickpt run`'s way: copy them first. The version, its kind and the pages
/// copied before it.
fn step(e: &Engine, buf: &mut Buf, pages: usize, seed: u64, precopy: bool) -> (u64, Kind, u64) {
    noise(&mut buf.slice_mut()[..pages * PS], seed);
    let copied = if precopy { e.precopy_written() } else { 0 };
    let info = e.checkpoint().unwrap();
    let info = e.wait().unwrap().unwrap_or(info);
    (info.version, info.kind, copied)
}

fn file_len(dir: &Path, v: u64) -> u64 {
    std::fs::metadata(dir.join(version_name(v))).unwrap().len()
}

/// The benchmark's chain: a full version, then the steps. The kinds, the versions and the
/// pages copied before each.
fn chain(dir: &Path, bound: f64, precopy: bool) -> (Vec<Kind>, Vec<u64>, Vec<u64>) {
    let mut c = config(dir, bound);
    if precopy {
        c.mode = CommitMode::Async;
        c.others_stopped = true;
    }
    let e = Engine::open(c).unwrap();
    let mut buf = Buf::new(PAGES * PS);
    // SAFETY: the buffer outlives the engine (dropped first at the end of this function).
    unsafe { e.protect(1, buf.ptr, PAGES * PS).unwrap() };
    let mut out = vec![step(&e, &mut buf, PAGES, 1, false)];
    for (i, &pages) in STEPS.iter().enumerate() {
        out.push(step(&e, &mut buf, pages, 2 + i as u64, precopy));
    }
    drop(e);
    let kinds = out.iter().map(|o| o.1).collect();
    let versions = out.iter().map(|o| o.0).collect();
    (kinds, versions, out.iter().map(|o| o.2).collect())
}

#[test]
fn a_chain_ends_where_a_restart_would_read_past_the_bound() {
    // Full + 2 + 8 pages is 1.16 of the full version; 32 more would be 1.66. Pre-copy copies
    // the increments' pages, and none for a version that will be full. Without a bound the
    // same writes extend the chain.
    let cases = [
        (1.5, [Full, Incremental, Incremental, Full], [0, 2, 8, 0]),
        (
            0.0,
            [Full, Incremental, Incremental, Incremental],
            [0, 2, 8, 32],
        ),
    ];
    for precopy in [false, true] {
        for (bound, want_kinds, want_copied) in cases {
            let dir = scratch_dir("restart-bound");
            let (kinds, versions, copied) = chain(&dir, bound, precopy);
            let what = format!("bound {bound}, pre-copy {precopy}");
            assert_eq!(kinds, want_kinds, "{what}");
            let want_copied = if precopy { want_copied } else { [0; 4] };
            assert_eq!(copied, want_copied, "{what}");
            // What the increments made a restart read stayed within the bound.
            let read: u64 = versions[..3].iter().map(|&v| file_len(&dir, v)).sum();
            assert!(
                read as f64 <= 1.5 * file_len(&dir, versions[0]) as f64,
                "{what}: {read}"
            );
        }
    }
}

#[test]
fn an_engine_that_restored_a_chain_bounds_it_on() {
    let dir = scratch_dir("restart-bound-restored");
    let mut buf = Buf::new(PAGES * PS);
    {
        let e = Engine::open(config(&dir, 1.5)).unwrap();
        // SAFETY: the buffer outlives the engine, dropped at the end of this block.
        unsafe { e.protect(1, buf.ptr, PAGES * PS).unwrap() };
        step(&e, &mut buf, PAGES, 1, false);
        // Full + 8 + 8 pages: 1.25 of the full version.
        for seed in [2, 3] {
            assert_eq!(step(&e, &mut buf, 8, seed, false).1, Incremental);
        }
    }
    let e = Engine::open(config(&dir, 1.5)).unwrap();
    // SAFETY: as above, until the end of the test.
    unsafe { e.protect(1, buf.ptr, PAGES * PS).unwrap() };
    assert_eq!(e.restore_latest().unwrap().unwrap().version, 3);
    // 1.31 with 4 pages more; 16 after them would make it 1.56.
    assert_eq!(step(&e, &mut buf, 4, 4, false).1, Incremental);
    assert_eq!(step(&e, &mut buf, 16, 5, false).1, Full);
}

#[test]
fn a_bound_below_one_is_refused() {
    let dir = scratch_dir("restart-bound-refused");
    for bad in [0.5, -1.0, f64::INFINITY, f64::NAN] {
        let e = Engine::open(config(&dir, bad));
        let msg = e.err().expect("refused").to_string();
        assert!(msg.contains("restart_bound"), "{bad}: {msg}");
    }
}

/// Under `ickpt run` the kind is decided by `precopy_written`, from what was written before
/// the copy, and the checkpoint takes it: the stop scans no page table to decide again. What
/// the program writes between the copy and the stop is left out (docs/design.md, "The
/// restart bound").
#[test]
fn an_estimate_of_nothing_copied_takes_no_scan() {
    let dir = scratch_dir("restart-bound-idle");
    let mut c = config(&dir, 1.5);
    c.mode = CommitMode::Async;
    c.others_stopped = true;
    let e = Engine::open(c).unwrap();
    let mut buf = Buf::new(PAGES * PS);
    // SAFETY: the buffer outlives the engine (dropped first at the end of the test).
    unsafe { e.protect(1, buf.ptr, PAGES * PS).unwrap() };
    step(&e, &mut buf, PAGES, 1, false);
    for seed in [2, 3] {
        assert_eq!(step(&e, &mut buf, 8, seed, true).1, Incremental);
    }
    // Nothing written, nothing copied; then 20 pages written before the stop, which a scan
    // would have counted (1.25 + 0.31 of the full version: full).
    assert_eq!(e.precopy_written(), 0);
    noise(&mut buf.slice_mut()[..20 * PS], 4);
    let info = e.checkpoint().unwrap();
    assert_eq!(e.wait().unwrap().unwrap_or(info).kind, Incremental);
    // The next estimate counts what is written (pre-copy's own scan, before it copies): full,
    // and so nothing copied for it.
    let (_, kind, copied) = step(&e, &mut buf, 20, 5, true);
    assert_eq!((kind, copied), (Full, 0));
    drop(e);
}
