//! One acceptance check for restore, verify, ls and garbage collection: a version file
//! spliced in from another store or another run of the same program never joins a chain;
//! `verify` accepts exactly the versions a restore accepts; crafted files are refused with
//! an error, never an abort; and a stray, damaged or foreign newest file never blocks the
//! restart path.

use crate::common;
use common::scratch_dir;
use ickpt::format::{Kind, NewVersion, RegionEntry, VersionLayout};
use ickpt::read::catalog::Catalog;
use ickpt::store::{version_name, DirStore};
use ickpt::{Config, Engine, ReadError, RestoreError};
use std::path::{Path, PathBuf};

const PS: usize = 4096;
const PAGES: usize = 8;

/// Region 1's bytes after each version `run` writes: version 1 full, 2 and 3 increments,
/// distinct per run (`seed`) as two runs of one program computing different things.
fn contents(seed: u8, v: u64) -> Vec<u8> {
    let mut b: Vec<u8> = (0..PAGES * PS).map(|i| (i as u8) ^ seed).collect();
    for k in 2..=v {
        b[(k as usize) * PS + 11] = seed.wrapping_add(k as u8);
    }
    b
}

/// Write versions `from..=to` of run `seed` into `dir` (continuing a copy when from > 1:
/// the copy is restored first, so the new versions increment it).
fn run(dir: &Path, seed: u8, from: u64, to: u64) {
    run_with(Config::new(dir), seed, from, to)
}

/// [`run`] with a configuration of the test's own.
fn run_with(cfg: Config, seed: u8, from: u64, to: u64) {
    let e = Engine::open(cfg).unwrap();
    let p = e.alloc(1, PAGES * PS).unwrap();
    // SAFETY: alloc returned PAGES*PS bytes, live while `e` lives.
    let mem = unsafe { std::slice::from_raw_parts_mut(p, PAGES * PS) };
    if from > 1 {
        e.restore(from - 1).unwrap();
    }
    for v in from..=to {
        let want = contents(seed, v);
        for (d, s) in mem.iter_mut().zip(&want) {
            if d != s {
                *d = *s;
            }
        }
        assert_eq!(e.checkpoint().unwrap().version, v);
    }
}

/// What a restore of `v` gives in a fresh engine over `dir`, or its error.
fn restore(dir: &Path, v: u64) -> Result<Vec<u8>, RestoreError> {
    let e = Engine::open(Config::new(dir)).unwrap();
    let p = e.alloc(1, PAGES * PS).unwrap();
    e.restore(v)?;
    // SAFETY: as in `run`.
    Ok(unsafe { std::slice::from_raw_parts(p, PAGES * PS) }.to_vec())
}

fn verify(dir: &Path) -> ickpt::read::verify::Report {
    ickpt::read::verify::verify_store(&DirStore::open_read(dir).unwrap(), &mut |_, _| {}).unwrap()
}

/// "verify OK means restore will succeed with these bytes", and the converse: for every
/// version, verify finds no problem exactly when a restore succeeds.
fn assert_verify_agrees_with_restore(dir: &Path) -> ickpt::read::verify::Report {
    let report = verify(dir);
    for &v in &report.versions {
        let ok = report.restorable.contains(&v);
        let restored = restore(dir, v);
        assert_eq!(
            ok,
            restored.is_ok(),
            "version {v}: verify says {}, restore says {:?}",
            if ok { "restorable" } else { "not restorable" },
            restored.err()
        );
    }
    report
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for f in std::fs::read_dir(from).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), to.join(f.file_name())).unwrap();
    }
}

fn file(dir: &Path, v: u64) -> PathBuf {
    dir.join(version_name(v))
}

#[test]
fn a_version_from_another_store_never_joins_a_chain() {
    let a = scratch_dir("splice-a");
    let b = scratch_dir("splice-b");
    run(&a, 0x11, 1, 3);
    run(&b, 0x22, 1, 3);
    // Same program, same region ids and sizes, valid checksums: only the store differs.
    std::fs::copy(file(&b, 2), file(&a, 2)).unwrap();
    let report = assert_verify_agrees_with_restore(&a);
    assert_eq!(report.restorable, vec![1]);
    let p2 = report.problems.iter().find(|p| p.version == 2).unwrap();
    assert!(p2.what.contains("another store"), "{p2:?}");
    assert!(matches!(
        restore(&a, 3),
        Err(RestoreError::Read(
            ReadError::ChainBroken { .. } | ReadError::Foreign { .. }
        ))
    ));
    assert_eq!(restore(&a, 1).unwrap(), contents(0x11, 1));

    let e = Engine::open(Config::new(&a)).unwrap();
    assert_eq!(e.latest().unwrap(), Some(1));
}

