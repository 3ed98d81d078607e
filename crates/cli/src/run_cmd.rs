//! `ickpt run`: start an unmodified program with ickpt preloaded, so that it checkpoints as a
//! whole process (`docs/transparent.md`).

use crate::CmdResult;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct RunArgs {
    /// The checkpoint store directory (created if missing).
    #[arg(long, env = "ICKPT_DIR")]
    pub dir: PathBuf,
    /// Checkpoint this often (30s, 5min, 1h); without it, only on `ickpt checkpoint`.
    #[arg(long, env = "ICKPT_CHECKPOINT_INTERVAL", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub interval: Option<std::time::Duration>,
    /// sync: the program waits while a version is written; async: only while its pages are
    /// collected, the commit running beside it.
    #[arg(long, env = "ICKPT_MODE", value_parser = ["sync", "async"])]
    pub mode: Option<String>,
    /// A shared tier the versions are drained to.
    #[arg(long, env = "ICKPT_SHARED_DIR")]
    pub shared: Option<PathBuf>,
    /// An object-store tier (s3://bucket/prefix; endpoint and credentials from the AWS
    /// variables): `ickpt run` itself, outside the program, drains the store there after
    /// each version (the program may hold no socket).
    #[arg(long, env = "ICKPT_OBJECT_URL")]
    pub object: Option<String>,
    /// Whether the program runs in a PID namespace of its own, so that a restart gives it
    /// its process and thread ids back (auto: when the machine allows it).
    #[arg(long, env = "ICKPT_PID_NAMESPACE", value_enum, default_value = "auto")]
    pub pid_namespace: crate::pid_namespace::Mode,
    /// The program and its arguments, after `--`.
    #[arg(required = true, last = true)]
    pub program: Vec<std::ffi::OsString>,
}

/// The preloaded library: beside the `ickpt` binary (a build tree), or in `../lib/ickpt/`
/// (an installation), unless `ICKPT_RUN_LIBRARY` names it.
pub fn library() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("ICKPT_RUN_LIBRARY") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("locating the ickpt binary: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [
        dir.join("libickpt_run.so"),
        dir.join("../lib/ickpt/libickpt_run.so"),
    ];
    candidates
        .iter()
        .find(|c| c.is_file())
        .cloned()
        .ok_or_else(|| {
            format!(
                "libickpt_run.so is neither beside {} nor in ../lib/ickpt/: build it (cargo build -p ickpt-run) or set ICKPT_RUN_LIBRARY",
                exe.display()
            )
        })
}

/// The program as the shell would find it: a path, or a name looked up in PATH.
fn resolve(program: &OsString) -> Result<PathBuf, String> {
    let p = Path::new(program);
    if p.components().count() > 1 {
        return Ok(p.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(p))
        .find(|c| c.is_file())
        .ok_or_else(|| format!("{}: not found in PATH", p.display()))
}

/// Whether the ELF file at `path` asks for a dynamic loader (PT_INTERP): a statically linked
/// program never loads the preloaded library.
fn dynamically_linked(path: &Path) -> Result<bool, String> {
    let b = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let bad = || format!("{}: not an x86-64 ELF executable", path.display());
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 {
        return Err(bad());
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[32..40].try_into().expect("8 bytes")) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    for i in 0..phnum {
        let at = phoff.checked_add(i * phentsize).ok_or_else(bad)?;
        if at + 4 > b.len() {
            return Err(bad());
        }
        if u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes")) == 3 {
            return Ok(true);
        }
    }
    Ok(false)
}

pub fn run(a: &RunArgs) -> CmdResult {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        return Err("ickpt run supports x86-64 Linux only".into());
    }
    if !ickpt::track::available(Default::default()).contains(&ickpt::Backend::UffdAsync) {
        return Err("ickpt run needs userfaultfd's asynchronous write-protect and PAGEMAP_SCAN (Linux 6.7 or later); this kernel lacks them (see `ickpt probe`)".into());
    }
    if let Some(why) = ickpt_process::mpi::refusal() {
        return Err(why.into());
    }
    let (prog, args) = a.program.split_first().ok_or("no program given after --")?;
    let path = resolve(prog)?;
    if !dynamically_linked(&path)? {
        return Err(format!(
            "{} is statically linked: ickpt run preloads a library, which only a dynamically linked program loads",
            path.display()
        )
        .into());
    }
    let lib = library()?;
    let signal = ickpt_process::checkpoint_signal::from_env()?;
    std::fs::create_dir_all(&a.dir).map_err(|e| format!("creating {}: {e}", a.dir.display()))?;
    // Made (or checked) here, before the pid file goes into it and while an error can still
    // be told before the program starts.
    drop(ickpt::store::DirStore::open_write(&a.dir).map_err(|e| e.to_string())?);
    let dir = std::path::absolute(&a.dir).map_err(|e| format!("{}: {e}", a.dir.display()))?;
    let mut preload = lib.into_os_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let beside = match &a.object {
        Some(url) => Some(Box::new(crate::object_drain::ObjectDrain::new(
            dir.clone(),
            url.clone(),
            "ickpt run",
        )?) as Box<dyn crate::pid_namespace::Beside>),
        None => None,
    };
    let inside = crate::pid_namespace::enter(a.pid_namespace, "ickpt run", beside)?;
    let mut cmd = std::process::Command::new(&path);
    cmd.args(args)
        .env("LD_PRELOAD", preload)
        .env("ICKPT_DIR", &dir)
        // exec keeps the process id: the library acts in this process only.
        .env("ICKPT_RUN_PID", std::process::id().to_string());
    if let Some(i) = a.interval {
        cmd.env("ICKPT_RUN_INTERVAL_MS", i.as_millis().max(1).to_string());
    }
    if let Some(m) = &a.mode {
        cmd.env("ICKPT_MODE", m);
    }
    if let Some(s) = &a.shared {
        cmd.env("ICKPT_SHARED_DIR", s);
    }
    if a.object.is_some() {
        // Drained by this command's supervisor, not by the program's engine, which keeps
        // what the bucket does not hold yet.
        cmd.env_remove("ICKPT_OBJECT_URL")
            .env("ICKPT_DRAINED_ELSEWHERE", "1");
    }
    cmd.arg0(prog);
    close_inherited();
    crate::pid_file::write(&dir, inside.outer_pid, signal)?;
    inside.restore_mask();
    let e = cmd.exec();
    Err(format!("starting {}: {e}", path.display()).into())
}

/// Descriptors above 2 that this command inherited (a build tool's jobserver pipe, a
/// terminal multiplexer's socket) are not passed on: the program could not be checkpointed
/// while it held them, and it did not open them itself.
fn close_inherited() {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: marks a descriptor of this process close-on-exec; one already closed (the
        // directory listing's own) gives EBADF, which is ignored.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
}
