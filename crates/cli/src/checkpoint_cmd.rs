//! `ickpt checkpoint --dir D`: ask the program `ickpt run` started on store D for a
//! checkpoint now (the signal AI-Ckpt's page manager takes from another process).

use crate::CmdResult;
use ickpt::read::catalog::Catalog;
use ickpt::store::DirStore;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The largest `ickpt-run.pid` there is: a process id, a space, a signal number, a newline.
const PID_FILE_MAX: u64 = 64;

/// What `ickpt-run.pid` names: the process and its checkpoint signal. The file is trusted
/// only as far as it is checked: a small regular file, not a link, of the same owner as the
/// process it names, who is this user (or this user is root, asking for a checkpoint of
/// another user's program); a real-time signal; a process with the library loaded (the file
/// may be stale, its number reused by an unrelated process).
fn target(dir: &Path) -> Result<(i32, i32), String> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = dir.join("ickpt-run.pid");
    let bad = |why: &str| {
        format!(
            "{}: {why}; `ickpt run` writes it, nothing else should",
            file.display()
        )
    };
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&file)
        .map_err(|e| {
            format!(
                "{}: {e}: no program runs under `ickpt run --dir {}`",
                file.display(),
                dir.display()
            )
        })?;
    let meta = f
        .metadata()
        .map_err(|e| format!("{}: {e}", file.display()))?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if !meta.is_file() || (meta.uid() != me && me != 0) || meta.len() > PID_FILE_MAX {
        return Err(bad("not a small regular file of yours"));
    }
    let mut text = String::new();
    f.by_ref()
        .take(PID_FILE_MAX)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let mut words = text.split_whitespace();
    let pid: i32 = words
        .next()
        .and_then(|w| w.parse().ok())
        .filter(|&p| p > 0)
        .ok_or_else(|| format!("{}: no process id in it", file.display()))?;
    let signal: i32 = words
        .next()
        .and_then(|w| w.parse().ok())
        .filter(|s| (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(s))
        .ok_or_else(|| bad("no real-time signal number in it"))?;
    let owner = std::fs::metadata(format!("/proc/{pid}")).map(|m| m.uid());
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    if owner.ok() != Some(meta.uid()) || !maps.contains(ickpt_process::checkpoint_signal::LIBRARY) {
        return Err(format!(
            "process {pid} (from {}) is not running under ickpt run (it ended, or is still starting)",
            file.display()
        ));
    }
    // Until the library's handler is in place, the signal's default action would end the
    // program: it is sent only once the process catches it.
    if !catches(pid, signal) {
        return Err(format!(
            "process {pid} does not handle the checkpoint signal {signal} yet (it is starting or restarting): try again, or use --wait"
        ));
    }
    // Killed with its supervisor a moment ago, it may not have ended yet; the restart that
    // follows writes the file anew (--wait waits for that).
    if ending(pid) {
        return Err(format!(
            "process {pid} (from {}) is ending: it was killed",
            file.display()
        ));
    }
    Ok((pid, signal))
}

/// Whether process `pid` is on its way out: a zombie, or SIGKILL pending for it.
fn ending(pid: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .map(str::trim)
    };
    let kill_pending = ["SigPnd:", "ShdPnd:"].iter().any(|k| {
        field(k)
            .and_then(|m| u64::from_str_radix(m, 16).ok())
            .is_some_and(|mask| mask & (1u64 << (libc::SIGKILL - 1)) != 0)
    });
    kill_pending || field("State:").is_some_and(|s| s.starts_with('Z') || s.starts_with('X'))
}

/// Whether process `pid` has a handler for `signal` (the SigCgt mask of its status).
fn catches(pid: i32, signal: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|mask| mask & (1u64 << (signal - 1)) != 0)
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
