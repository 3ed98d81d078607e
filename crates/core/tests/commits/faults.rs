//! A failed checkpoint returns an error, never harms committed versions, and loses no dirty
//! page: the next checkpoint that succeeds holds everything written since the last commit.

use crate::common;
use common::{scratch_dir, Buf};
use ickpt::format::Kind;
use ickpt::read::catalog;
use ickpt::store::{DirStore, Fault, FaultPlan, FaultyStore, Store};
use ickpt::{CheckpointError, Config, Engine, FileError};
use std::sync::Arc;

const PS: usize = 4096;

fn open(dir: &std::path::Path, plan: &Arc<FaultPlan>) -> Engine {
    let store: Arc<dyn Store> = Arc::new(FaultyStore::new(
        DirStore::open_write(dir).unwrap(),
        plan.clone(),
    ));
    let mut c = Config::new(dir);
    // Raw pages: the faults are placed by byte offset within the file's page data, which
    // compression would shrink past them.
    c.compression = ickpt::Compression::Off;
    Engine::with_store(c, store).unwrap()
}

fn temp_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".tmp-")
        })
        .count()
}

fn check_fault(fault: Fault, expect: fn(&CheckpointError) -> bool, first_fails: bool) {
    check_fault_in(fault, expect, first_fails, 32);
}

/// A region of `pages` pages; above 64 (a batch) every page is written before the failing
/// checkpoint, so a sync commit writes it in many batches.
fn check_fault_in(
    fault: Fault,
    expect: fn(&CheckpointError) -> bool,
    first_fails: bool,
    pages: usize,
) {
    // A commit that never ends hangs the test.
    let _watchdog = common::watchdog("a store fault", 120);
    let dir = scratch_dir("faults");
    let plan = FaultPlan::new();
    let mut buf = Buf::new(pages * PS);
    let e = open(&dir, &plan);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    buf.slice_mut().fill(1);
    let mut committed = Vec::new();
    let mut dirty = vec![3, 20, 31];
    if !first_fails {
        committed.push(e.checkpoint().unwrap().version);
        buf.slice_mut()[3 * PS] = 2;
        buf.slice_mut()[20 * PS + 5] = 3;
        if pages > 64 {
            dirty = (0..pages).collect();
            for p in &dirty {
                buf.slice_mut()[p * PS + 9] = *p as u8;
            }
        }
    }
    plan.arm(fault);
    let err = e.checkpoint().unwrap_err();
    assert!(expect(&err), "{fault:?}: unexpected error {err}");
    assert!(
        err.to_string().contains(&dir.display().to_string()),
        "error names the file: {err}"
    );
    assert_eq!(
        catalog::versions(e.store()).unwrap(),
        committed,
        "{fault:?}: nothing new listed"
    );
    let report = ickpt::read::verify::verify_store(e.store(), &mut |_, _| {}).unwrap();
    assert!(
        report.problems.is_empty(),
        "{fault:?}: {:?}",
        report.problems
    );
    let left = usize::from(matches!(fault, Fault::CrashAfter(_)));
    assert_eq!(
        temp_files(&dir),
        left,
        "{fault:?}: only an abandoned writer leaves a temporary"
    );

    buf.slice_mut()[31 * PS] = 4;
    let retry = e.checkpoint().unwrap();
    // The failed attempt's number is never reused: its commit may have failed after the
    // rename, and a committed name is never replaced.
    assert_eq!(
        retry.version,
        committed.last().copied().unwrap_or(0) + 2,
        "{fault:?}"
    );
    if first_fails {
        assert_eq!(retry.kind, Kind::Full);
    } else {
        assert_eq!(
            (retry.kind, retry.pages),
            (Kind::Incremental, dirty.len() as u64),
            "{fault:?}: dirty pages kept"
        );
    }
    let expect_mem = buf.slice().to_vec();
    drop(e);
    assert_eq!(
        temp_files(&dir),
        left,
        "{fault:?}: an abandoned temporary waits for a reopen"
    );

    buf.slice_mut().fill(0);
    let e = Engine::open(Config::new(&dir)).unwrap();
    assert_eq!(
        temp_files(&dir),
        0,
        "{fault:?}: opening the store removes temporaries"
    );
    // SAFETY: as above.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    e.restore(e.latest().unwrap().unwrap()).unwrap();
    assert!(
        buf.slice() == &expect_mem[..],
        "{fault:?}: restored bytes differ"
    );
}

fn no_space(e: &CheckpointError) -> bool {
    matches!(e, CheckpointError::File(FileError::NoSpace { .. }))
}
fn io(e: &CheckpointError) -> bool {
    matches!(e, CheckpointError::File(FileError::Io { .. }))
}

#[test]
fn enospc_at_every_stage_of_the_file() {
    // In the header, in the page data, and at the very end of the file.
    for at in [0, 100, PS as u64 + 10, 2 * PS as u64, 3 * PS as u64 + 7] {
        check_fault(Fault::NoSpaceAfter(at), no_space, false);
    }
    check_fault(Fault::NoSpaceAfter(10), no_space, true);
}

#[test]
fn eio_and_failed_fsync() {
    check_fault(Fault::IoErrorAfter(PS as u64 + 1), io, false);
    // Later writes succeed; the committer wrote the batch itself and stops there.
    check_fault(Fault::IoErrorOnceAt(PS as u64 + 1), io, false);
    check_fault(Fault::CommitFails, io, false);
    check_fault(Fault::CommitFails, io, true);
}

#[test]
fn a_failure_in_a_commit_of_many_batches() {
    // 2048 pages are 32 batches after a one-page header: fail in an early one (the fourth),
    // and in the last.
    let early = 4 * (256 << 10) + 100;
    check_fault_in(Fault::NoSpaceAfter(early), no_space, false, 2048);
    check_fault_in(Fault::NoSpaceAfter(early), no_space, true, 2048);
    check_fault_in(Fault::NoSpaceAfter(2048 * PS as u64), no_space, false, 2048);
    check_fault_in(Fault::IoErrorAfter(early), io, false, 2048);
    // Later writes succeed: only a commit that stops at the first error fails.
    check_fault_in(Fault::IoErrorOnceAt(early), io, false, 2048);
    check_fault_in(Fault::IoErrorOnceAt(early), io, true, 2048);
    // The last batch: written as the commit ends.
    check_fault_in(Fault::IoErrorOnceAt(2048 * PS as u64), io, false, 2048);
    check_fault_in(Fault::CrashAfter(early), io, false, 2048);
    check_fault_in(Fault::CommitFails, io, false, 2048);
}

#[test]
fn abandoned_writer_leaves_only_a_temporary_file() {
    check_fault(Fault::CrashAfter(2 * PS as u64), io, false);
}

#[test]
fn env_switch_parses() {
    assert_eq!(Fault::parse("enospc@12"), Some(Fault::NoSpaceAfter(12)));
    assert_eq!(Fault::parse("eio@0"), Some(Fault::IoErrorAfter(0)));
    assert_eq!(Fault::parse("eio-once@7"), Some(Fault::IoErrorOnceAt(7)));
    assert_eq!(Fault::parse("commit-eio"), Some(Fault::CommitFails));
    assert_eq!(Fault::parse("crash@5"), Some(Fault::CrashAfter(5)));
    assert_eq!(Fault::parse("bogus"), None);
}
