//! The fuzz corpus, replayed on stable: every input checked in under `fuzz/corpus/<target>/`
//! goes through the same target body the fuzzer ran (`ickpt::fuzzing`), so what fuzzing
//! found stays found without a nightly toolchain. `write_fuzz_seeds` (ignored) writes the
//! seeds the corpus grew from: real stores' files.

use crate::common;
use common::{scratch_dir, Buf};
use ickpt::format::{CommitMode, FlushOrder};
use ickpt::fuzzing::{
    chain_restore_target, delta_file_target, flag, global_record_target, input_store,
    read_meta_resealed_target, read_meta_target, reseal,
};
use ickpt::{Config, Engine};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

const PS: usize = 4096;

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// Every input under `fuzz/<kind>/<target>/`, in name order.
fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = fuzz_dir().join(kind).join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

/// Run `body` over the corpus of `target` and report every input that panics, by name.
fn replay(target: &str, body: fn(&[u8]), at_least: usize) {
    let files = inputs("corpus", target);
    assert!(
        files.len() >= at_least,
        "fuzz/corpus/{target} holds {} inputs, expected at least {at_least}",
        files.len()
    );
    let failed: Vec<String> = files
        .iter()
        .filter(|path| {
            let data = std::fs::read(path).unwrap();
            catch_unwind(AssertUnwindSafe(|| body(&data))).is_err()
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(failed.is_empty(), "inputs that fail: {failed:#?}");
}

#[test]
fn delta_file_corpus_replays() {
    replay("delta_file", delta_file_target, 4);
}

#[test]
fn global_record_corpus_replays() {
    replay("global_record", global_record_target, 2);
}

#[test]
fn read_meta_corpus_replays() {
    replay("read_meta", read_meta_target, 10);
}

#[test]
fn read_meta_resealed_corpus_replays() {
    replay("read_meta_resealed", read_meta_resealed_target, 10);
}

#[test]
fn chain_restore_corpus_replays() {
    replay("chain_restore", chain_restore_target, 5);
}

#[test]
fn regression_region_end_overflow() {
    // Found by read_meta_resealed: region 0 of a real full version with its length turned
    // into almost 2^64, so page_offset + length wrapped to one page and the file passed.
    let mut f =
        std::fs::read(fuzz_dir().join("corpus/read_meta_resealed/regression-region-end-overflow"))
            .unwrap();
    read_meta_resealed_target(&f);
    let pages = f.last().is_some_and(|b| b & 1 == 1);
    reseal(&mut f, pages);
    let e = ickpt::format::read_meta(&f.as_slice(), f.len() as u64).unwrap_err();
    let region_length = ickpt::format::HEADER_LEN as u64 + 16;
    assert_eq!(e.offset(), Some(region_length), "{e}");
}

/// (versions, restorable versions) of the store a chain_restore input makes, as `verify`
/// sees it.
fn verified(input: &[u8]) -> (Vec<u64>, Vec<u64>) {
    let (store, _) = input_store(input);
    let r = ickpt::read::verify::verify_store(&store, &mut |_, _| {}).unwrap();
    (r.versions, r.restorable)
}

#[test]
fn chain_inputs_of_real_files_restore_whole() {
    for format in 1..=3 {
        let input = fixture_files(format).concat();
        assert_eq!(
            verified(&input),
            (vec![1, 2, 3], vec![1, 2, 3]),
            "v{format}"
        );
        chain_restore_target(&input);
    }
}

#[test]
fn chain_input_flags_choose_what_is_resealed_and_bound() {
    let files = fixture_files(3);
    let with = |flags: u8, f: &[Vec<u8>]| [vec![flags], f.concat()].concat();
    // A changed page of version 2: resealed by default, left failing its CRC on request,
    // which takes version 3 down with it.
    let mut paged = files.clone();
    paged[1][4096] ^= 1;
    assert_eq!(verified(&with(0, &paged)).1, [1, 2, 3]);
    assert_eq!(verified(&with(flag::KEEP_PAGE_CRCS, &paged)).1, [1]);
    // A changed header of version 1 changes its meta_crc: bound again by default; unbound,
    // version 2 no longer names it as its parent.
    let mut header = files.clone();
    header[0][40] ^= 1;
    assert_eq!(verified(&with(0, &header)).1, [1, 2, 3]);
    assert_eq!(verified(&with(flag::UNBOUND, &header)).1, [1]);
    // Named by position, a missing version 2 makes the old version 3 the new version 2.
    let skipped = [files[0].clone(), files[2].clone()];
    assert_eq!(verified(&with(0, &skipped)), (vec![1, 3], vec![1]));
    assert_eq!(
        verified(&with(flag::NAME_BY_POSITION, &skipped)),
        (vec![1, 2], vec![1])
    );
    for flags in 0..32 {
        chain_restore_target(&with(flags, &paged));
    }
}

/// The version files, oldest first, of a store the engine writes by taking `steps`.
fn write_store(name: &str, cfg: impl FnOnce(&mut Config), steps: &[Step]) -> Vec<Vec<u8>> {
    let dir = scratch_dir(name);
    let mut c = Config::new(&dir);
    c.keep_chains = 100;
    cfg(&mut c);
    let e = Engine::open(c).unwrap();
    let mut buf = Buf::new(8 * PS);
    for step in steps {
        match *step {
            Step::Protect { id, at, len } => {
                // SAFETY: `buf` outlives the engine (dropped first below); regions never overlap.
                unsafe { e.protect(id, buf.ptr.add(at), len).unwrap() }
            }
            Step::Unprotect(id) => e.unprotect(id).unwrap(),
            Step::Write { at, len, fill } => buf.slice_mut()[at..at + len].fill(fill),
            Step::Checkpoint => {
                e.checkpoint().unwrap();
                e.wait().unwrap();
            }
        }
    }
    drop(e);
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ickpt"))
        .collect();
    names.sort();
    let files = names.iter().map(|p| std::fs::read(p).unwrap()).collect();
    std::fs::remove_dir_all(&dir).unwrap();
    files
}

enum Step {
    Protect { id: u64, at: usize, len: usize },
    Unprotect(u64),
    Write { at: usize, len: usize, fill: u8 },
    Checkpoint,
}

fn fixture_files(format: u16) -> Vec<Vec<u8>> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/format-v{format}"));
    (1..=3)
        .map(|v| std::fs::read(dir.join(format!("v{v:08}.ickpt"))).unwrap())
        .collect()
}

fn put(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

/// Seeds from real files: two stores written by the engine (regions aligned and not, a
/// region freed and one re-protected as a new incarnation, an empty increment, async and
/// sync commits, two chains) and the fixtures of formats 1–3. Each file seeds the reader
/// targets; each store, its files concatenated, seeds `chain_restore`.
#[test]
#[ignore = "writes fuzz/corpus/*/seed-*; run when the format changes, then fuzz and minimise"]
fn write_fuzz_seeds() {
    use Step::*;
    let regions = write_store(
        "seeds-regions",
        |c| c.flush_order = FlushOrder::Address,
        &[
            Protect {
                id: 1,
                at: 0,
                len: 2 * PS,
            },
            Protect {
                id: 2,
                at: 2 * PS + 17,
                len: 100,
            },
            Protect {
                id: 3,
                at: 3 * PS + 4000,
                len: 5000,
            },
            Write {
                at: 0,
                len: 8 * PS,
                fill: 0x5A,
            },
            Checkpoint,
            Write {
                at: PS + 10,
                len: 10,
                fill: 0xEE,
            },
            Write {
                at: 4 * PS + 100,
                len: 1,
                fill: 0x01,
            },
            Checkpoint,
            Write {
                at: 2 * PS + 50,
                len: 3,
                fill: 0x77,
            },
            Checkpoint,
            Unprotect(2),
            Protect {
                id: 4,
                at: 6 * PS + 100,
                len: 300,
            },
            Write {
                at: 6 * PS + 200,
                len: 8,
                fill: 0x44,
            },
            Checkpoint,
            Unprotect(3),
            Protect {
                id: 3,
                at: 3 * PS + 4000,
                len: 5000,
            },
            Checkpoint,
            Checkpoint,
        ],
    );
    let chains = write_store(
        "seeds-chains",
        |c| {
            c.full_every = 2;
            c.mode = CommitMode::Async;
        },
        &[
            Protect {
                id: 7,
                at: 0,
                len: 3 * PS,
            },
            Write {
                at: 0,
                len: 3 * PS,
                fill: 0x3C,
            },
            Checkpoint,
            Write {
                at: 2 * PS,
                len: 1,
                fill: 0x01,
            },
            Checkpoint,
            Write {
                at: PS,
                len: 1,
                fill: 0x02,
            },
            Checkpoint,
            Write {
                at: 0,
                len: 1,
                fill: 0x03,
            },
            Checkpoint,
        ],
    );
    let stores = [
        ("regions", regions),
        ("chains", chains),
        ("fixture-v1", fixture_files(1)),
        ("fixture-v2", fixture_files(2)),
        ("fixture-v3", fixture_files(3)),
    ];
    let corpus = fuzz_dir().join("corpus");
    for (name, files) in &stores {
        for (i, f) in files.iter().enumerate() {
            for target in ["read_meta", "read_meta_resealed"] {
                put(&corpus.join(target), &format!("seed-{name}-{}", i + 1), f);
            }
        }
        put(
            &corpus.join("chain_restore"),
            &format!("seed-{name}"),
            &files.concat(),
        );
    }
}
