//! `ickpt checkpoint --dir D`: ask the program `ickpt run` started on store D for a
//! checkpoint now (the signal AI-Ckpt's page manager takes from another process).

use crate::CmdResult;
use ickpt::read::catalog::Catalog;
use ickpt::store::DirStore;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// What `ickpt-run.pid` names: the process and its checkpoint signal.
fn target(dir: &Path) -> Result<(i32, i32), String> {
    let file = dir.join("ickpt-run.pid");
    let text = std::fs::read_to_string(&file).map_err(|e| {
        format!(
            "{}: {e}: no program runs under `ickpt run --dir {}`",
            file.display(),
            dir.display()
        )
    })?;
    let mut words = text.split_whitespace();
    let pid: i32 = words
        .next()
        .and_then(|w| w.parse().ok())
        .filter(|&p| p > 0)
        .ok_or_else(|| format!("{}: no process id in it", file.display()))?;
    let signal: i32 = words
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| libc::SIGRTMIN() + 3);
    // Only a process of ours that has the library loaded is signalled: the file may be
    // stale, and the number reused by an unrelated process.
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    if !maps.contains("libickpt_run") {
        return Err(format!(
            "process {pid} (from {}) is not running under ickpt run any more",
            file.display()
        ));
    }
    Ok((pid, signal))
}

fn newest(dir: &Path) -> Option<u64> {
    let store = DirStore::open_read(dir).ok()?;
    let catalog = Catalog::new(&store).ok()?;
    catalog.versions().ok()?.last().copied()
}

pub fn run(dir: &Path, wait: bool, timeout: Duration, json: bool) -> CmdResult {
    let deadline = Instant::now() + timeout;
    // With --wait, a program still starting (or restarting) is waited for too.
    let (pid, signal) = loop {
        match target(dir) {
            Ok(t) => break t,
            Err(e) if !wait || Instant::now() >= deadline => return Err(e.into()),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let before = newest(dir);
    // SAFETY: kill has no memory-safety preconditions.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(format!(
            "signalling process {pid}: {}",
            std::io::Error::last_os_error()
        )
        .into());
    }
    if !wait {
        if json {
            println!("{}", serde_json::json!({ "pid": pid, "requested": true }));
        } else {
            println!("checkpoint requested from process {pid}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    loop {
        let now = newest(dir);
        if let Some(v) = now.filter(|_| now != before) {
            if json {
                println!("{}", serde_json::json!({ "pid": pid, "version": v }));
            } else {
                println!("process {pid} committed version {v}");
            }
            return Ok(ExitCode::SUCCESS);
        }
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(format!("process {pid} ended before it committed a version").into());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "process {pid} committed no version within {} s (its stderr says why)",
                timeout.as_secs()
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
