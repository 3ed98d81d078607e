//! Tags, global-commit records and discarding versions: the core's part of coordinated
//! (MPI) checkpoints. Each test checks bytes restored against bytes written.

use crate::common;
use common::{scratch_dir, Buf};
use ickpt::format::{global_name, CommitMode, Kind};
use ickpt::{Config, Engine, Error, GlobalError, ReadError};
use std::path::Path;

const PS: usize = 4096;
const PAGES: usize = 16;

/// An engine over `dir` with region 1 protected on `buf`.
fn engine(dir: &Path, buf: &Buf, tune: impl FnOnce(&mut Config)) -> Engine {
    let mut c = Config::new(dir);
    tune(&mut c);
    let e = Engine::open(c).unwrap();
    // SAFETY: `buf` is mapped and outlives the engine (callers drop the engine first).
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    e
}

/// Write `step` into page `step % PAGES` and return what memory then holds.
fn step(buf: &mut Buf, step: u64) -> Vec<u8> {
    let p = (step as usize) % PAGES;
    buf.slice_mut()[p * PS..(p + 1) * PS].fill(step as u8);
    buf.slice().to_vec()
}

#[test]
fn tags_are_stored_and_restored_in_both_modes() {
    for mode in [CommitMode::Sync, CommitMode::Async] {
        let dir = scratch_dir("tags");
        let mut buf = Buf::new(PAGES * PS);
        let mut images = Vec::new();
        {
            let e = engine(&dir, &buf, |c| c.mode = mode);
            for i in 1..=3u64 {
                images.push(step(&mut buf, i));
                let info = e.checkpoint_tagged(1000 + i).unwrap();
                assert_eq!(info.tag, 1000 + i);
                e.wait().unwrap();
            }
            images.push(step(&mut buf, 4));
            assert_eq!(e.checkpoint().unwrap().tag, 0, "no tag given: 0");
            e.wait().unwrap();
        }
        buf.slice_mut().fill(0xFF);
        let e = engine(&dir, &buf, |_| {});
        for (v, want_tag) in [(1, 1001), (2, 1002), (3, 1003), (4, 0)] {
            assert_eq!(e.version_tag(v).unwrap(), want_tag, "{mode:?} v{v}");
        }
        let r = e.restore_latest().unwrap().unwrap();
        assert_eq!((r.version, r.tag), (4, 0));
        let r = e.restore(2).unwrap();
        assert_eq!(r.tag, 1002);
        assert!(buf.slice() == &images[1][..], "{mode:?}: version 2's bytes");
        assert!(matches!(
            e.version_tag(9),
            Err(ReadError::NotFound { version: 9, .. })
        ));
        drop(e);
    }
}

#[test]
fn global_records_name_versions_and_only_the_newest_two_stay() {
    let dir = scratch_dir("global-records");
    let mut buf = Buf::new(PAGES * PS);
    let e = engine(&dir, &buf, |_| {});
    assert_eq!(e.global_latest().unwrap(), None);
    for g in 1..=4u64 {
        step(&mut buf, g);
        let v = e.checkpoint().unwrap().version;
        e.global_commit(g, v).unwrap();
        let newest = e.global_latest().unwrap().unwrap();
        assert_eq!((newest.global, newest.version), (g, v));
    }
    // Records 3 and 4 stay; 1 and 2 are gone from the directory.
    assert!(e.global_version(2).unwrap().is_none());
    assert_eq!(e.global_version(3).unwrap().unwrap().version, 3);
    for g in 1..=2 {
        assert!(!dir.join(global_name(g)).exists(), "record {g} removed");
    }
    // Numbers only go up; 0 and a missing version are refused.
    assert!(matches!(
        e.global_commit(4, 4),
        Err(GlobalError::OutOfOrder { newest: 4, .. })
    ));
    assert!(matches!(
        e.global_commit(0, 4),
        Err(GlobalError::BadNumber { .. })
    ));
    assert!(matches!(
        e.global_commit(5, 99),
        Err(GlobalError::Read(ReadError::NotFound { .. }))
    ));
    // A version other than the one just committed is checked through its chain.
    e.global_commit(5, 2).unwrap();
    assert_eq!(e.global_version(5).unwrap().unwrap().version, 2);
    // Through the C API's error type, a missing record is NOT_FOUND.
    let missing = Error::from(ReadError::NoGlobal {
        global: Some(9),
        dir: "d".into(),
    });
    assert_eq!(
        ickpt::capi::code_of(&missing),
        ickpt::capi::ickpt_result::ICKPT_ERR_NOT_FOUND
    );
}

