//! `StoreWriter::overwrite_at` (a pre-copied page written again, a header written last) on
//! every store a commit can write to: the bytes read back are the last written at each
//! offset, an overwrite never extends the object, and the fault wrappers count it.

use crate::common;
use common::scratch_dir;
use ickpt::store::{
    CrashFs, CrashOptions, DirStore, Fault, FaultPlan, FaultyStore, RenameMode, Store,
    ThrottledStore,
};
use std::io::ErrorKind;
use std::path::Path;

/// Write 3 chunks, overwrite across the first two, commit, and read back.
fn overwrites_read_back(store: &dyn Store) {
    let mut w = store.create("v00000001.ickpt").unwrap();
    assert!(w.can_overwrite());
    w.write_all(&[1; 100]).unwrap();
    w.write_all(&[2; 100]).unwrap();
    w.overwrite_at(90, &[9; 20]).unwrap();
    let err = w.overwrite_at(150, &[7; 51]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "past the end: {err}");
    w.write_all(&[3; 100]).unwrap();
    w.overwrite_at(0, &[8; 4]).unwrap();
    w.overwrite_at(u64::MAX, &[1]).unwrap_err();
    w.commit().unwrap();
    let f = store.open("v00000001.ickpt").unwrap();
    assert_eq!(f.len(), 300);
    let mut got = vec![0; 300];
    f.read_exact_at(&mut got, 0).unwrap();
    let mut want = [[1u8; 100], [2; 100], [3; 100]].concat();
    want[90..110].fill(9);
    want[..4].fill(8);
    assert_eq!(got, want);
}

#[test]
fn a_directory_store_overwrites_in_place() {
    let d = scratch_dir("overwrite");
    overwrites_read_back(&DirStore::open_write(&d).unwrap());
    let _ = std::fs::remove_dir_all(&*d);
}

#[test]
fn the_simulated_disk_overwrites_in_place() {
    let fs = CrashFs::new(CrashOptions::default());
    overwrites_read_back(&DirStore::open_write_on(&fs, Path::new("/s"), RenameMode::Auto).unwrap());
}

#[test]
fn a_throttled_store_passes_overwrites_on() {
    let fs = CrashFs::new(CrashOptions::default());
    let inner = DirStore::open_write_on(&fs, Path::new("/s"), RenameMode::Auto).unwrap();
    overwrites_read_back(&ThrottledStore::new(inner, 1 << 30));
}

#[test]
fn an_overwrite_past_the_fault_budget_fails_whole() {
    for (fault, errno) in [
        (Fault::NoSpaceAfter(150), Some(libc::ENOSPC)),
        (Fault::IoErrorAfter(150), Some(libc::EIO)),
        (Fault::IoErrorOnceAt(150), Some(libc::EIO)),
        (Fault::CrashAfter(150), None),
    ] {
        let fs = CrashFs::new(CrashOptions::default());
        let inner = DirStore::open_write_on(&fs, Path::new("/s"), RenameMode::Auto).unwrap();
        let plan = FaultPlan::new();
        plan.arm(fault);
        let store = FaultyStore::new(inner, plan);
        let mut w = store.create("v00000001.ickpt").unwrap();
        w.write_all(&[1; 100]).unwrap();
        w.overwrite_at(0, &[2; 40]).unwrap();
        // 140 bytes taken: 20 more pass the budget.
        let err = w.overwrite_at(50, &[3; 20]).unwrap_err();
        assert_eq!(err.raw_os_error(), errno, "{fault:?}: {err}");
        if fault == Fault::IoErrorOnceAt(150) {
            // Transient: the next one goes through, and nothing of the failed one landed.
            w.overwrite_at(60, &[4; 5]).unwrap();
            w.commit().unwrap();
            let f = store.open("v00000001.ickpt").unwrap();
            let mut got = vec![0; 100];
            f.read_exact_at(&mut got, 0).unwrap();
            let mut want = vec![1u8; 100];
            want[..40].fill(2);
            want[60..65].fill(4);
            assert_eq!(got, want);
        } else {
            assert!(w.write_all(&[1]).is_err(), "{fault:?}: the writer is spent");
        }
    }
}

#[test]
fn the_discarding_store_checks_overwrites_and_keeps_nothing() {
    let fs = CrashFs::new(CrashOptions::default());
    let inner = DirStore::open_write_on(&fs, Path::new("/s"), RenameMode::Auto).unwrap();
    let store = ickpt::store::DiscardStore::new(inner);
    let mut w = store.create("v00000001.ickpt").unwrap();
    assert!(w.can_overwrite());
    w.write_all(&[1; 100]).unwrap();
    w.overwrite_at(60, &[2; 40]).unwrap();
    let err = w.overwrite_at(61, &[2; 40]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    w.commit().unwrap();
    assert!(store.list().unwrap().iter().all(|n| !n.ends_with(".ickpt")));
}