#[test]
fn a_version_from_another_run_of_the_same_store_never_joins_a_chain() {
    // A store copied after version 2, both copies carrying on: same identity, same numbers,
    // different contents from version 3 on.
    let a = scratch_dir("fork-a");
    run(&a, 0x11, 1, 2);
    let b = scratch_dir("fork-b");
    copy_dir(&a, &b);
    run(&a, 0x11, 3, 4);
    run(&b, 0x33, 3, 4);
    // B's version 3 put in place of A's: A's version 4 was not written after it.
    std::fs::copy(file(&b, 3), file(&a, 3)).unwrap();
    let report = assert_verify_agrees_with_restore(&a);
    assert_eq!(report.restorable, vec![1, 2, 3]);
    let p4 = &report.problems.iter().find(|p| p.version == 4).unwrap();
    assert!(
        p4.what.contains("not the file it was written after"),
        "{p4:?}"
    );
    // Version 3 is B's, and whole: restoring it gives B's bytes, never a mix.
    assert_eq!(restore(&a, 3).unwrap(), contents(0x33, 3));
    let e = Engine::open(Config::new(&a)).unwrap();
    assert_eq!(e.latest().unwrap(), Some(3));
}

/// Write a crafted version `v` into the store at `dir`, bound to it (its identity, and the
/// parent's checksum), so only the rule under test can object.
fn craft(dir: &Path, v: u64, kind: Kind, regions: Vec<RegionEntry>, pages: &[(u32, u64)]) {
    let store = DirStore::open_read(dir).unwrap();
    let catalog = Catalog::new(&store).unwrap();
    let (parent, depth, parent_crc) = match kind {
        Kind::Full => (0, 0, 0),
        Kind::Incremental => {
            let p = catalog.open(v - 1).unwrap();
            let h = &p.meta.header;
            (v - 1, h.chain_depth + 1, p.meta.footer.meta_crc)
        }
    };
    let mut l = VersionLayout::new(
        NewVersion {
            kind,
            page_size: PS as u32,
            version: v,
            parent,
            chain_depth: depth,
            parent_meta_crc: parent_crc,
            store_id: catalog.identity().unwrap().0,
            created_unix_ns: 0,
            tag: 0,
        },
        regions,
    );
    let mut data = Vec::new();
    for &(r, p) in pages {
        let page = vec![0xEE; PS];
        l.push_page(r, p, ickpt::format::crc(&page));
        data.extend_from_slice(&page);
    }
    let mut f = l.prefix();
    f.extend_from_slice(&data);
    f.extend_from_slice(&l.trailer());
    std::fs::write(file(dir, v), f).unwrap();
}

fn region(length: u64, born: u64) -> RegionEntry {
    RegionEntry {
        id: 1,
        born,
        length,
        page_offset: 0,
    }
}

#[test]
fn a_region_changing_shape_along_a_chain_is_refused_by_verify_and_restore_alike() {
    // Outside testing: verify said OK, restore refused.
    let dir = scratch_dir("shape");
    run(&dir, 0x11, 1, 2);
    craft(
        &dir,
        3,
        Kind::Incremental,
        vec![region((PAGES * PS + 1) as u64, 1)],
        &[(0, 0)],
    );
    let report = assert_verify_agrees_with_restore(&dir);
    assert_eq!(report.restorable, vec![1, 2]);
    assert!(report.problems[0]
        .what
        .contains("changes within one incarnation"));
}

#[test]
fn a_region_missing_from_its_parent_is_refused() {
    // Version 3 claims region 7 was born in version 1, but version 2 does not hold it.
    let dir = scratch_dir("born");
    run(&dir, 0x11, 1, 2);
    let mut r = region((PAGES * PS) as u64, 1);
    r.id = 7;
    craft(
        &dir,
        3,
        Kind::Incremental,
        vec![region((PAGES * PS) as u64, 1), r],
        &[(0, 0)],
    );
    let report = assert_verify_agrees_with_restore(&dir);
    assert_eq!(report.restorable, vec![1, 2]);
    assert!(
        report.problems[0].what.contains("missing from its parent"),
        "{:?}",
        report.problems
    );
}