#[test]
fn a_record_that_does_not_check_out_is_passed_over() {
    let dir = scratch_dir("global-bad");
    let mut buf = Buf::new(PAGES * PS);
    let e = engine(&dir, &buf, |_| {});
    for g in 1..=2u64 {
        step(&mut buf, g);
        let v = e.checkpoint().unwrap().version;
        e.global_commit(g, v).unwrap();
    }
    let newest = dir.join(global_name(2));
    let good = std::fs::read(&newest).unwrap();
    // Damaged, truncated, renamed to another number, or naming a version file that was
    // since replaced: each is passed over, and the record before it counts.
    for at in [30, 8] {
        // A damaged format field (byte 8) is damage too, never "upgrade ickpt".
        let mut flipped = good.clone();
        flipped[at] ^= 1;
        std::fs::write(&newest, &flipped).unwrap();
        assert_eq!(e.global_latest().unwrap().unwrap().global, 1, "byte {at}");
    }
    // The damaged file still holds its number: recording it again is refused, naming it.
    let err = e.global_commit(2, 2).unwrap_err();
    assert!(
        matches!(err, GlobalError::OutOfOrder { newest: 2, .. }),
        "{err}"
    );
    std::fs::write(&newest, &good[..63]).unwrap();
    assert_eq!(e.global_latest().unwrap().unwrap().global, 1);
    std::fs::remove_file(&newest).unwrap();
    std::fs::write(dir.join(global_name(7)), &good).unwrap();
    assert_eq!(e.global_latest().unwrap().unwrap().global, 1);
    std::fs::remove_file(dir.join(global_name(7))).unwrap();
    std::fs::write(&newest, &good).unwrap();
    assert_eq!(e.global_latest().unwrap().unwrap().global, 2);
    // Version 2 replaced by another file with the same number: the record no longer names it.
    e.discard_newer(1).unwrap();
    step(&mut buf, 9);
    drop(e);
    let e = engine(&dir, &buf, |_| {});
    e.checkpoint().unwrap();
    std::fs::write(&newest, &good).unwrap();
    assert_eq!(
        e.global_latest().unwrap().unwrap().global,
        1,
        "a record naming a replaced file"
    );
}

