//! The store directory may be shared with other users, and its files are untrusted: links
//! in it are never followed, a directory others can write to is refused for writing, a
//! read-only one is refused at open, and the lock holds whatever happens to the marker.

use crate::common;
use common::{scratch_dir, Scratch};
use ickpt::store::{DirStore, OpenError, Store, StoreId, StoreWriter};
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

const SECRET: &[u8] = b"another user's private file\n";

/// A file outside the store that a planted link points to; it must never change.
fn victim(name: &str) -> (Scratch, PathBuf) {
    let d = scratch_dir(name);
    fs::create_dir_all(&d).unwrap();
    let v = d.join("victim");
    fs::write(&v, SECRET).unwrap();
    fs::set_permissions(&v, fs::Permissions::from_mode(0o600)).unwrap();
    (d, v)
}

fn is_symlink(p: &Path) -> bool {
    fs::symlink_metadata(p).unwrap().file_type().is_symlink()
}

fn commit(store: &DirStore, name: &str, data: &[u8]) -> std::io::Result<()> {
    let mut w: Box<dyn StoreWriter> = store.create(name)?;
    w.write_all(data)?;
    w.commit()
}

#[test]
fn links_at_temporary_names_are_never_written_through() {
    let dir = scratch_dir("link-tmp");
    let (_victim_dir, target) = victim("link-tmp-victim");
    let store = DirStore::open_write(&dir).unwrap();
    // Every name this process could pick for its first temporaries, old and new schemes.
    let stem = format!(".tmp-v00000001.ickpt.{}", std::process::id());
    symlink(&target, dir.join(&stem)).unwrap();
    for n in 0..8 {
        symlink(&target, dir.join(format!("{stem}.{n}"))).unwrap();
    }
    commit(&store, "v00000001.ickpt", b"checkpoint bytes").unwrap();
    assert_eq!(
        fs::read(&target).unwrap(),
        SECRET,
        "the link's target was written"
    );
    let v = dir.join("v00000001.ickpt");
    assert!(!is_symlink(&v), "a planted link became the version");
    assert_eq!(fs::read(&v).unwrap(), b"checkpoint bytes");
}

#[test]
fn a_link_at_a_version_name_is_reported_never_read_or_replaced() {
    let dir = scratch_dir("link-version");
    let (_victim_dir, target) = victim("link-version-victim");
    let store = DirStore::open_write(&dir).unwrap();
    symlink(&target, dir.join("v00000001.ickpt")).unwrap();
    let err = store.open("v00000001.ickpt").err().expect("opened a link");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    let err = ickpt::read::catalog::Catalog::new(&store)
        .unwrap()
        .open(1)
        .err()
        .expect("opened a link");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    let err = commit(&store, "v00000001.ickpt", b"new").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists, "{err}");
    assert_eq!(fs::read(&target).unwrap(), SECRET);
    assert!(is_symlink(&dir.join("v00000001.ickpt")));
}

#[test]
fn a_link_as_the_marker_is_refused_and_never_read() {
    let dir = scratch_dir("link-marker");
    fs::create_dir_all(&dir).unwrap();
    let (_victim_dir, target) = victim("link-marker-victim");
    symlink(&target, dir.join("ickpt-store")).unwrap();
    for err in [
        DirStore::open_write(&dir).unwrap_err(),
        DirStore::open_read(&dir).unwrap_err(),
    ] {
        let msg = err.to_string();
        assert!(
            msg.contains("ickpt-store") && msg.contains("symbolic link"),
            "{msg}"
        );
    }
    assert_eq!(fs::read(&target).unwrap(), SECRET);

    // Planted while a writer has the store open: not read, and replaced, not written through.
    fs::remove_file(dir.join("ickpt-store")).unwrap();
    let store = DirStore::open_write(&dir).unwrap();
    fs::remove_file(dir.join("ickpt-store")).unwrap();
    symlink(&target, dir.join("ickpt-store")).unwrap();
    let err = store.identity().unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    let id = StoreId::generate().unwrap();
    store.set_identity(id).unwrap();
    assert_eq!(fs::read(&target).unwrap(), SECRET);
    assert!(!is_symlink(&dir.join("ickpt-store")));
    assert_eq!(store.identity().unwrap(), Some(id));
}

#[test]
fn a_store_path_that_is_a_link_is_refused_for_writing_and_followed_for_reading() {
    let real = scratch_dir("link-dir-real");
    DirStore::open_write(&real).unwrap();
    let link = scratch_dir("link-dir");
    symlink(&real, &link).unwrap();
    let err = DirStore::open_write(&link).unwrap_err();
    assert!(matches!(err, OpenError::Symlink { .. }), "{err}");
    assert!(
        err.to_string().contains(&link.display().to_string()),
        "{err}"
    );
    // The ickpt command reads through it: it writes nothing.
    let store = DirStore::open_read(&link).unwrap();
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn directories_others_can_write_are_refused_for_writing_only() {
    for mode in [0o777, 0o770, 0o1777, 0o702] {
        let dir = scratch_dir("unsafe-mode");
        DirStore::open_write(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(mode)).unwrap();
        let err = DirStore::open_write(&dir).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, OpenError::Unsafe { .. }), "{msg}");
        let d = dir.display().to_string();
        assert!(msg.contains(&d), "names the directory: {msg}");
        assert!(msg.contains(&format!("mode {mode:04o}")), "{msg}");
        assert!(msg.contains(&format!("chmod go-w {d}")), "{msg}");
        DirStore::open_read(&dir).expect("reading stays allowed");
    }
}

