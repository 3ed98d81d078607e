//! Power loss at every file-system operation of every commit, on a simulated disk that
//! keeps only what was made durable (`CrashFs`): whatever survives, the newest version that
//! restores holds exactly the memory of the last checkpoint acknowledged before the cut, or
//! of the one in flight, never an older one, never a wrong byte.
//!
//! A scenario writes memory and checkpoints (full and incremental, sync or async with writes
//! while the commit runs). It runs once to count its operations, then once per operation k
//! with the power cut at k; each disk left by the cut is rebuilt under several seeds (which
//! unsynced changes survive) and opened by a fresh engine. `ICKPT_POWER_SEEDS` sets seeds
//! per cut (default 4), `ICKPT_POWER_STEPS` checkpoints per scenario (default 8).
//!
//! The same check run on a disk that ignores file fsyncs, or directory fsyncs, must find a
//! lost checkpoint: the test has teeth.

use crate::common;
use common::{env_knob, Buf};
use ickpt::format::CommitMode;
use ickpt::read::catalog;
use ickpt::store::{CrashFs, CrashOptions, DirStore, RenameMode};
use ickpt::{Config, Engine};
use std::path::Path;
use std::sync::Arc;

const PS: usize = 4096;
/// Two regions, so a version has a region table of two; sizes in pages.
const REGIONS: [(u64, usize); 2] = [(1, 6), (2, 2)];
const DIR: &str = "/power-loss";

struct Memory {
    bufs: Vec<Buf>,
}

impl Memory {
    fn new() -> Memory {
        Memory {
            bufs: REGIONS
                .iter()
                .map(|&(_, pages)| Buf::new(pages * PS))
                .collect(),
        }
    }

    fn protect(&self, e: &Engine) -> Result<(), ickpt::ProtectError> {
        for (b, &(id, _)) in self.bufs.iter().zip(&REGIONS) {
            // SAFETY: the buffers outlive every engine they are protected in (engines are
            // dropped first).
            unsafe { e.protect(id, b.ptr, b.len)? };
        }
        Ok(())
    }

