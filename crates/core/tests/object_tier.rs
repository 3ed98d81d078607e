//! The object-store tier against a real S3-compatible server (Garage, started here on
//! 127.0.0.1): versions drained to the bucket whole, in multipart uploads; a restart that lost
//! the local and shared copies restores from the bucket; a server killed in the middle of an
//! upload shows nothing of it, and the drain finishes once it is back.
#![cfg(feature = "s3")]

mod common;
use common::garage::{self, Garage};
use common::{scratch_dir, spin_until, watchdog, Buf};
use ickpt::store::{version_name, DirStore, ObjectTier, Store, Tier};
use ickpt::{Config, Engine};
use std::path::Path;
use std::sync::{Arc, Mutex};

const PS: usize = 4096;

/// Tests set the AWS variables of their server: one at a time.
static ENV: Mutex<()> = Mutex::new(());

fn config(local: &Path, url: &str) -> Config {
    let mut c = Config::new(local);
    c.object_url = Some(url.to_string());
    c.full_every = 4;
    c
}

fn fill(buf: &mut Buf, seed: u64) {
    common::noise(buf.slice_mut(), seed);
}

/// Checkpoints of `pages` pages, all rewritten each time; region 1's bytes at the last.
fn checkpoints(e: &Engine, buf: &mut Buf, seeds: std::ops::Range<u64>) -> Vec<u8> {
    for s in seeds {
        fill(buf, s);
        e.checkpoint().unwrap();
    }
    buf.slice().to_vec()
}

fn object_versions(url: &str) -> Vec<u64> {
    let mut v: Vec<u64> = ObjectTier::open(url)
        .unwrap()
        .list()
        .unwrap()
        .iter()
        .filter_map(|n| ickpt::store::parse_version_name(n))
        .collect();
    v.sort_unstable();
    v
}

fn object_bytes(url: &str, name: &str) -> Vec<u8> {
    let f = ObjectTier::open(url).unwrap().open(name).unwrap();
    let mut b = vec![0u8; f.len() as usize];
    f.read_exact_at(&mut b, 0).unwrap();
    b
}

fn restore(cfg: Config, len: usize) -> (u64, Vec<u8>) {
    let buf = Buf::new(len);
    let e = Engine::open(cfg).unwrap();
    // SAFETY: `buf` outlives the engine (dropped after it, below).
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    let v = e.restore_latest().unwrap().expect("a version").version;
    drop(e);
    (v, buf.slice().to_vec())
}

#[test]
fn versions_go_to_the_bucket_whole_and_a_restart_restores_from_it() {
    let Some(bin) = garage::binary() else { return };
    let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch_dir("s3-server");
    let server = Garage::start(&bin, &dir);
    server.export();
    // wait_drained has no bound of its own.
    let _hang = watchdog("the bucket restore test", 120);
    let (local, shared) = (scratch_dir("s3-local"), scratch_dir("s3-shared"));
    let url = format!("s3://{}/restore-test", garage::BUCKET);
    // 12 MiB: a full version goes up in three parts.
    let len = 3072 * PS;
    let mut buf = Buf::new(len);
    let mut cfg = config(&local, &url);
    cfg.shared_dir = Some(shared.to_path_buf());
    let e = Engine::open(cfg.clone()).unwrap();
    // SAFETY: `buf` outlives the engine (dropped first).
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    let want = checkpoints(&e, &mut buf, 1..4);
    e.wait_drained().unwrap();
    drop(e);
    assert_eq!(object_versions(&url), vec![1, 2, 3]);
    for v in 1..=3 {
        let name = version_name(v);
        assert!(
            object_bytes(&url, &name) == std::fs::read(local.join(&name)).unwrap(),
            "{name}: the bucket's copy differs"
        );
    }
    // Local and shared copies gone: the bucket alone restores the newest version.
    std::fs::remove_dir_all(&*local).unwrap();
    std::fs::remove_dir_all(&*shared).unwrap();
    let (v, got) = restore(cfg, len);
    assert_eq!(v, 3);
    assert!(got == want, "restored bytes differ from those checkpointed");
}

#[test]
fn a_server_killed_mid_upload_shows_nothing_of_it_and_the_drain_finishes_later() {
    let Some(bin) = garage::binary() else { return };
    let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch_dir("s3-kill-server");
    let mut server = Garage::start(&bin, &dir);
    server.export();
    // wait_drained has no bound of its own.
    let _hang = watchdog("the server-killed test", 120);
    let local = scratch_dir("s3-kill-local");
    let url = format!("s3://{}/kill-test", garage::BUCKET);
    let len = 4096 * PS; // 16 MiB: four parts
    let mut buf = Buf::new(len);
    let mut cfg = config(&local, &url);
    // 4 MiB a second: the upload takes about four seconds.
    cfg.drain_bandwidth = Some(4 << 20);
    let e = Engine::open(cfg.clone()).unwrap();
    // SAFETY: `buf` outlives the engine (dropped first).
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    let want = checkpoints(&e, &mut buf, 7..8);
    // Mid-upload: the server has stored a part, 5 MiB of blocks in its data directory
    // (which holds only a small marker file before).
    let data = dir.join("data");
    let empty = dir_bytes(&data);
    assert!(
        empty < 4096,
        "garage's data directory starts with {empty} bytes"
    );
    spin_until("garage to store a part", || dir_bytes(&data) >= 1 << 20);
    server.kill();
    let err = e.wait_drained().unwrap_err();
    assert!(err.to_string().contains("object tier"), "{err}");
    server.run(&bin);
    assert!(
        object_versions(&url).is_empty(),
        "a version from an interrupted upload is visible"
    );
    e.wait_drained().unwrap();
    drop(e);
    assert_eq!(object_versions(&url), vec![1]);
    std::fs::remove_dir_all(&*local).unwrap();
    let (v, got) = restore(cfg, len);
    assert_eq!(v, 1);
    assert!(got == want, "restored bytes differ");
}

