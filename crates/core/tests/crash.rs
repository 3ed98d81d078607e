//! Kill a writer with SIGKILL at random moments during checkpoint commits, then check that
//! every listed version verifies and the newest restores exactly. Every other trial runs in
//! async mode on slow storage, so the kill lands in a commit that overlaps the next
//! iteration's writes. ICKPT_CRASH_TRIALS sets the number of trials (default 50),
//! ICKPT_CRASH_SEED the seed.

mod common;
use common::scratch_dir;
use ickpt::read::catalog;
use ickpt::store::DirStore;
use ickpt::{Config, Engine};
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PS: usize = 4096;
const PAGES: usize = 256;
const ITERATIONS: u64 = 40;

/// Iteration `i`'s writes, the same in the child and in the model.
fn step(mem: &mut [u8], i: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(i);
    for k in 0..rng.gen_range(1..48) {
        let page = rng.gen_range(0..PAGES);
        let at = page * PS + rng.gen_range(0..PS - 64);
        mem[at..at + 64].fill((i as u8) ^ (k as u8));
    }
}

fn model(version: u64) -> Vec<u8> {
    let mut m = vec![0u8; PAGES * PS];
    for i in 1..=version {
        step(&mut m, i);
    }
    m
}

fn engine(dir: &std::path::Path) -> Engine {
    let mut c = Config::new(dir);
    c.full_every = 4;
    c.keep_chains = 1;
    Engine::open(c).unwrap()
}

/// The writer the parent kills. Ignored in normal runs: the parent re-executes this binary
/// with `--ignored` to run it as a child process.
#[test]
#[ignore = "the crash test's child process"]
fn crash_child() {
    let dir = std::env::var("ICKPT_CRASH_CHILD_DIR").expect("run by the crash test");
    let e = engine(dir.as_ref());
    let mem = e.alloc(1, PAGES * PS).unwrap();
    // SAFETY: `mem` is PAGES*PS bytes from alloc, live while `e` lives.
    let mem = unsafe { std::slice::from_raw_parts_mut(mem, PAGES * PS) };
    let out = std::io::stdout();
    let sync = e.config().mode == ickpt::format::CommitMode::Sync;
    for i in 1..=ITERATIONS {
        step(mem, i);
        writeln!(out.lock(), "begin {i}").unwrap();
        let info = e.checkpoint().unwrap();
        assert_eq!(info.version, i);
        // Async: checkpoint i returns once i-1 is committed; i commits during step i+1.
        let committed = if sync { i } else { i - 1 };
        writeln!(out.lock(), "committed {committed}").unwrap();
    }
    e.wait().unwrap();
    writeln!(out.lock(), "committed {ITERATIONS}").unwrap();
}

#[test]
fn sigkill_during_commits_keeps_the_last_committed_version() {
    let trials: u64 = common::env_knob("ICKPT_CRASH_TRIALS", 50);
    let seed: u64 = common::env_knob("ICKPT_CRASH_SEED", 20261121);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let exe = std::env::current_exe().unwrap();
    for trial in 0..trials {
        let dir = scratch_dir("crash");
        let kill_at = rng.gen_range(1..=ITERATIONS / 2);
        // Random jitter after the "begin" line so the kill lands anywhere in the commit:
        // creating, writing, fsync, rename or directory sync. Not synchronisation: any
        // landing point is a valid trial.
        let jitter = Duration::from_micros(rng.gen_range(0..4000));
        let mode = if trial % 2 == 0 { "sync" } else { "async" };
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("ICKPT_CRASH_CHILD_DIR", &dir)
            .env("ICKPT_MODE", mode)
            .env("ICKPT_COW_BYTES", "8K")
            .env("ICKPT_BANDWIDTH", if mode == "async" { "64M" } else { "0" })
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut committed = 0u64;
        let mut begun = 0u64;
        // The child runs ahead of what we have read, so keep reading after the kill: every
        // line it wrote before dying is still in the pipe.
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut killed = false;
        for line in lines {
            let line = line.unwrap();
            if let Some(n) = line.strip_prefix("committed ") {
                committed = n.parse().unwrap();
            } else if let Some(n) = line.strip_prefix("begin ") {
                begun = n.parse().unwrap();
                if begun >= kill_at && !killed {
                    let t = Instant::now();
                    while t.elapsed() < jitter {
                        std::hint::spin_loop();
                    }
                    child.kill().unwrap();
                    killed = true;
                }
            }
        }
        child.wait().unwrap();

        let ctx =
            format!("trial {trial} ({mode}, seed {seed}, kill after begin {kill_at} + {jitter:?})");
        // The child must really have run up to the kill point; otherwise every check below
        // would pass vacuously on an empty store.
        assert!(
            begun >= kill_at,
            "{ctx}: the child only reached begin {begun}"
        );
        let store = DirStore::open_read(&dir).unwrap();
        let report = ickpt::read::verify::verify_store(&store, &mut |_, _| {}).unwrap();
        assert!(report.problems.is_empty(), "{ctx}: {:?}", report.problems);
        let versions = catalog::versions(&store).unwrap();
        let latest = versions.last().copied().unwrap_or(0);
        assert!(
            latest >= committed && latest <= begun,
            "{ctx}: latest {latest}, committed {committed}, begun {begun}"
        );
        if latest == 0 {
            continue;
        }
        let e = engine(&dir);
        let mem = e.alloc(1, PAGES * PS).unwrap();
        e.restore(latest).unwrap();
        // SAFETY: `mem` is PAGES*PS bytes from alloc, live while `e` lives.
        let got = unsafe { std::slice::from_raw_parts(mem, PAGES * PS) };
        assert!(
            got == &model(latest)[..],
            "{ctx}: version {latest} restored wrong bytes"
        );
        drop(e);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