#[test]
fn discarding_newer_versions_removes_them_and_the_next_checkpoint_is_full() {
    let dir = scratch_dir("discard");
    let mut buf = Buf::new(PAGES * PS);
    let e = engine(&dir, &buf, |c| c.full_every = 100);
    let mut images = vec![Vec::new()];
    for g in 1..=5u64 {
        images.push(step(&mut buf, g));
        let v = e.checkpoint().unwrap().version;
        assert_eq!(v, g);
        if g <= 3 {
            e.global_commit(g, v).unwrap();
        }
    }
    // Versions 4 and 5 were committed by this rank only: a failed global checkpoint.
    assert_eq!(e.discard_newer(3).unwrap(), vec![5, 4]);
    assert_eq!(
        e.versions()
            .unwrap()
            .iter()
            .map(|s| s.version)
            .collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    // Memory still holds step 5; the pages written for 4 and 5 went into the discarded
    // versions, so the next checkpoint must be full to hold them.
    let next = e.checkpoint().unwrap();
    assert_eq!((next.kind, next.version), (Kind::Full, 6));
    images.push(buf.slice().to_vec());
    // Discarding below a recorded global version removes its record first.
    assert_eq!(e.discard_newer(2).unwrap(), vec![6, 3]);
    assert_eq!(e.global_latest().unwrap().unwrap().global, 2);
    drop(e);
    buf.slice_mut().fill(0);
    let e = engine(&dir, &buf, |_| {});
    let r = e.restore_latest().unwrap().unwrap();
    assert_eq!(r.version, 2);
    assert!(buf.slice() == &images[2][..], "version 2's bytes");
    // Discarding everything leaves no version and no record.
    e.discard_newer(0).unwrap();
    assert!(e.latest().unwrap().is_none());
    assert!(e.global_latest().unwrap().is_none());
}

#[test]
fn garbage_collection_keeps_the_chains_the_records_name() {
    let dir = scratch_dir("global-gc");
    let mut buf = Buf::new(PAGES * PS);
    let e = engine(&dir, &buf, |c| {
        c.full_every = 2;
        c.keep_chains = 1;
    });
    let mut images = vec![Vec::new()];
    for v in 1..=8u64 {
        images.push(step(&mut buf, v));
        assert_eq!(e.checkpoint().unwrap().version, v);
        if v == 2 {
            e.global_commit(1, 2).unwrap(); // chain 1 <- 2
        }
        if v == 3 {
            e.global_commit(2, 3).unwrap(); // chain 3
        }
    }
    let kept: Vec<u64> = e.versions().unwrap().iter().map(|s| s.version).collect();
    // keep_chains 1 keeps 7 <- 8; the records keep what restoring 2 and 3 reads: 1 <- 2, and
    // 3 (4, which increments 3, no restore needs).
    assert_eq!(kept, vec![1, 2, 3, 7, 8]);
    drop(e);
    for (v, global) in [(2, 1), (3, 2)] {
        buf.slice_mut().fill(0);
        let e = engine(&dir, &buf, |_| {});
        assert_eq!(e.global_version(global).unwrap().unwrap().version, v);
        e.restore(v).unwrap();
        assert!(buf.slice() == &images[v as usize][..], "version {v}");
    }
}

#[test]
fn a_record_that_cannot_be_read_is_an_error_not_a_missing_one() {
    let dir = scratch_dir("global-unreadable");
    let mut buf = Buf::new(PAGES * PS);
    let e = engine(&dir, &buf, |_| {});
    step(&mut buf, 1);
    e.checkpoint().unwrap();
    e.global_commit(1, 1).unwrap();
    // Something that is not a file where record 2 would be: open fails, not with NotFound.
    std::fs::create_dir(dir.join(global_name(2))).unwrap();
    assert!(
        e.global_latest().is_err(),
        "an unreadable record is reported"
    );
    std::fs::remove_dir(dir.join(global_name(2))).unwrap();
    // A record of a newer format (checksum intact) says to upgrade.
    let mut b = std::fs::read(dir.join(global_name(1))).unwrap();
    b[8] = 2;
    let crc = ickpt::format::crc(&b[..56]);
    b[56..60].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(dir.join(global_name(1)), &b).unwrap();
    let err = e.global_latest().unwrap_err().to_string();
    assert!(err.contains("upgrade ickpt"), "{err}");
    // And nothing is discarded on its account.
    assert!(e.discard_newer(0).is_err());
    assert_eq!(e.versions().unwrap().len(), 1);
}

#[test]
fn a_record_that_fails_to_be_written_leaves_no_record() {
    use ickpt::store::{DirStore, Fault, FaultPlan, FaultTarget, FaultyStore};
    use std::sync::Arc;
    let dir = scratch_dir("global-record-fault");
    let mut buf = Buf::new(PAGES * PS);
    let plan = FaultPlan::new();
    // The first record written, not the first object: versions pass untouched.
    plan.arm_for(Fault::NoSpaceAfter(10), FaultTarget::Record);
    let store = FaultyStore::new(DirStore::open_write(&dir).unwrap(), plan);
    let e = Engine::with_store(Config::new(&dir), Arc::new(store)).unwrap();
    // SAFETY: `buf` is mapped and outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    step(&mut buf, 1);
    let v = e.checkpoint().unwrap().version;
    let err = e.global_commit(1, v).unwrap_err();
    assert!(
        matches!(err, GlobalError::File(ickpt::FileError::NoSpace { .. })),
        "{err}"
    );
    assert_eq!(e.global_latest().unwrap(), None, "no torn record counts");
    // The fault fired once: the next record is written.
    e.global_commit(1, v).unwrap();
    assert_eq!(e.global_latest().unwrap().unwrap().global, 1);
}

/// The record numbers in `dir`, ascending.
fn records_in(dir: &Path) -> Vec<u64> {
    let mut g: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| ickpt::format::parse_global_name(e.unwrap().file_name().to_str()?))
        .collect();
    g.sort_unstable();
    g
}