#[test]
fn a_region_of_2_to_the_56_bytes_is_an_error_not_an_abort() {
    // Outside testing: an increment claiming a 2^56-byte region made restore try to
    // allocate 16 TiB while verify said OK.
    let dir = scratch_dir("huge");
    run(&dir, 0x11, 1, 2);
    craft(
        &dir,
        3,
        Kind::Incremental,
        vec![region(1 << 56, 1)],
        &[(0, 0)],
    );
    let report = assert_verify_agrees_with_restore(&dir);
    assert_eq!(report.restorable, vec![1, 2]);
    assert!(report.problems[0]
        .what
        .contains("implausible region length"));
}

#[test]
fn a_sparse_file_claiming_2_to_the_32_regions_is_an_error_not_an_abort() {
    let dir = scratch_dir("sparse");
    run(&dir, 0x11, 1, 2);
    // The header of a real version with a huge region count, the rest a hole.
    let mut head = std::fs::read(file(&dir, 2)).unwrap()[..96].to_vec();
    head[16..24].copy_from_slice(&3u64.to_le_bytes());
    head[36..40].copy_from_slice(&u32::MAX.to_le_bytes());
    let f = std::fs::File::create(file(&dir, 3)).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &head, 0).unwrap();
    f.set_len(1 << 40).unwrap();
    drop(f);
    let report = assert_verify_agrees_with_restore(&dir);
    assert_eq!(report.restorable, vec![1, 2]);
    let e = Engine::open(Config::new(&dir)).unwrap();
    assert_eq!(e.latest().unwrap(), Some(2));
}

/// Each kind of bad file that outside testing put at the newest name.
fn plant(dir: &Path, how: &str) {
    let f = file(dir, 99_999_999);
    match how {
        "garbage" => std::fs::write(&f, vec![0x5A; 10_000]).unwrap(),
        "empty" => std::fs::write(&f, b"").unwrap(),
        "directory" => std::fs::create_dir(&f).unwrap(),
        "dangling symlink" => std::os::unix::fs::symlink(dir.join("nowhere"), &f).unwrap(),
        _ => unreachable!(),
    }
}

#[test]
fn a_bad_newest_file_never_blocks_the_restart_path() {
    for how in ["garbage", "empty", "directory", "dangling symlink"] {
        let dir = scratch_dir("stray");
        run(&dir, 0x11, 1, 3);
        plant(&dir, how);
        let e = Engine::open(Config::new(&dir)).unwrap();
        assert_eq!(e.latest().unwrap(), Some(3), "{how}");
        let listed = e.versions().unwrap();
        let bad: Vec<u64> = listed
            .iter()
            .filter(|s| !s.restorable())
            .map(|s| s.version)
            .collect();
        assert_eq!(bad, vec![99_999_999], "{how}");
        let p = e.alloc(1, PAGES * PS).unwrap();
        let info = e.restore_latest().unwrap().unwrap();
        assert_eq!(info.version, 3, "{how}");
        // SAFETY: alloc returned PAGES*PS bytes.
        let got = unsafe { std::slice::from_raw_parts(p, PAGES * PS) };
        assert!(got == &contents(0x11, 3)[..], "{how}");
        // Numbers are never reused: the next version comes after the bad name.
        assert_eq!(e.checkpoint().unwrap().version, 100_000_000, "{how}");
        drop(e);
        let report = verify(&dir);
        assert_eq!(report.problems.len(), 1, "{how}: {:?}", report.problems);
        assert!(
            report.problems[0].file.ends_with("v99999999.ickpt"),
            "{how}"
        );
    }
}

