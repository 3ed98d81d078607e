//! Storage tiers: versions committed in the local directory reach the shared one in the
//! background, whole; a restart that lost the local copies, or found one damaged, restores
//! from the shared tier; a failing shared tier never fails a checkpoint nor harms what is
//! committed; versions not yet drained are never collected.

use crate::common;
use common::hook_store::gated_store;
use common::{scratch_dir, Buf};
use ickpt::store::{version_name, DirStore, Fault, FaultPlan, FaultyStore, Store, Tier};
use ickpt::{Config, Engine};
use std::path::Path;
use std::sync::Arc;

const PS: usize = 4096;
const PAGES: usize = 64;

fn config(local: &Path, shared: &Path) -> Config {
    let mut c = Config::new(local);
    c.shared_dir = Some(shared.to_path_buf());
    c.full_every = 3;
    c
}

/// Region 1 is `buf`; each checkpoint rewrites a few pages with `round`.
fn run_checkpoints(e: &Engine, buf: &mut Buf, rounds: std::ops::Range<u8>) -> Vec<u8> {
    for round in rounds {
        for p in (round as usize % 5..PAGES).step_by(7) {
            buf.slice_mut()[p * PS..(p + 1) * PS]
                .fill(round.wrapping_mul(31).wrapping_add(p as u8));
        }
        e.checkpoint().unwrap();
    }
    buf.slice().to_vec()
}

pub(crate) fn versions_in(dir: &Path) -> Vec<u64> {
    let mut v: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| ickpt::store::parse_version_name(e.unwrap().file_name().to_str()?))
        .collect();
    v.sort_unstable();
    v
}

/// Every name in `dir`, sorted.
fn only_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn same_files(a: &Path, b: &Path, versions: &[u64]) {
    for &v in versions {
        let name = version_name(v);
        assert_eq!(
            std::fs::read(a.join(&name)).unwrap(),
            std::fs::read(b.join(&name)).unwrap(),
            "{name}"
        );
    }
}

/// Restore the newest version into a fresh buffer through a new engine over `cfg`.
fn restore_with(cfg: Config) -> (Option<u64>, Vec<u8>) {
    let (v, bytes) = try_restore_with(cfg);
    (v.unwrap(), bytes)
}

fn try_restore_with(cfg: Config) -> (Result<Option<u64>, String>, Vec<u8>) {
    let buf = Buf::new(PAGES * PS);
    let e = Engine::open(cfg).unwrap();
    // SAFETY: `buf` outlives the engine (dropped after it, below).
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    let v = e
        .restore_latest()
        .map(|i| i.map(|i| i.version))
        .map_err(|e| e.to_string());
    drop(e);
    (v, buf.slice().to_vec())
}

#[test]
fn a_new_node_restores_what_the_drain_copied() {
    let (local, shared) = (scratch_dir("tier-local"), scratch_dir("tier-shared"));
    let mut buf = Buf::new(PAGES * PS);
    let e = Engine::open(config(&local, &shared)).unwrap();
    // SAFETY: `buf` outlives the engine (dropped first).
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    let want = run_checkpoints(&e, &mut buf, 1..5);
    e.wait_drained().unwrap();
    assert_eq!(e.drained_version(), Some(4));
    drop(e);
    assert_eq!(versions_in(&shared), vec![1, 2, 3, 4]);
    same_files(&local, &shared, &[1, 2, 3, 4]);

    // Another node: the local directory is gone.
    std::fs::remove_dir_all(&*local).unwrap();
    let (v, got) = restore_with(config(&local, &shared));
    assert_eq!(v, Some(4));
    assert!(got == want, "restored bytes differ from those checkpointed");

    // It goes on from there: numbers are never reused, the new version is drained too.
    let e = Engine::open(config(&local, &shared)).unwrap();
    // SAFETY: as above.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    assert_eq!(e.restore_latest().unwrap().unwrap().version, 4);
    run_checkpoints(&e, &mut buf, 5..6);
    e.wait_drained().unwrap();
    drop(e);
    assert_eq!(versions_in(&local), vec![5]);
    assert_eq!(versions_in(&shared), vec![1, 2, 3, 4, 5]);
}