#[test]
fn a_pinned_global_version_stays_on_every_tier_and_restores_once_the_node_is_lost() {
    let (local, shared) = (
        scratch_dir("global-pin-local"),
        scratch_dir("global-pin-shared"),
    );
    let mut buf = Buf::new(PAGES * PS);
    let tiers = |c: &mut Config| {
        c.shared_dir = Some(shared.to_path_buf());
        c.full_every = 2;
        c.keep_chains = 1;
    };
    let e = engine(&local, &buf, tiers);
    let mut images = vec![Vec::new()];
    for v in 1..=8u64 {
        images.push(step(&mut buf, v));
        assert_eq!(e.checkpoint().unwrap().version, v);
        e.global_commit(v, v).unwrap();
        if v == 3 {
            e.wait_drained().unwrap();
            assert_eq!(e.drained_global().unwrap(), 3);
            e.global_pin(3).unwrap();
        }
    }
    e.wait_drained().unwrap();
    assert_eq!(e.drained_global().unwrap(), 8);
    // The records before the pin went, from both tiers; from it on every one stays (a slow
    // drain still finds them), with what restoring its version reads.
    for dir in [&local, &shared] {
        assert_eq!(records_in(dir), vec![3, 4, 5, 6, 7, 8], "{}", dir.display());
    }
    // Pinned higher, the next commit drops what lies below the new pin.
    e.global_pin(6).unwrap();
    images.push(step(&mut buf, 9));
    assert_eq!(e.checkpoint().unwrap().version, 9);
    e.global_commit(9, 9).unwrap();
    e.wait_drained().unwrap();
    for dir in [&local, &shared] {
        assert_eq!(records_in(dir), vec![6, 7, 8, 9], "{}", dir.display());
    }
    let at_most = |g| e.global_at_most(g).unwrap().map(|r| (r.global, r.version));
    assert_eq!(at_most(7), Some((7, 7)));
    assert_eq!(at_most(100), Some((9, 9)));
    assert_eq!(at_most(5), None);
    // A restart's discard lowers what counts as drained with the records it removes.
    e.discard_newer(6).unwrap();
    assert_eq!(e.drained_global().unwrap(), 6);
    drop(e);
    // The node is lost: its directory goes, the shared tier alone restores global 6 (an
    // increment of 5, kept with it).
    std::fs::remove_dir_all(&local).unwrap();
    buf.slice_mut().fill(0);
    let e = engine(&local, &buf, tiers);
    assert_eq!(e.drained_global().unwrap(), 6);
    let r = e.global_latest().unwrap().unwrap();
    assert_eq!((r.global, r.version), (6, 6));
    e.restore(r.version).unwrap();
    assert!(buf.slice() == &images[6][..], "version 6's bytes");
}
