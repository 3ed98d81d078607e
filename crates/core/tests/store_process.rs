//! Store behaviour that depends on process-wide settings (the umask, `ICKPT_RENAME`). One
//! test in its own binary, so that no other test runs while they are changed.

mod common;
use common::{scratch_dir, Scratch};
use ickpt::store::{DirStore, RenameMode, Store, StoreId};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

fn set_umask(m: u32) {
    // SAFETY: umask has no memory-safety preconditions.
    unsafe { libc::umask(m as libc::mode_t) };
}

fn files_are_owner_only(umask: u32) {
    set_umask(umask);
    let scratch = scratch_dir("modes");
    let dir = scratch.join("store");
    let store = DirStore::open_write(&dir).unwrap();
    let mut w = store.create("v00000001.ickpt").unwrap();
    w.write_all(b"data").unwrap();
    w.commit().unwrap();
    store.set_identity(StoreId::generate().unwrap()).unwrap();
    assert_eq!(mode(&dir), 0o700, "umask {umask:03o}: directory");
    assert_eq!(
        mode(&dir.join("ickpt-store")),
        0o600,
        "umask {umask:03o}: marker"
    );
    assert_eq!(
        mode(&dir.join("v00000001.ickpt")),
        0o600,
        "umask {umask:03o}: version"
    );
}

fn rename_setting(value: &str) -> (Scratch, Result<ickpt::Engine, ickpt::InitError>) {
    std::env::set_var("ICKPT_RENAME", value);
    let dir = scratch_dir("rename-env");
    let r = ickpt::Engine::open(ickpt::Config::new(&*dir));
    std::env::remove_var("ICKPT_RENAME");
    (dir, r)
}

#[test]
fn process_wide_settings() {
    let old = {
        // SAFETY: as in set_umask.
        unsafe { libc::umask(0o022) }
    };
    files_are_owner_only(0o022);
    files_are_owner_only(0);
    set_umask(old as u32);

    // ICKPT_RENAME is the engine's setting (config::env), refused when malformed before the
    // directory is touched; the store itself takes the mode as a value.
    let (dir, r) = rename_setting("hardlink");
    let err = r.err().expect("refused");
    assert!(matches!(err, ickpt::InitError::Setting { .. }), "{err}");
    assert!(err.to_string().contains("ICKPT_RENAME"), "{err}");
    assert_eq!(
        ickpt::capi::code_of(&err.into()),
        ickpt::capi::ickpt_result::ICKPT_ERR_INVALID_ARGUMENT
    );
    assert!(!dir.exists(), "the directory was touched");
    let (_dir, e) = rename_setting("link");
    let e = e.unwrap();
    e.alloc(1, 4096).unwrap();
    assert_eq!(e.checkpoint().unwrap().version, 1);
    std::env::set_var("ICKPT_RENAME", "hardlink");
    let plain = scratch_dir("rename-env-store");
    let store = DirStore::open_write(&plain);
    std::env::remove_var("ICKPT_RENAME");
    let store = store.expect("a store opened directly reads no variable");
    let mut w = store.create("v00000001.ickpt").unwrap();
    w.write_all(b"x").unwrap();
    w.commit().unwrap();
    assert_eq!(store.rename_method(), Some(RenameMode::NoReplace));
}