#[test]
fn directories_of_another_user_are_refused_for_writing() {
    let dir = scratch_dir("unsafe-owner");
    DirStore::open_write(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
    let err = DirStore::open_write(&dir).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, OpenError::Unsafe { .. }), "{msg}");
    assert!(
        msg.contains("uid 65534") && msg.contains("directory you own"),
        "{msg}"
    );
    DirStore::open_read(&dir).expect("reading stays allowed");
}

/// Run in a child process as user nobody by the test below; passes trivially otherwise.
#[test]
fn as_nobody_child() {
    let Ok(spec) = std::env::var("ICKPT_TEST_AS_NOBODY") else {
        return;
    };
    let (own, root_owned, read_only) = {
        let p: Vec<&str> = spec.split(':').collect();
        (
            PathBuf::from(p[0]),
            PathBuf::from(p[1]),
            PathBuf::from(p[2]),
        )
    };
    assert_ne!(ickpt::sys::fs::effective_uid(), 0, "runs as nobody");
    let store = DirStore::open_write(&own.join("store")).unwrap();
    commit(&store, "v00000001.ickpt", b"x").unwrap();
    let err = DirStore::open_write(&root_owned).unwrap_err();
    assert!(err.to_string().contains("belongs to uid 0"), "{err}");
    let err = DirStore::open_write(&read_only).unwrap_err();
    assert!(matches!(err, OpenError::NotWritable { .. }), "{err}");
    assert!(err.to_string().contains("is not writable"), "{err}");
}

#[test]
fn as_a_user_the_store_is_checked_by_owner_and_permission() {
    let base = scratch_dir("nobody");
    let [own, root_owned, read_only] = ["own", "root", "ro"].map(|n| base.join(n));
    for d in [&own, &root_owned, &read_only] {
        fs::create_dir_all(d).unwrap();
    }
    DirStore::open_write(&read_only).unwrap();
    for d in [&base, &own, &read_only] {
        std::os::unix::fs::chown(d, Some(65534), Some(65534)).unwrap();
    }
    fs::set_permissions(&own, fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(&read_only, fs::Permissions::from_mode(0o500)).unwrap();
    fs::set_permissions(&root_owned, fs::Permissions::from_mode(0o755)).unwrap();
    // The scratch dir's parents must be searchable by nobody.
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "store_safety::as_nobody_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            "ICKPT_TEST_AS_NOBODY",
            format!(
                "{}:{}:{}",
                own.display(),
                root_owned.display(),
                read_only.display()
            ),
        )
        .output()
        .expect("setpriv runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child as nobody failed:\n{text}");
    assert!(text.contains("1 passed"), "the child ran the test:\n{text}");
    let v = own.join("store/v00000001.ickpt");
    assert_eq!(fs::metadata(v).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn recreating_the_marker_does_not_let_a_second_writer_in() {
    let dir = scratch_dir("lock-marker");
    let first = DirStore::open_write(&dir).unwrap();
    let marker = dir.join("ickpt-store");
    let text = fs::read(&marker).unwrap();
    fs::remove_file(&marker).unwrap();
    fs::write(&marker, &text).unwrap();
    let second = DirStore::open_write(&dir);
    assert!(
        matches!(second, Err(OpenError::Locked { .. })),
        "{second:?}"
    );
    drop(first);
    DirStore::open_write(&dir).expect("free once the holder is gone");
}

/// Unmounts on drop, so that a failed assertion leaves no mount behind.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_read_only_store_is_refused_at_open_not_at_the_first_checkpoint() {
    let dir = scratch_dir("ro-store");
    let store = DirStore::open_write(&dir).unwrap();
    commit(&store, "v00000001.ickpt", b"committed").unwrap();
    drop(store);
    let ro = scratch_dir("ro-mount");
    fs::create_dir_all(&ro).unwrap();
    run(Command::new("mount").arg("--bind").arg(&dir).arg(&ro));
    let _mounted = Mount(ro.clone());
    run(Command::new("mount")
        .args(["-o", "remount,bind,ro"])
        .arg(&ro));
    let err = DirStore::open_write(&ro).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, OpenError::NotWritable { .. }), "{msg}");
    assert!(
        msg.contains(&ro.display().to_string()) && msg.contains("is not writable"),
        "{msg}"
    );
    let store = DirStore::open_read(&ro).expect("reading a read-only store");
    assert_eq!(store.list().unwrap(), vec!["v00000001.ickpt"]);
}
