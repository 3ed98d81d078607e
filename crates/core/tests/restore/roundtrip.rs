use crate::common;
use common::{scratch_dir, Buf};
use ickpt::format::Kind;
use ickpt::{Config, Engine, ProtectError, RangeProblem, ReadError, RestoreError};

const PS: usize = 4096;

#[test]
fn incremental_chain_restores_bit_identical() {
    let dir = scratch_dir("roundtrip");
    let mut a = Buf::new(64 * PS);
    let mut expect;
    {
        let e = Engine::open(Config::new(&dir)).unwrap();
        // SAFETY: `a` is mapped and outlives the engine.
        unsafe { e.protect(1, a.ptr, a.len).unwrap() };
        a.slice_mut()
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = i as u8);
        let c1 = e.checkpoint().unwrap();
        assert_eq!((c1.kind, c1.pages), (Kind::Full, 64));
        a.slice_mut()[5 * PS + 7] = 0xAA;
        a.slice_mut()[40 * PS] = 0xBB;
        let c2 = e.checkpoint().unwrap();
        assert_eq!(
            (c2.kind, c2.pages, c2.parent),
            (Kind::Incremental, 2, c1.version)
        );
        let c3 = e.checkpoint().unwrap();
        assert_eq!(c3.pages, 0);
        a.slice_mut()[63 * PS + 100] = 0xCC;
        e.checkpoint().unwrap();
        expect = a.slice().to_vec();
        assert!(e.stats().faults >= 3);
    }
    a.slice_mut().fill(0);
    let e = Engine::open(Config::new(&dir)).unwrap();
    // SAFETY: as above.
    unsafe { e.protect(1, a.ptr, a.len).unwrap() };
    let latest = e.latest().unwrap().unwrap();
    let r = e.restore(latest).unwrap();
    assert_eq!(r.chain_len, 4);
    assert_eq!(r.pages, 64, "each page read once");
    assert_eq!(a.slice(), &expect[..]);
    // The chain continues from the restored version.
    a.slice_mut()[0] = 1;
    expect[0] = 1;
    let c = e.checkpoint().unwrap();
    assert_eq!((c.kind, c.parent, c.pages), (Kind::Incremental, latest, 1));
    drop(e);
    a.slice_mut().fill(9);
    let e = Engine::open(Config::new(&dir)).unwrap();
    // SAFETY: as above.
    unsafe { e.protect(1, a.ptr, a.len).unwrap() };
    e.restore(c.version).unwrap();
    assert_eq!(a.slice(), &expect[..]);
}

#[test]
fn restore_checks_regions_before_writing() {
    let dir = scratch_dir("mismatch");
    let a = Buf::new(4 * PS);
    {
        let e = Engine::open(Config::new(&dir)).unwrap();
        // SAFETY: mapped, outlives the engine.
        unsafe { e.protect(7, a.ptr, a.len).unwrap() };
        e.checkpoint().unwrap();
    }
    let e = Engine::open(Config::new(&dir)).unwrap();
    // SAFETY: mapped, outlives the engine.
    unsafe { e.protect(7, a.ptr, 3 * PS).unwrap() };
    assert!(matches!(
        e.restore(1),
        Err(RestoreError::RegionMismatch { id: 7, .. })
    ));
    e.unprotect(7).unwrap();
    assert!(matches!(
        e.restore(1),
        Err(RestoreError::RegionMismatch { id: 7, .. })
    ));
    assert!(matches!(
        e.restore(99),
        Err(RestoreError::Read(ReadError::NotFound { version: 99, .. }))
    ));
}

