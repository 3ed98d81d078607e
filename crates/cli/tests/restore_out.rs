//! `ickpt restore --out F` in a directory another user can write: whatever they planted at F,
//! the checkpointed memory never reaches them and none of the user's own files is replaced
//! through it (SECURITY.md, "Files written outside the store").

use ickpt::{Config, Engine};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

mod common;
use common::{as_other_ok, ickpt, other_user, scratch, text};

const LEN: usize = 3 * 4096 + 100;

/// A store whose region 1 holds a recognisable pattern; returns it.
fn make_store(dir: &Path) -> Vec<u8> {
    let e = Engine::open(Config::new(dir)).unwrap();
    let p = e.alloc(1, LEN).unwrap();
    // SAFETY: alloc returned LEN bytes, live while `e` lives.
    let mem = unsafe { std::slice::from_raw_parts_mut(p, LEN) };
    for (i, b) in mem.iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    e.checkpoint().unwrap();
    mem.to_vec()
}

fn restore_to(dir: &Path, out: &Path) -> std::process::Output {
    ickpt(&[
        "restore",
        "--dir",
        dir.to_str().unwrap(),
        "--region",
        "1",
        "--out",
        out.to_str().unwrap(),
    ])
}

/// A directory anyone can write, as /tmp is (sticky) or as a shared project directory may be
/// (not sticky, where `fs.protected_symlinks` protects nothing).
fn shared_dir(base: &Path, name: &str, mode: u32) -> std::path::PathBuf {
    let d = base.join(name);
    fs::create_dir_all(&d).unwrap();
    fs::set_permissions(&d, fs::Permissions::from_mode(mode)).unwrap();
    d
}

#[test]
fn a_link_planted_by_another_user_is_refused_and_its_target_untouched() {
    let base = scratch("out-link");
    let store = base.join("store");
    make_store(&store);
    other_user();
    let private = base.join("private");
    fs::create_dir_all(&private).unwrap();
    let own = private.join("notes");
    fs::write(&own, b"the user's own file\n").unwrap();
    fs::set_permissions(&own, fs::Permissions::from_mode(0o600)).unwrap();
    for (name, mode) in [("sticky", 0o1777), ("open", 0o777)] {
        let shared = shared_dir(&base, name, mode);
        let out = shared.join("restored.bin");
        as_other_ok("ln", &["-s", own.to_str().unwrap(), out.to_str().unwrap()]);
        let r = restore_to(&store, &out);
        assert!(!r.status.success(), "{name}: restored through the link");
        let t = text(&r);
        assert!(
            t.contains(out.to_str().unwrap()) && t.contains("symbolic link"),
            "{name}: {t}"
        );
        assert!(
            fs::read(&own).unwrap() == b"the user's own file\n",
            "{name}: the link's target was written"
        );
        assert!(fs::symlink_metadata(&out).unwrap().file_type().is_symlink());
        assert_eq!(
            fs::read_dir(&shared).unwrap().count(),
            1,
            "{name}: no temporary left"
        );
    }
}

#[test]
fn a_file_another_user_owns_is_never_written() {
    let base = scratch("out-theirs");
    let store = base.join("store");
    let memory = make_store(&store);
    let (uid, _) = other_user();
    for (name, mode) in [("sticky", 0o1777), ("open", 0o777)] {
        let shared = shared_dir(&base, name, mode);
        let out = shared.join("restored.bin");
        // Theirs, and anyone may write it: a restore in place would let them read it.
        as_other_ok(
            "sh",
            &["-c", &format!("umask 0; echo bait > '{}'", out.display())],
        );
        let r = restore_to(&store, &out);
        assert!(!r.status.success(), "{name}: wrote into their file");
        let t = text(&r);
        assert!(t.contains(&format!("belongs to uid {uid}")), "{name}: {t}");
        assert!(
            fs::read(&out).unwrap() == b"bait\n",
            "{name}: their file was written"
        );
        assert_eq!(fs::metadata(&out).unwrap().uid(), uid);
        assert_ne!(fs::read(&out).unwrap(), memory);
    }
}

#[test]
fn the_output_is_owner_only_and_replaces_the_users_own_file_whole() {
    let base = scratch("out-own");
    let store = base.join("store");
    let memory = make_store(&store);
    let shared = shared_dir(&base, "sticky", 0o1777);
    // New: owner-only whatever the umask.
    let out = shared.join("new.bin");
    let r = restore_to(&store, &out);
    assert!(r.status.success(), "{}", text(&r));
    assert!(fs::read(&out).unwrap() == memory, "restored bytes differ");
    assert_eq!(fs::metadata(&out).unwrap().mode() & 0o777, 0o600);
    // The user's own, readable by anyone: replaced by an owner-only file.
    let old = shared.join("old.bin");
    fs::write(&old, b"older bytes").unwrap();
    fs::set_permissions(&old, fs::Permissions::from_mode(0o644)).unwrap();
    let r = restore_to(&store, &old);
    assert!(r.status.success(), "{}", text(&r));
    assert!(fs::read(&old).unwrap() == memory, "restored bytes differ");
    assert_eq!(fs::metadata(&old).unwrap().mode() & 0o777, 0o600);
    let names: Vec<_> = fs::read_dir(&shared)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "no temporary left: {names:?}");
}

#[test]
fn a_failed_restore_leaves_the_output_as_it_was() {
    let base = scratch("out-failed");
    let store = base.join("store");
    make_store(&store);
    // A damaged page: the restore fails after it began writing.
    let v1 = store.join(ickpt::store::version_name(1));
    let mut b = fs::read(&v1).unwrap();
    b[4096 + 17] ^= 0x40;
    fs::write(&v1, b).unwrap();
    let out = base.join("kept.bin");
    fs::write(&out, b"kept").unwrap();
    let r = ickpt(&[
        "restore",
        "--dir",
        store.to_str().unwrap(),
        "--version",
        "1",
        "--region",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!r.status.success(), "{}", text(&r));
    assert!(text(&r).contains("checksum"), "{}", text(&r));
    assert!(fs::read(&out).unwrap() == b"kept", "the output was changed");
    assert_eq!(
        fs::read_dir(&base).unwrap().count(),
        2,
        "store and kept.bin only"
    );
}
