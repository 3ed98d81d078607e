//! Opening a store directory: the marker and the store's identity, a store that lost its
//! marker, temporaries a crashed writer left, and errors that say what is wrong.

use crate::common;
use common::{scratch_dir, Buf};
use ickpt::read::catalog;
use ickpt::store::{DirStore, OpenError, Store, StoreId};
use ickpt::{Config, Engine};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;

const PS: usize = 4096;

/// A store with two committed versions, written by an engine.
fn make_store(dir: &Path) {
    let e = Engine::with_store(
        Config::new(dir),
        Arc::new(DirStore::open_write(dir).unwrap()),
    )
    .unwrap();
    let mut buf = Buf::new(4 * PS);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    buf.slice_mut().fill(7);
    e.checkpoint().unwrap();
    buf.slice_mut()[PS] = 8;
    e.checkpoint().unwrap();
}

fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    n.sort();
    n
}

#[test]
fn the_marker_is_format_2_and_records_the_identity_atomically() {
    let dir = scratch_dir("marker");
    let store = DirStore::open_write(&dir).unwrap();
    let marker = dir.join("ickpt-store");
    assert_eq!(
        fs::read_to_string(&marker).unwrap(),
        "ickpt checkpoint store, format 2\n"
    );
    assert_eq!(store.identity().unwrap(), None);
    let id = StoreId::generate().unwrap();
    store.set_identity(id).unwrap();
    assert_eq!(
        fs::read_to_string(&marker).unwrap(),
        format!("ickpt checkpoint store, format 2\nid {id}\n")
    );
    assert_eq!(store.identity().unwrap(), Some(id));
    assert_eq!(
        names(&dir),
        vec!["ickpt-lock", "ickpt-store"],
        "no temporary left"
    );
    drop(store);
    let again = DirStore::open_write(&dir).unwrap();
    assert_eq!(again.identity().unwrap(), Some(id));
    assert_eq!(
        DirStore::open_read(&dir).unwrap().identity().unwrap(),
        Some(id)
    );
}

#[test]
fn a_format_1_marker_is_still_a_store_without_identity() {
    let dir = scratch_dir("marker-v1");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("ickpt-store"),
        "ickpt checkpoint store, format 1\n",
    )
    .unwrap();
    let store = DirStore::open_write(&dir).unwrap();
    assert_eq!(store.identity().unwrap(), None);
    let id = StoreId::generate().unwrap();
    store.set_identity(id).unwrap();
    assert_eq!(store.identity().unwrap(), Some(id));
}

#[test]
fn a_store_that_lost_its_marker_still_opens() {
    let dir = scratch_dir("lost-marker");
    make_store(&dir);
    fs::remove_file(dir.join("ickpt-store")).unwrap();
    fs::write(dir.join(".tmp-v00000003.ickpt.99.0"), b"torn").unwrap();
    let store = DirStore::open_read(&dir).expect("read without the marker");
    assert_eq!(catalog::versions(&store).unwrap(), vec![1, 2]);
    let store = DirStore::open_write(&dir).expect("a writer recreates the marker");
    assert_eq!(store.identity().unwrap(), None);
    assert_eq!(
        names(&dir),
        vec![
            "ickpt-lock",
            "ickpt-store",
            "v00000001.ickpt",
            "v00000002.ickpt"
        ]
    );
    let report = ickpt::read::verify::verify_store(&store, &mut |_, _| {}).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    drop(store);
    // The engine records the identity the versions carry, and restores them.
    let e = Engine::open(Config::new(&dir)).unwrap();
    let buf = Buf::new(4 * PS);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    e.restore(2).unwrap();
    let mut want = vec![7u8; 4 * PS];
    want[PS] = 8;
    assert!(buf.slice() == &want[..], "restored bytes differ");
    assert!(e.store().identity().unwrap().is_some());
    // Before `buf`, which it protects.
    drop(e);
}