#[test]
fn damage_to_the_newest_version_or_its_full_base_leaves_older_versions_reachable() {
    // A damaged page in the newest version: its metadata is fine, so it is listed as the
    // latest, but restore_latest finds the damage while reading and moves on to version 2.
    let dir = scratch_dir("newest-page");
    run(&dir, 0x11, 1, 3);
    let f = file(&dir, 3);
    let mut b = std::fs::read(&f).unwrap();
    b[PS + 11] ^= 1; // inside version 3's only stored page
    std::fs::write(&f, b).unwrap();
    let e = Engine::open(Config::new(&dir)).unwrap();
    let p = e.alloc(1, PAGES * PS).unwrap();
    assert_eq!(e.restore_latest().unwrap().unwrap().version, 2);
    // SAFETY: alloc returned PAGES*PS bytes.
    assert!(unsafe { std::slice::from_raw_parts(p, PAGES * PS) } == &contents(0x11, 2)[..]);
    drop(e);
    assert_verify_agrees_with_restore(&dir);

    // Damaged metadata of the full base: the whole chain is out; nothing to restore, and
    // the error says so instead of pointing at one file.
    let dir = scratch_dir("base-meta");
    run(&dir, 0x11, 1, 3);
    let f = file(&dir, 1);
    let mut b = std::fs::read(&f).unwrap();
    b[20] ^= 1;
    std::fs::write(&f, b).unwrap();
    let e = Engine::open(Config::new(&dir)).unwrap();
    assert_eq!(e.latest().unwrap(), None);
    e.alloc(1, PAGES * PS).unwrap();
    let err = e.restore_latest().unwrap_err();
    assert!(
        matches!(
            err,
            RestoreError::Read(ReadError::NoRestorable { tried: 3, .. })
        ),
        "{err}"
    );
    drop(e);
    let report = assert_verify_agrees_with_restore(&dir);
    assert_eq!(report.problems.len(), 3);
}

#[test]
fn a_missing_version_lists_what_the_store_holds() {
    let dir = scratch_dir("missing");
    run(&dir, 0x11, 1, 3);
    let err = restore(&dir, 42).unwrap_err();
    assert!(err.to_string().contains("it holds: 1-3"), "{err}");
}

#[test]
fn an_empty_store_has_nothing_to_restore() {
    let dir = scratch_dir("empty");
    let e = Engine::open(Config::new(&dir)).unwrap();
    e.alloc(1, PS).unwrap();
    assert_eq!(e.latest().unwrap(), None);
    assert!(e.restore_latest().unwrap().is_none());
}

/// Version `v` (a full one) of the store at `from`, rewritten as an older ickpt (format 2)
/// would have written it as version `number`: the 64-byte header without identity or parent
/// checksum, no `previous_version`.
fn as_format_2(from: &Path, v: u64, number: u64) -> Vec<u8> {
    let f = std::fs::read(file(from, v)).unwrap();
    let regions = u32::from_le_bytes(f[36..40].try_into().unwrap()) as usize;
    let data_offset = u64::from_le_bytes(f[48..56].try_into().unwrap()) as usize;
    assert!(
        64 + 32 * regions <= data_offset,
        "the table still fits its page"
    );
    let mut g = f[..64].to_vec();
    g[8..10].copy_from_slice(&2u16.to_le_bytes());
    g[16..24].copy_from_slice(&number.to_le_bytes());
    g.extend_from_slice(&f[96..96 + 32 * regions]);
    g.resize(data_offset, 0);
    // Format 2's stats block is the first 80 bytes of today's: the phases (format 4) and the
    // pre-copy figures (format 7) after them are left out.
    let phases_at = f.len() - 64 - (ickpt::format::STATS_LEN - ickpt::format::STATS_LEN_V2);
    g.extend_from_slice(&f[data_offset..phases_at]);
    g.extend_from_slice(&f[f.len() - 64..]);
    let n = g.len() as u64;
    g[n as usize - 64 + 32..n as usize - 64 + 40].copy_from_slice(&n.to_le_bytes());
    let stats_at = g.len() - 64 - 80;
    g[stats_at + 72..stats_at + 80].fill(0);
    assert!(ickpt::fuzzing::reseal(&mut g, false).meta);
    g
}