    /// Step `i`'s writes: a few pages of each region, different every step, so that each
    /// checkpoint's memory is unique.
    fn write(&mut self, i: u64, salt: u8) {
        for (r, b) in self.bufs.iter_mut().enumerate() {
            let pages = b.len / PS;
            let s = b.slice_mut();
            for k in 0..=(i as usize % 3) {
                let page = (i as usize * 5 + k * 3 + r) % pages;
                let at = page * PS + (i as usize * 97 + k * 13) % (PS - 8);
                s[at..at + 8].copy_from_slice(&(i * 1000 + k as u64 + salt as u64).to_le_bytes());
            }
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        self.bufs.iter().flat_map(|b| b.slice().to_vec()).collect()
    }
}

#[derive(Clone, Copy, Debug)]
struct Scenario {
    mode: CommitMode,
    steps: u64,
    opts: CrashOptions,
    /// Pre-copy a pass's pages into the next version's file before each checkpoint, some
    /// written again after (PRWIP): the file is then overwritten in place.
    precopy: bool,
}

fn config(s: Scenario) -> Config {
    let mut c = Config::new(DIR);
    c.mode = s.mode;
    if s.precopy {
        c.precopy = ickpt::policy::prwip::Strategy::Blind;
        c.checkpoint_interval = Some(std::time::Duration::from_secs(10));
        c.precopy_thread = false;
    }
    // Full, incremental, incremental, full, ...; older chains are deleted, so commits
    // remove files too.
    c.full_every = 3;
    c.keep_chains = 1;
    c
}

fn open_engine(fs: &CrashFs, s: Scenario) -> Result<Engine, String> {
    let store = DirStore::open_write_on(fs, Path::new(DIR), RenameMode::Auto)
        .map_err(|e| format!("open the store: {e}"))?;
    Engine::with_store(config(s), Arc::new(store)).map_err(|e| format!("open an engine: {e}"))
}

/// What the program knew when the power went.
struct Run {
    /// (step, memory) of the last checkpoint acknowledged as durable.
    acked: Option<(u64, Vec<u8>)>,
    /// (step, memory) of the checkpoint being committed at the cut.
    in_flight: Option<(u64, Vec<u8>)>,
}

/// Run the scenario on `fs` until the power fails (or to its end).
fn run(s: Scenario, fs: &CrashFs) -> Run {
    let mut r = Run {
        acked: None,
        in_flight: None,
    };
    let mut mem = Memory::new();
    let Ok(e) = open_engine(fs, s) else {
        return r;
    };
    if mem.protect(&e).is_err() {
        return r;
    }
    for i in 1..=s.steps {
        mem.write(i, 0);
        if s.precopy && e.precopy_pass() {
            // Some of the pages just pre-copied, written again: conflicts.
            mem.write(i, 2);
        }
        r.in_flight = Some((i, mem.snapshot()));
        if e.checkpoint().is_err() {
            break;
        }
        if s.mode == CommitMode::Async {
            // Written while the commit runs: never part of this version.
            mem.write(i, 1);
            if e.wait().is_err() {
                break;
            }
        }
        r.acked = r.in_flight.take();
    }
    drop(e);
    r
}

/// Restore the newest version that restores on the disk `fs` and compare.
fn check(s: Scenario, fs: &CrashFs, r: &Run) -> Result<(), String> {
    let mem = Memory::new();
    let e = open_engine(fs, s)?;
    mem.protect(&e).map_err(|e| e.to_string())?;
    let versions = catalog::versions(e.store()).map_err(|e| e.to_string())?;
    let step_of = |m: &[u8]| {
        [&r.acked, &r.in_flight]
            .into_iter()
            .flatten()
            .find(|(_, snap)| snap == m)
            .map(|(i, _)| *i)
    };
    for &v in versions.iter().rev() {
        if e.restore(v).is_err() {
            continue;
        }
        return match step_of(&mem.snapshot()) {
            Some(_) => Ok(()),
            None => Err(format!(
                "lost: version {v}, the newest that restores, is neither the acknowledged \
                 checkpoint (step {:?}) nor the one in flight (step {:?})",
                r.acked.as_ref().map(|a| a.0),
                r.in_flight.as_ref().map(|a| a.0)
            )),
        };
    }
    match &r.acked {
        None => Ok(()),
        Some((i, _)) => Err(format!(
            "lost: no version restores (of {versions:?}), but step {i} was acknowledged"
        )),
    }
}

/// Cut the power at every operation of the scenario, under `seeds` rebuilds each; the
/// failures found.
fn every_cut(s: Scenario, seeds: u64) -> Vec<String> {
    let whole = CrashFs::new(s.opts);
    let done = run(s, &whole);
    assert_eq!(
        done.acked.map(|a| a.0),
        Some(s.steps),
        "{s:?}: the scenario runs to its end without a cut"
    );
    let total = whole.ops();
    let mut failures = Vec::new();
    for k in 0..=total {
        let fs = CrashFs::new(s.opts);
        fs.cut_power_at(k);
        let r = run(s, &fs);
        for seed in 0..seeds {
            let after = fs.after_power_loss(k * 7919 + seed);
            if let Err(why) = check(s, &after, &r) {
                failures.push(format!("{s:?}, cut at op {k}/{total}, seed {seed}: {why}"));
            }
        }
    }
    failures
}

fn scenario(mode: CommitMode, opts: CrashOptions) -> Scenario {
    Scenario {
        mode,
        steps: env_knob("ICKPT_POWER_STEPS", 8),
        opts,
        precopy: false,
    }
}

fn assert_survives(s: Scenario, seeds: u64) {
    let failures = every_cut(s, seeds);
    assert!(
        failures.is_empty(),
        "{} failures, first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(5)].join("\n")
    );
}

fn seeds() -> u64 {
    env_knob("ICKPT_POWER_SEEDS", 4)
}

#[test]
fn sync_checkpoints_survive_power_loss_at_every_operation() {
    assert_survives(scenario(CommitMode::Sync, CrashOptions::default()), seeds());
}

#[test]
fn async_checkpoints_survive_power_loss_at_every_operation() {
    assert_survives(
        scenario(CommitMode::Async, CrashOptions::default()),
        seeds(),
    );
}

#[test]
fn precopied_checkpoints_survive_power_loss_at_every_operation() {
    for mode in [CommitMode::Sync, CommitMode::Async] {
        let s = Scenario {
            precopy: true,
            ..scenario(mode, CrashOptions::default())
        };
        assert_survives(s, seeds());
    }
}

#[test]
fn link_and_rename_fallbacks_survive_power_loss_at_every_operation() {
    for opts in [
        CrashOptions {
            no_rename_noreplace: true,
            ..Default::default()
        },
        CrashOptions {
            no_rename_noreplace: true,
            no_link: true,
            ..Default::default()
        },
    ] {
        assert_survives(scenario(CommitMode::Sync, opts), seeds().div_ceil(2));
    }
}

/// The check finds a lost acknowledged checkpoint on a disk that `opts` makes unsafe.
fn catches(opts: CrashOptions) {
    for mode in [CommitMode::Sync, CommitMode::Async] {
        let failures = every_cut(scenario(mode, opts), seeds());
        assert!(
            failures.iter().any(|f| f.contains("lost")),
            "{mode:?} {opts:?}: no lost checkpoint found, so the test would not catch a store \
             that forgets this fsync"
        );
    }
}

#[test]
fn without_file_fsync_a_lost_checkpoint_is_caught() {
    catches(CrashOptions {
        skip_file_sync: true,
        ..Default::default()
    });
}

#[test]
fn without_directory_fsync_a_lost_checkpoint_is_caught() {
    catches(CrashOptions {
        skip_dir_sync: true,
        ..Default::default()
    });
}
