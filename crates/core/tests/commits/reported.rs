//! Regions whose owner reports its writes (`Engine::protect_reported`, `ickpt run`'s own
//! buffers): no backend tracks them, a version holds exactly the pages reported since the
//! one before, and a restore makes what it wrote the baseline.

use crate::common;
use common::{scratch_dir, Buf};
use ickpt::format::{CommitMode, Kind};
use ickpt::{Config, Engine};

const PS: usize = 4096;
const PAGES: usize = 32;

fn fill_page(buf: &Buf, page: usize, byte: u8) {
    // SAFETY: inside `buf`; no commit needs the page (the caller waited for the last one).
    unsafe { std::ptr::write_bytes(buf.ptr.add(page * PS), byte, PS) };
}

/// The bytes of each page, one per page (the test fills pages whole).
fn pages_of(buf: &Buf) -> Vec<u8> {
    (0..PAGES).map(|p| buf.slice()[p * PS]).collect()
}

fn checkpoint(e: &Engine, mode: CommitMode) -> ickpt::CheckpointInfo {
    let info = e.checkpoint().unwrap();
    match mode {
        CommitMode::Sync => info,
        CommitMode::Async => e.wait().unwrap().expect("the commit just begun"),
    }
}

fn reported_pages_are_the_versions(mode: CommitMode, name: &str) {
    let dir = scratch_dir(name);
    let mut c = Config::new(&dir);
    c.mode = mode;
    // The buffer first: dropped after the engine.
    let mut buf = Buf::new(PAGES * PS);
    let e = Engine::open(c).unwrap();
    buf.slice_mut().fill(1);
    // SAFETY: `buf` outlives the engine; this thread writes it only between commits.
    let written = unsafe { e.protect_reported(7, buf.ptr, PAGES * PS).unwrap() };

    let first = checkpoint(&e, mode);
    assert_eq!((first.kind, first.pages), (Kind::Full, PAGES as u64));

    fill_page(&buf, 3, 2);
    fill_page(&buf, 17, 2);
    written.written(3 * PS, PS);
    // Two pages in one report, the second only by its first byte.
    fill_page(&buf, 20, 4);
    fill_page(&buf, 21, 4);
    written.written(20 * PS + 100, PS);
    written.written(17 * PS, 1);
    // Not reported: no backend tracks the region, so the version leaves it out.
    fill_page(&buf, 9, 5);
    let second = checkpoint(&e, mode);
    assert_eq!((second.kind, second.pages), (Kind::Incremental, 4));

    buf.slice_mut().fill(9);
    e.restore(second.version).unwrap();
    let mut want = vec![1u8; PAGES];
    want[3] = 2;
    want[17] = 2;
    want[20] = 4;
    want[21] = 4;
    assert_eq!(pages_of(&buf), want);

    // A restore writes the region without a report, and its bytes are the next baseline:
    // the next version holds what is reported after it, and nothing the restore wrote.
    fill_page(&buf, 30, 6);
    written.written(30 * PS, PS);
    let third = checkpoint(&e, mode);
    assert_eq!((third.kind, third.pages), (Kind::Incremental, 1));
    buf.slice_mut().fill(9);
    e.restore(third.version).unwrap();
    want[30] = 6;
    assert_eq!(pages_of(&buf), want);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sync_version_holds_the_pages_reported() {
    reported_pages_are_the_versions(CommitMode::Sync, "reported-sync");
}

#[test]
fn an_async_version_holds_the_pages_reported() {
    reported_pages_are_the_versions(CommitMode::Async, "reported-async");
}