#[test]
fn an_old_format_file_cannot_follow_a_store_s_bound_versions() {
    // Review: a format-2 full version from another run, put after a format-3 store's own
    // versions, carried no identity to refuse it by; verify passed it and restore_latest
    // restored the other run's bytes.
    let a = scratch_dir("legacy-a");
    let b = scratch_dir("legacy-b");
    run(&a, 0x11, 1, 2);
    // Raw pages: the surgery below knows no frame table.
    let raw = Config {
        compression: ickpt::Compression::Off,
        ..Config::new(&b)
    };
    run_with(raw, 0x22, 1, 1);
    let spliced = as_format_2(&b, 1, 3);
    std::fs::write(file(&a, 3), &spliced).unwrap();
    let report = assert_verify_agrees_with_restore(&a);
    assert_eq!(report.restorable, vec![1, 2]);
    assert!(
        report.problems[0].what.contains("began binding"),
        "{:?}",
        report.problems
    );
    let e = Engine::open(Config::new(&a)).unwrap();
    assert_eq!(e.latest().unwrap(), Some(2));
    drop(e);

    // Older-format versions numbered before the store's first format-3 version are the
    // store's own history (an upgraded store) and still restore.
    let c = scratch_dir("legacy-c");
    std::fs::create_dir_all(&c).unwrap();
    let own = as_format_2(&b, 1, 1);
    std::fs::write(file(&c, 1), own).unwrap();
    assert_eq!(restore(&c, 1).unwrap(), contents(0x22, 1));
}

#[test]
fn a_stray_name_near_the_last_version_number_is_an_error_not_lost_checkpoints() {
    // Review: numbering follows the highest name, so a stray `v4611686018427387904.ickpt`
    // (2^62, the last number the format allows) made every later checkpoint a file no reader
    // accepts, while ickpt_checkpoint said OK.
    let dir = scratch_dir("stray-max");
    run(&dir, 0x11, 1, 1);
    let last = ickpt::format::limits::MAX_VERSION;
    std::fs::write(file(&dir, last), b"").unwrap();
    let e = Engine::open(Config::new(&dir)).unwrap();
    let p = e.alloc(1, PAGES * PS).unwrap();
    assert_eq!(e.restore_latest().unwrap().unwrap().version, 1);
    // SAFETY: alloc returned PAGES*PS bytes.
    unsafe { *p = 0xAB };
    let err = e.checkpoint().unwrap_err();
    assert!(
        err.to_string().contains(&version_name(last)) && err.to_string().contains("move it"),
        "{err}"
    );
}

#[test]
fn garbage_collection_keeps_the_chain_the_engine_builds_on() {
    // Review: after restore_latest fell back past a newer chain (a damaged page of its full
    // version), collect_garbage deleted the older chain the engine was extending.
    // Chain A: 1 (full), 2. Chain B: 3 (full, written after a restore of 2), 4.
    let dir = scratch_dir("gc-head2");
    run(&dir, 0x11, 1, 2);
    {
        let mut cfg = Config::new(&dir);
        cfg.full_every = 1;
        let e = Engine::open(cfg).unwrap();
        let p = e.alloc(1, PAGES * PS).unwrap();
        e.restore(2).unwrap();
        // SAFETY: alloc returned PAGES*PS bytes.
        unsafe { *p.add(5 * PS) = 0x55 };
        assert_eq!(e.checkpoint().unwrap().kind, Kind::Full);
    }
    {
        let e = Engine::open(Config::new(&dir)).unwrap();
        let p = e.alloc(1, PAGES * PS).unwrap();
        e.restore(3).unwrap();
        // SAFETY: as above.
        unsafe { *p.add(6 * PS) = 0x66 };
        assert_eq!(e.checkpoint().unwrap().parent, 3);
    }
    // Damage a page of version 3 that version 4 did not rewrite (page 0).
    let f = file(&dir, 3);
    let mut b = std::fs::read(&f).unwrap();
    b[PS + 1] ^= 1;
    std::fs::write(&f, b).unwrap();

    let mut cfg = Config::new(&dir);
    cfg.keep_chains = 1;
    let e = Engine::open(cfg).unwrap();
    let p = e.alloc(1, PAGES * PS).unwrap();
    assert_eq!(e.restore_latest().unwrap().unwrap().version, 2);
    let deleted = e.collect_garbage().unwrap();
    assert!(
        !deleted.contains(&1) && !deleted.contains(&2),
        "{deleted:?}"
    );
    // SAFETY: as above.
    unsafe { *p.add(7 * PS) = 0x77 };
    let v5 = e.checkpoint().unwrap();
    assert_eq!(v5.parent, 2);
    drop(e);
    let mut want = contents(0x11, 2);
    want[7 * PS] = 0x77;
    assert_eq!(restore(&dir, v5.version).unwrap(), want);
}