#[test]
fn garbage_collection_keeps_the_newest_chains_only() {
    let dir = scratch_dir("gc");
    let mut a = Buf::new(8 * PS);
    let mut c = Config::new(&dir);
    c.full_every = 2;
    c.keep_chains = 2;
    let e = Engine::open(c).unwrap();
    // SAFETY: `a` outlives the engine.
    unsafe { e.protect(1, a.ptr, a.len).unwrap() };
    let mut snaps = Vec::new();
    for v in 1..=7u8 {
        a.slice_mut()[(v as usize % 8) * PS] = v;
        let info = e.checkpoint().unwrap();
        snaps.push(a.slice().to_vec());
        let on_disk = ickpt::read::catalog::versions(e.store()).unwrap();
        // Fulls are 1, 3, 5, 7; after full 5 the chain of 1 goes, after full 7 that of 3.
        let expect: Vec<u64> = match info.version {
            1..=4 => (1..=info.version).collect(),
            5 | 6 => (3..=info.version).collect(),
            _ => vec![5, 6, 7],
        };
        assert_eq!(on_disk, expect, "after version {}", info.version);
    }
    // Every version kept still restores exactly.
    for v in [5u64, 6, 7] {
        e.restore(v).unwrap();
        assert!(a.slice() == &snaps[v as usize - 1][..], "version {v}");
    }
}

#[test]
fn a_bandwidth_limited_store_keeps_every_byte() {
    let dir = scratch_dir("bandwidth");
    let mut a = Buf::new(16 * PS);
    let mut c = Config::new(&dir);
    // Fast enough to keep the test quick; the pacing itself is unit-tested with a fake clock.
    c.bandwidth = Some(1 << 30);
    let e = Engine::open(c).unwrap();
    // SAFETY: `a` outlives the engine.
    unsafe { e.protect(1, a.ptr, a.len).unwrap() };
    a.slice_mut()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = (i * 7) as u8);
    e.checkpoint().unwrap();
    a.slice_mut()[9 * PS] = 1;
    let v = e.checkpoint().unwrap().version;
    let expect = a.slice().to_vec();
    a.slice_mut().fill(0);
    e.restore(v).unwrap();
    assert!(a.slice() == &expect[..]);
}

/// An overlap is refused by `protect` with its own error type, naming the new region, its
/// memory and the region it overlaps; the C API reports it as REGION_EXISTS.
#[test]
fn an_overlap_names_both_regions() {
    let dir = scratch_dir("overlap");
    let e = Engine::open(Config::new(&dir)).unwrap();
    let a = Buf::new(2 * PS);
    // SAFETY: `a` outlives the engine.
    unsafe { e.protect(1, a.ptr, PS).unwrap() };
    // SAFETY: as above; refused before anything is protected.
    let err = unsafe { e.protect(2, a.ptr.add(100), 10) }.unwrap_err();
    assert!(
        matches!(
            err,
            ProtectError::BadRange {
                id: 2,
                problem: RangeProblem::Overlaps(1),
                ..
            }
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    let at = format!("{:#x}", a.ptr as usize + 100);
    for want in ["region 2", at.as_str(), "overlaps protected region 1"] {
        assert!(msg.contains(want), "{want:?} missing from: {msg}");
    }
    assert_eq!(
        ickpt::capi::code_of(&err.into()),
        ickpt::capi::ickpt_result::ICKPT_ERR_REGION_EXISTS
    );
}

/// A version larger than the store's writeback step (8 MiB: the device is asked to start
/// writing every 8 MiB appended, before the fsync) restores byte for byte, in a new engine.
#[test]
fn a_version_past_several_writeback_steps_restores_exactly() {
    let dir = scratch_dir("writeback");
    let len = 20 << 20;
    let mut a = Buf::new(len);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for w in a.slice_mut().chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w.copy_from_slice(&x.to_le_bytes());
    }
    let expect = a.slice().to_vec();
    let v = {
        let e = Engine::open(Config::new(&dir)).unwrap();
        // SAFETY: `a` is mapped and outlives the engine.
        unsafe { e.protect(1, a.ptr, a.len).unwrap() };
        let c = e.checkpoint().unwrap();
        assert!(c.bytes > (16 << 20), "{c:?}");
        c.version
    };
    a.slice_mut().fill(0);
    let e = Engine::open(Config::new(&dir)).unwrap();
    // SAFETY: as above.
    unsafe { e.protect(1, a.ptr, a.len).unwrap() };
    e.restore(v).unwrap();
    assert!(a.slice() == &expect[..]);
}