#[test]
fn a_damaged_local_copy_is_read_from_the_shared_tier() {
    // The page data starts at the second page (one region); compressed, a byte of it is
    // checked by its frame's CRC before the decompressor sees it.
    for (what, at) in [("header", 20u64), ("page data", (PS + 10) as u64)] {
        let (local, shared) = (
            scratch_dir("tier-dmg-local"),
            scratch_dir("tier-dmg-shared"),
        );
        let mut buf = Buf::new(PAGES * PS);
        let e = Engine::open(config(&local, &shared)).unwrap();
        // SAFETY: `buf` outlives the engine (dropped first).
        unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
        let want = run_checkpoints(&e, &mut buf, 1..3);
        e.wait_drained().unwrap();
        drop(e);
        // Version 1 (full) is damaged locally; version 2 needs it.
        let path = local.join(version_name(1));
        let mut bytes = std::fs::read(&path).unwrap();
        assert!(bytes.len() as u64 > at, "{what}: file too short");
        bytes[at as usize] ^= 0x5a;
        std::fs::write(&path, &bytes).unwrap();
        let (v, got) = restore_with(config(&local, &shared));
        assert_eq!(v, Some(2), "{what}");
        assert!(got == want, "{what}: restored bytes differ");
        // Without the shared tier the damage shows: version 2 cannot be restored.
        let (v, _) = try_restore_with(Config::new(&*local));
        assert!(
            v.is_err(),
            "{what}: restored without its intact copy: {v:?}"
        );
    }
}

#[test]
fn a_full_shared_tier_fails_wait_drained_not_the_checkpoint() {
    let (local, shared) = (
        scratch_dir("tier-full-local"),
        scratch_dir("tier-full-shared"),
    );
    // Each armed fault fails one copy. Rounds that copy before the call below (one at the
    // start, one per commit) take at most two; the third fails the call's own round.
    let plan = FaultPlan::new();
    for _ in 0..3 {
        plan.arm(Fault::NoSpaceAfter(4096));
    }
    let lower = vec![Tier {
        name: "shared",
        store: Arc::new(FaultyStore::new(
            DirStore::open_write(&shared).unwrap(),
            plan,
        )),
    }];
    let first: Arc<dyn Store> = Arc::new(DirStore::open_write(&local).unwrap());
    let mut buf = Buf::new(PAGES * PS);
    let e = Engine::with_tiers(Config::new(&*local), first, lower).unwrap();
    // SAFETY: `buf` outlives the engine (dropped first).
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    let want = run_checkpoints(&e, &mut buf, 1..2);
    let err = e.wait_drained().unwrap_err();
    assert_eq!(
        ickpt::capi::code_of(&err),
        ickpt::capi::ickpt_result::ICKPT_ERR_NO_SPACE,
        "{err}"
    );
    assert!(err.to_string().contains("shared tier"), "{err}");
    assert_eq!(
        only_files(&shared),
        vec!["ickpt-lock".to_string(), "ickpt-store".to_string()],
        "a partial copy is visible"
    );
    // Once the faults are spent, a round copies it.
    assert!((0..3).any(|_| e.wait_drained().is_ok()), "never drained");
    drop(e);
    same_files(&local, &shared, &[1]);
    let (v, got) = restore_with(Config::new(&*local));
    assert_eq!(v, Some(1));
    assert!(got == want);
}

