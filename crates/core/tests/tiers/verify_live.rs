//! `ickpt verify` (and `ls`) on a store whose writer is running: its garbage collection
//! removes old chains while the survey reads them. Found by outside testing: verify reported
//! "version 4 not found" and failed on a healthy store. What was removed is no longer part
//! of the store, not damage; what remains is checked as ever.

use crate::common;
use common::{scratch_dir, Scratch};
use ickpt::store::{version_name, DirStore, Store, StoreFile, StoreId, StoreWriter};
use ickpt::{Config, Engine};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

const PS: usize = 4096;

/// A store read as `verify` reads it, whose first `open` of version `at` runs the writer's
/// garbage collection first: versions `doomed` deleted newest first, as `collect` does.
struct CollectedMidway {
    inner: DirStore,
    dir: PathBuf,
    at: u64,
    doomed: Vec<u64>,
    done: AtomicBool,
}

impl Store for CollectedMidway {
    fn describe(&self, name: &str) -> String {
        self.inner.describe(name)
    }
    fn list(&self) -> io::Result<Vec<String>> {
        self.inner.list()
    }
    fn open(&self, name: &str) -> io::Result<Box<dyn StoreFile>> {
        if name == version_name(self.at) && !self.done.swap(true, Ordering::SeqCst) {
            for &v in self.doomed.iter().rev() {
                std::fs::remove_file(self.dir.join(version_name(v)))?;
            }
        }
        self.inner.open(name)
    }
    fn create(&self, name: &str) -> io::Result<Box<dyn StoreWriter>> {
        self.inner.create(name)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.inner.remove(name)
    }
    fn identity(&self) -> io::Result<Option<StoreId>> {
        self.inner.identity()
    }
    fn set_identity(&self, id: StoreId) -> io::Result<()> {
        self.inner.set_identity(id)
    }
}

/// An engine over a new store in `dir` with one region of `pages` pages, its memory.
fn writer(
    dir: &Path,
    full_every: u32,
    keep_chains: u32,
    pages: usize,
) -> (Engine, &'static mut [u8]) {
    let mut c = Config::new(dir);
    c.full_every = full_every;
    c.keep_chains = keep_chains;
    let e = Engine::open(c).unwrap();
    let p = e.alloc(1, pages * PS).unwrap();
    // SAFETY: alloc returned `pages` pages, mapped until the engine drops; the tests use the
    // slice only while it lives.
    let mem = unsafe { std::slice::from_raw_parts_mut(p, pages * PS) };
    (e, mem)
}

/// Two chains of three (v1-3, v4-6) and a third begun (v7); keep_chains 3 so the writer
/// itself collects nothing here.
fn store_of_three_chains() -> Scratch {
    let dir = scratch_dir("verify-live");
    let (e, mem) = writer(&dir, 3, 3, 8);
    for v in 1..=7u64 {
        mem[(v as usize % 8) * PS] = v as u8;
        assert_eq!(e.checkpoint().unwrap().version, v);
    }
    dir
}

#[test]
fn versions_collected_while_verify_runs_are_not_problems() {
    // The collection lands at every point of the survey: before the doomed chain is read,
    // in the middle of it (its full version already read, its increments gone), after it.
    for at in 1..=7 {
        let dir = store_of_three_chains();
        let store = CollectedMidway {
            inner: DirStore::open_read(&dir).unwrap(),
            dir: dir.clone(),
            at,
            doomed: vec![1, 2, 3],
            done: AtomicBool::new(false),
        };
        let report = ickpt::read::verify::verify_store(&store, &mut |_, _| {}).unwrap();
        assert!(
            report.problems.is_empty(),
            "collection before version {at}: {:?}",
            report.problems
        );
        assert_eq!(report.restorable, report.versions, "collection before {at}");
        assert!(
            report.versions.ends_with(&[4, 5, 6, 7]),
            "{:?}",
            report.versions
        );
    }
}

/// A version missing from the start is still reported: leaving out what a writer removes
/// must not hide a chain that was broken all along. Here a newer chain restores, so the
/// version left without its parent is an orphan (reported, not a failure); without a newer
/// one it is a problem.
#[test]
fn a_version_missing_from_the_start_is_still_reported() {
    let dir = store_of_three_chains();
    std::fs::remove_file(dir.join(version_name(5))).unwrap();
    let verify = || {
        ickpt::read::verify::verify_store(&DirStore::open_read(&dir).unwrap(), &mut |_, _| {})
            .unwrap()
    };
    let report = verify();
    let orphans: Vec<u64> = report.orphans.iter().map(|p| p.version).collect();
    assert_eq!(orphans, vec![6], "{:?}", report.orphans);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.restorable, vec![1, 2, 3, 4, 7]);
    std::fs::remove_file(dir.join(version_name(7))).unwrap();
    let report = verify();
    let broken: Vec<u64> = report.problems.iter().map(|p| p.version).collect();
    assert_eq!(broken, vec![6], "{:?}", report.problems);
    assert!(report.orphans.is_empty(), "{:?}", report.orphans);
}

/// The same with a real writer: an engine keeping one chain checkpoints (and collects) in
/// one thread while verify runs over and over in another; no verify may report a problem.
#[test]
fn verify_beside_a_running_writer_finds_no_problem() {
    let dir = scratch_dir("verify-live-writer");
    let (e, mem) = writer(&dir, 2, 1, 16);
    e.checkpoint().unwrap();
    let stop = AtomicBool::new(false);
    let collected = std::thread::scope(|s| {
        // A failed checkpoint below must still end the verifier's loop.
        let stop_verifier = common::StopOnDrop(&stop);
        let verifier = s.spawn(|| {
            let mut rounds = 0u32;
            while !stop.load(Ordering::SeqCst) || rounds == 0 {
                let store = DirStore::open_read(&dir).unwrap();
                let report = ickpt::read::verify::verify_store(&store, &mut |_, _| {}).unwrap();
                assert!(report.problems.is_empty(), "{:?}", report.problems);
                // (Everything it listed may have been collected before it read it.)
                assert_eq!(report.restorable, report.versions);
                rounds += 1;
            }
            rounds
        });
        let mut collected = 0;
        for v in 0..400usize {
            mem[(v % 16) * PS] = v as u8;
            collected += usize::from(e.checkpoint().unwrap().kind == ickpt::format::Kind::Full);
        }
        drop(stop_verifier);
        let rounds = verifier.join().unwrap();
        eprintln!("{rounds} verifies beside 400 checkpoints");
        collected
    });
    assert!(collected > 100, "the writer never started new chains");
}
