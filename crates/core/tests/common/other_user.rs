//! A second local user for the tests that play another user attacking a store or an output
//! file: `ickpt-other`, created with `useradd` the first time it is needed (the tests run as
//! root). Shared by ickpt's and the command's integration tests.

use std::process::{Command, Output};
use std::sync::OnceLock;

const NAME: &str = "ickpt-other";

/// The user's (uid, gid), creating it if it does not exist yet.
pub fn other_user() -> (u32, u32) {
    static USER: OnceLock<(u32, u32)> = OnceLock::new();
    *USER.get_or_init(|| {
        if let Some(ids) = lookup() {
            return ids;
        }
        // Another test binary may be creating it at the same moment: its success is ours.
        let made = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                NAME,
            ])
            .output()
            .expect("useradd runs (the tests run as root on Debian)");
        lookup().unwrap_or_else(|| {
            panic!(
                "could not create the test user {NAME}: {}",
                String::from_utf8_lossy(&made.stderr)
            )
        })
    })
}

fn lookup() -> Option<(u32, u32)> {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, NAME]).output().ok()?;
        if !out.status.success() {
            return None;
        }
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    Some((id("-u")?, id("-g")?))
}

/// Run `program args` as the other user (no supplementary groups), returning its output.
pub fn as_other(program: &str, args: &[&str]) -> Output {
    let (uid, gid) = other_user();
    Command::new("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--clear-groups".into(),
        ])
        .arg(program)
        .args(args)
        .output()
        .expect("setpriv runs")
}

/// Like [`as_other`], and it must succeed.
pub fn as_other_ok(program: &str, args: &[&str]) -> Output {
    let out = as_other(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?} as {NAME}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