#[test]
fn a_chain_leaves_either_tier_only_once_its_successor_is_on_the_shared_one() {
    let (local, shared) = (scratch_dir("tier-gc-local"), scratch_dir("tier-gc-shared"));
    let (store, gate) = gated_store(&shared);
    let mut c = Config::new(&*local);
    c.full_every = 1;
    c.keep_chains = 1;
    let first: Arc<dyn Store> = Arc::new(DirStore::open_write(&local).unwrap());
    let lower = vec![Tier {
        name: "shared",
        store,
    }];
    let mut buf = Buf::new(PAGES * PS);
    let e = Engine::with_tiers(c, first, lower).unwrap();
    // Dropped before the engine, also when an assertion fails: the drain held at the gate
    // goes on, so closing the engine does not wait for it.
    let _open = gate.open_on_drop();
    // SAFETY: `buf` outlives the engine (dropped first).
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    run_checkpoints(&e, &mut buf, 1..2);
    e.wait_drained().unwrap();
    assert_eq!(versions_in(&shared), vec![1]);
    // The drain is held at its first write: every full version not on the shared tier stays
    // here, and the shared tier keeps version 1, its only restorable one.
    gate.set(true);
    run_checkpoints(&e, &mut buf, 2..5);
    assert_eq!(versions_in(&local), vec![2, 3, 4]);
    assert_eq!(versions_in(&shared), vec![1]);
    gate.set(false);
    e.wait_drained().unwrap();
    // Version 1 left the shared tier once the newer chains were there; with every version
    // drained, both tiers are down to what keep_chains keeps when the wait returns.
    assert_eq!(versions_in(&shared), vec![4]);
    assert_eq!(versions_in(&local), vec![4]);
    run_checkpoints(&e, &mut buf, 5..6);
    e.wait_drained().unwrap();
    drop(e);
    assert_eq!(versions_in(&local), vec![5]);
    assert_eq!(versions_in(&shared), vec![5]);
}

#[test]
fn a_drain_cut_off_by_closing_leaves_nothing_partial_and_resumes_at_the_next_start() {
    let (local, shared) = (
        scratch_dir("tier-resume-local"),
        scratch_dir("tier-resume-shared"),
    );
    let mut buf = Buf::new(PAGES * PS);
    let want = {
        let (store, gate) = gated_store(&shared);
        let first: Arc<dyn Store> = Arc::new(DirStore::open_write(&local).unwrap());
        let mut c = Config::new(&*local);
        // 40 KiB a second: chunks of 4 KiB, so the copy has many chunks left when closed.
        c.drain_bandwidth = Some(40 << 10);
        gate.set(true);
        let e = Engine::with_tiers(
            c,
            first,
            vec![Tier {
                name: "shared",
                store,
            }],
        )
        .unwrap();
        let _open = gate.open_on_drop();
        // SAFETY: `buf` outlives the engine (dropped first).
        unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
        // Bytes no page is all zero in and zstd cannot shrink: version 1 keeps its full size,
        // many chunks of copying.
        common::noise(buf.slice_mut(), 1);
        let want = run_checkpoints(&e, &mut buf, 1..3);
        // The drain is in the middle of version 1 (its first write waits at the gate).
        common::spin_until("the drain at the gate", || gate.entered() > 0);
        want
        // The gate opens, then the engine closes: the copy stops at its next chunk.
    };
    assert!(
        versions_in(&shared).is_empty(),
        "a version reached the shared tier"
    );
    assert_eq!(
        only_files(&shared),
        vec!["ickpt-lock".to_string(), "ickpt-store".to_string()]
    );
    let e = Engine::open(config(&local, &shared)).unwrap();
    e.wait_drained().unwrap();
    drop(e);
    assert_eq!(versions_in(&shared), vec![1, 2]);
    same_files(&local, &shared, &[1, 2]);
    std::fs::remove_dir_all(&*local).unwrap();
    let (v, got) = restore_with(config(&local, &shared));
    assert_eq!(v, Some(2));
    assert!(got == want);
}

#[test]
fn a_shared_directory_of_another_store_is_refused() {
    let (a, b, shared) = (
        scratch_dir("tier-a"),
        scratch_dir("tier-b"),
        scratch_dir("tier-ab"),
    );
    let mut buf = Buf::new(PAGES * PS);
    let e = Engine::open(config(&a, &shared)).unwrap();
    // SAFETY: `buf` outlives the engine (dropped first).
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    run_checkpoints(&e, &mut buf, 1..2);
    e.wait_drained().unwrap();
    drop(e);
    // Store b has versions of its own, then is pointed at a's shared directory.
    let e = Engine::open(Config::new(&*b)).unwrap();
    // SAFETY: as above.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    run_checkpoints(&e, &mut buf, 1..2);
    drop(e);
    let err = Engine::open(config(&b, &shared)).err().expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("another store") && msg.contains(&*shared.to_string_lossy()),
        "{msg}"
    );
    assert_eq!(
        ickpt::capi::code_of(&err.into()),
        ickpt::capi::ickpt_result::ICKPT_ERR_NOT_A_STORE
    );
}
