//! Only the store's owner can block it. Writers lock `ickpt-lock`, a file only the owner can
//! open, so another user who can read the store directory (0755, as stores made before they
//! were owner-only are) or the shared tier's cannot lock them (SECURITY.md).

use crate::common;
use common::other_user::{as_other, other_user};
use common::scratch_dir;
use ickpt::store::DirStore;
use ickpt::{Config, Engine};
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The other user holding an `flock` on `path` (what `flock(1)` opens: a directory or a
/// file) until dropped. None when they cannot even open it.
struct Held(Child);

fn hold_as_other(path: &Path) -> Option<Held> {
    let (uid, gid) = other_user();
    let mut child = Command::new("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--clear-groups".into(),
        ])
        .args(["flock", "--nonblock", "--exclusive"])
        .arg(path)
        // Says so once the lock is held, then holds it until its input closes.
        .args(["sh", "-c", "echo held; exec cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("setpriv runs");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    if line.trim() == "held" {
        return Some(Held(child));
    }
    assert!(!child.wait().unwrap().success());
    None
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

/// A store directory readable by everyone, as a 0755 directory given to ickpt is.
fn readable_dir(name: &str) -> common::Scratch {
    let d = scratch_dir(name);
    fs::create_dir_all(&d).unwrap();
    fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
    d
}

#[test]
fn another_user_locking_the_directory_does_not_block_the_owner() {
    let dir = readable_dir("lock-dir");
    drop(DirStore::open_write(&dir).unwrap());
    let _held = hold_as_other(&dir).expect("anyone who can read a directory can flock it");
    let store = DirStore::open_write(&dir).expect("the owner opens the store all the same");
    drop(store);
}

#[test]
fn another_user_cannot_open_the_lock_file() {
    let dir = readable_dir("lock-file");
    let store = DirStore::open_write(&dir).unwrap();
    let lock = dir.join("ickpt-lock");
    let m = fs::metadata(&lock).unwrap();
    assert_eq!(m.mode() & 0o777, 0o600);
    assert_eq!(m.uid(), ickpt::sys::fs::effective_uid());
    drop(store);
    assert!(
        hold_as_other(&lock).is_none(),
        "the other user locked the lock file"
    );
    let out = as_other("cat", &[lock.to_str().unwrap()]);
    assert!(!out.status.success());
}

#[test]
fn an_engine_with_a_shared_tier_runs_while_another_user_locks_both_directories() {
    let (dir, shared) = (readable_dir("lock-local"), readable_dir("lock-shared"));
    drop(DirStore::open_write(&dir).unwrap());
    drop(DirStore::open_write(&shared).unwrap());
    let _held = [
        hold_as_other(&dir).expect("flock on the local directory"),
        hold_as_other(&shared).expect("flock on the shared directory"),
    ];
    let mut cfg = Config::new(&*dir);
    cfg.shared_dir = Some(shared.to_path_buf());
    let e = Engine::open(cfg).expect("init is not blocked");
    let p = e.alloc(1, 4096).unwrap();
    // SAFETY: alloc returned 4096 bytes, live while `e` lives.
    unsafe { p.write_bytes(0x5a, 4096) };
    e.checkpoint().unwrap();
    e.wait_drained().unwrap();
    assert!(shared.join(ickpt::store::version_name(1)).exists());
    drop(e);
}