/// Bytes of the regular files under `d`, recursively (0 when it does not exist).
fn dir_bytes(d: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(d) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

#[test]
fn a_malformed_object_url_is_refused_naming_it() {
    let local = scratch_dir("s3-bad-url");
    let err = Engine::open(config(&local, "s3://Bad_Bucket/x"))
        .err()
        .expect("refused");
    assert!(err.to_string().contains("s3://Bad_Bucket/x"), "{err}");
    assert_eq!(
        ickpt::capi::code_of(&err.into()),
        ickpt::capi::ickpt_result::ICKPT_ERR_INVALID_ARGUMENT
    );
}

/// What a server that crashed mid-run leaves in the bucket: the drain's upload of a version
/// cut off by the kill, and increments whose full version is gone (the server lost some of
/// the removals and writes it had acknowledged). Such orphans are reported by verify without
/// failing the store, collected by the drain's next round, and by `prune` (`plan_prune`).
#[test]
fn a_server_killed_mid_run_leaves_orphans_that_verify_names_and_the_drain_collects() {
    let Some(bin) = garage::binary() else { return };
    let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch_dir("s3-orphans-server");
    let mut server = Garage::start(&bin, &dir);
    server.export();
    // wait_drained has no bound of its own.
    let _hang = watchdog("the orphans test", 120);
    let local = scratch_dir("s3-orphans-local");
    let url = format!("s3://{}/orphans-test", garage::BUCKET);
    // 12 MiB: a full version goes up in three parts, 1.5 s each at 8 MiB/s.
    let len = 3072 * PS;
    let mut buf = Buf::new(len);
    let mut cfg = config(&local, &url);
    cfg.full_every = 2;
    cfg.keep_chains = 1;
    cfg.drain_bandwidth = Some(8 << 20);
    let e = Engine::open(cfg.clone()).unwrap();
    // SAFETY: `buf` outlives the engine (dropped first).
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    // Full versions rewrite everything, increments one page.
    let step = |e: &Engine, buf: &mut Buf, v: u64| {
        if v % 2 == 1 {
            fill(buf, v);
        } else {
            buf.slice_mut()[..PS].fill(v as u8);
        }
        assert_eq!(e.checkpoint().unwrap().version, v);
    };
    for v in 1..=4 {
        step(&e, &mut buf, v);
    }
    e.wait_drained().unwrap();
    assert_eq!(object_versions(&url), vec![3, 4]);
    let leftover = object_bytes(&url, &version_name(4));
    // A new chain, and the server killed while the drain uploads its full version (a part
    // of it stored).
    let data = dir.join("data");
    let before = dir_bytes(&data);
    step(&e, &mut buf, 5);
    spin_until("garage to store a part of version 5", || {
        dir_bytes(&data) >= before + (1 << 20)
    });
    server.kill();
    assert!(e.wait_drained().is_err(), "the server is down");
    server.run(&bin);
    step(&e, &mut buf, 6);
    e.wait_drained().unwrap();
    assert_eq!(object_versions(&url), vec![5, 6]);
    // The crash's leftovers: version 4 back, its full version 3 not.
    let tier = ObjectTier::open(&url).unwrap();
    let mut w = tier.create(&version_name(4)).unwrap();
    w.write_all(&leftover).unwrap();
    w.commit().unwrap();
    let tiers = || {
        vec![
            Tier {
                name: "local",
                store: Arc::new(DirStore::open_read(&local).unwrap()),
            },
            Tier {
                name: "object",
                store: Arc::new(ObjectTier::open(&url).unwrap()),
            },
        ]
    };
    let report = ickpt::read::verify::verify_tiers(&tiers(), &mut |_, _| {}).unwrap();
    assert!(report.ok(), "orphans fail the store: {:?}", report.problems);
    let orphans: Vec<(&str, u64)> = report
        .orphans
        .iter()
        .map(|p| (p.tier.as_str(), p.version))
        .collect();
    assert!(orphans.contains(&("object", 4)), "{:?}", report.orphans);
    assert_eq!(report.newest_restorable(), Some(6));
    // prune's plan names it; the drain's next round removes it.
    let plan = ickpt::maintain::plan_prune(&tiers(), None).unwrap();
    assert_eq!(
        plan.iter().map(|r| (r.tier, r.version)).collect::<Vec<_>>(),
        vec![("object", 4)]
    );
    step(&e, &mut buf, 7);
    e.wait_drained().unwrap();
    drop(e);
    assert!(
        !object_versions(&url).contains(&4),
        "the orphan is still there"
    );
    // The bucket alone still restores the newest version whole.
    std::fs::remove_dir_all(&*local).unwrap();
    let (v, got) = restore(cfg, len);
    assert_eq!(v, 7);
    assert!(got == buf.slice(), "restored bytes differ");
}
