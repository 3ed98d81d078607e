//! However a version gets its final name (RENAME_NOREPLACE, link + unlink, or a checked
//! rename), a committed version is never replaced; `auto` finds the method once per store
//! and falls back where the file system lacks RENAME_NOREPLACE (FUSE, NFS) or hard links.

use crate::common;
use common::scratch_dir;
use ickpt::store::{
    CrashFs, CrashOptions, DirStore, RealFs, RenameMode, Store, StoreFs, StoreWriter,
};
use std::io;
use std::path::Path;

const MODES: [RenameMode; 4] = [
    RenameMode::Auto,
    RenameMode::NoReplace,
    RenameMode::Link,
    RenameMode::Rename,
];

fn commit(store: &DirStore, name: &str, data: &[u8]) -> io::Result<()> {
    let mut w: Box<dyn StoreWriter> = store.create(name)?;
    w.write_all(data)?;
    w.commit()
}

fn read(store: &DirStore, name: &str) -> Vec<u8> {
    let f = store.open(name).unwrap();
    let mut b = vec![0; f.len() as usize];
    f.read_exact_at(&mut b, 0).unwrap();
    b
}

/// Commit v1, then try to commit v1 again: EEXIST, and v1 keeps its bytes.
fn never_replaces(fs: &dyn StoreFs, dir: &Path, mode: RenameMode) -> DirStore {
    let store = DirStore::open_write_on(fs, dir, mode).unwrap();
    commit(&store, "v00000001.ickpt", b"committed").unwrap();
    let err = commit(&store, "v00000001.ickpt", b"replacement").unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{mode:?}: {err}");
    assert_eq!(read(&store, "v00000001.ickpt"), b"committed", "{mode:?}");
    assert_eq!(
        store.list().unwrap(),
        vec!["v00000001.ickpt"],
        "{mode:?}: nothing else listed"
    );
    commit(&store, "v00000002.ickpt", b"next").unwrap();
    assert_eq!(read(&store, "v00000002.ickpt"), b"next", "{mode:?}");
    store
}

#[test]
fn every_method_never_replaces_a_version_on_a_local_file_system() {
    for mode in MODES {
        let dir = scratch_dir("rename");
        let store = never_replaces(&RealFs, &dir, mode);
        let used = if mode == RenameMode::Auto {
            RenameMode::NoReplace
        } else {
            mode
        };
        assert_eq!(store.rename_method(), Some(used));
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with(".tmp-"))
            .collect();
        assert!(left.is_empty(), "{mode:?}: temporaries left: {left:?}");
    }
}

#[test]
fn auto_falls_back_to_links_without_rename_noreplace_and_finds_out_once() {
    let fs = CrashFs::new(CrashOptions {
        no_rename_noreplace: true,
        ..Default::default()
    });
    let store = never_replaces(&fs, Path::new("/sim"), RenameMode::Auto);
    assert_eq!(store.rename_method(), Some(RenameMode::Link));
    commit(&store, "v00000003.ickpt", b"more").unwrap();
    assert_eq!(fs.noreplace_refusals(), 1, "RENAME_NOREPLACE tried once");
    assert!(
        fs.names().iter().all(|n| !n.starts_with(".tmp-")),
        "{:?}",
        fs.names()
    );
}

#[test]
fn auto_falls_back_to_a_checked_rename_without_hard_links() {
    let fs = CrashFs::new(CrashOptions {
        no_rename_noreplace: true,
        no_link: true,
        ..Default::default()
    });
    let store = never_replaces(&fs, Path::new("/sim"), RenameMode::Auto);
    assert_eq!(store.rename_method(), Some(RenameMode::Rename));
    assert_eq!(fs.noreplace_refusals(), 1);
}

#[test]
fn forcing_rename_noreplace_where_it_is_missing_fails_as_before() {
    let fs = CrashFs::new(CrashOptions {
        no_rename_noreplace: true,
        ..Default::default()
    });
    let store = DirStore::open_write_on(&fs, Path::new("/sim"), RenameMode::NoReplace).unwrap();
    let err = commit(&store, "v00000001.ickpt", b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn rename_modes_parse() {
    for (s, m) in [
        ("auto", RenameMode::Auto),
        ("noreplace", RenameMode::NoReplace),
        ("link", RenameMode::Link),
        ("rename", RenameMode::Rename),
    ] {
        assert_eq!(RenameMode::parse(s), Some(m));
    }
    for bad in ["", "Auto", "hardlink", "rename "] {
        assert_eq!(RenameMode::parse(bad), None, "{bad:?}");
    }
}
