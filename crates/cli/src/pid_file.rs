//! `ickpt-run.pid` in the store directory: which process `ickpt checkpoint --dir D` signals,
//! and with which signal. Written by the process that becomes the program (`ickpt run` just
//! before it runs the program, `ickpt restart` just before stage B), with its id as seen
//! from outside its PID namespace. Private to the owner (0600) and replaced by rename, never
//! written in place.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

pub const NAME: &str = "ickpt-run.pid";

/// Name process `pid` and its checkpoint signal in `dir`'s pid file.
pub fn write(dir: &Path, pid: u32, signal: i32) -> Result<(), String> {
    let path = dir.join(NAME);
    let tmp = dir.join(format!("{NAME}.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let done = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| writeln!(f, "{pid} {signal}"))
        .and_then(|()| std::fs::rename(&tmp, &path));
    done.map_err(|e| format!("writing {}: {e}", path.display()))
}