#[test]
fn a_directory_with_anything_else_is_refused_naming_it() {
    for (foreign, make) in [
        (
            "notes.txt",
            (|p: &Path| fs::write(p, "mine").unwrap()) as fn(&Path),
        ),
        ("v00000009.ickpt", |p| {
            fs::write(p, "not a version").unwrap()
        }),
        ("subdir", |p| fs::create_dir(p).unwrap()),
        (".tmp-dir", |p| fs::create_dir(p).unwrap()),
    ] {
        let dir = scratch_dir("foreign");
        make_store(&dir);
        fs::remove_file(dir.join("ickpt-store")).unwrap();
        make(&dir.join(foreign));
        let before = names(&dir);
        for err in [
            DirStore::open_write(&dir).unwrap_err(),
            DirStore::open_read(&dir).unwrap_err(),
        ] {
            assert!(matches!(err, OpenError::NotAStore { .. }), "{err}");
            assert!(err.to_string().contains(&format!("'{foreign}'")), "{err}");
        }
        assert_eq!(names(&dir), before, "nothing written or removed");
    }
}

#[test]
fn temporaries_of_a_crashed_writer_are_removed_but_not_directories() {
    let dir = scratch_dir("temps");
    make_store(&dir);
    let outside = scratch_dir("temps-outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("kept"), b"kept").unwrap();
    fs::write(dir.join(".tmp-v00000003.ickpt.1234"), b"torn").unwrap();
    symlink(outside.join("kept"), dir.join(".tmp-link")).unwrap();
    symlink(&outside, dir.join(".tmp-dirlink")).unwrap();
    fs::create_dir(dir.join(".tmp-x")).unwrap();
    fs::write(dir.join(".tmp-x/inside"), b"inside").unwrap();
    DirStore::open_write(&dir).expect("a directory named .tmp-x is not an error");
    assert_eq!(
        names(&dir),
        vec![
            ".tmp-x",
            "ickpt-lock",
            "ickpt-store",
            "v00000001.ickpt",
            "v00000002.ickpt"
        ]
    );
    assert_eq!(fs::read(outside.join("kept")).unwrap(), b"kept");
    assert_eq!(fs::read(dir.join(".tmp-x/inside")).unwrap(), b"inside");
}

#[test]
fn a_file_as_the_store_path_says_so() {
    let dir = scratch_dir("file-path");
    fs::create_dir_all(dir.parent().unwrap()).unwrap();
    fs::write(&dir, b"a file").unwrap();
    for err in [
        DirStore::open_write(&dir).unwrap_err(),
        DirStore::open_read(&dir).unwrap_err(),
    ] {
        assert_eq!(
            err.to_string(),
            format!(
                "{} is a file, not a directory: give ickpt a directory for its store",
                dir.display()
            )
        );
    }
    let e = Engine::open(Config::new(&dir)).err().expect("refused");
    assert_eq!(
        ickpt::capi::code_of(&e.into()),
        ickpt::capi::ickpt_result::ICKPT_ERR_NOT_A_STORE
    );
}

#[test]
fn reading_a_missing_or_empty_directory_says_which() {
    let dir = scratch_dir("missing");
    let err = DirStore::open_read(&dir).unwrap_err();
    assert_eq!(err.to_string(), format!("{} does not exist", dir.display()));
    fs::create_dir_all(&dir).unwrap();
    let err = DirStore::open_read(&dir).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{} is not an ickpt store (no 'ickpt-store' file)",
            dir.display()
        )
    );
}

#[test]
fn files_written_before_stores_were_owner_only_are_made_so() {
    // Review: version files a store held from before (0644 under umask 022) stayed readable
    // by anyone after an upgrade.
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch_dir("old-modes");
    drop(DirStore::open_write(&dir).unwrap());
    let version = dir.join("v00000001.ickpt");
    std::fs::write(&version, b"\x89ICKPT\r\n an old version").unwrap();
    for f in [&version, &dir.join("ickpt-store")] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    drop(DirStore::open_write(&dir).unwrap());
    for f in [&version, &dir.join("ickpt-store")] {
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.display());
    }
}
