//! `ickpt-run.pid` in the store directory: which process `ickpt checkpoint --dir D` signals,
//! and with which signal.
//! Rewritten after each restart (the process id changes). Private to the owner (0600) and
//! replaced by rename, never written in place.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub const NAME: &str = "ickpt-run.pid";

pub fn path(dir: &Path) -> PathBuf {
    dir.join(NAME)
}

/// Write this process's id and its checkpoint signal to `path`.
pub fn write(path: &Path, signal: i32) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("pid.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    writeln!(f, "{} {signal}", std::process::id())?;
    drop(f);
    std::fs::rename(&tmp, path)
}
