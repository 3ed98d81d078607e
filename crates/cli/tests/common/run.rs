//! The harness of the `ickpt run` tests: build an unmodified program, run it once without
//! ickpt for its reference output, then under `ickpt run`, checkpointed from outside, killed
//! with SIGKILL at a random moment and restarted, generation after generation.
//!
//! Every wait is bounded by [`LIMIT`] and waits on a condition (an exit, a line on stderr, a
//! new version); a hang fails the test naming what never happened.

use super::{ickpt, json, text};
use rand::Rng;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_ickpt");
/// Every wait of these tests ends by this bound.
pub const LIMIT: Duration = Duration::from_secs(120);

/// `tests/transparent/<file>`.
pub fn source(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/transparent/{file}"))
}

/// Compile `tests/transparent/<file>` with `compiler` and `flags` into `dir/<stem>`.
pub fn compile(compiler: &str, file: &str, dir: &Path, flags: &[&str]) -> PathBuf {
    let src = source(file);
    let stem = Path::new(file).file_stem().unwrap();
    let exe = dir.join(stem);
    let out = Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("{compiler} runs: {e}"));
    assert!(
        out.status.success(),
        "{compiler} {file}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// A C program of `tests/transparent/`, built as the first tests' were.
pub fn build_c(file: &str, dir: &Path) -> PathBuf {
    compile("cc", file, dir, &["-O1", "-pthread"])
}

/// Whether `program args` runs and succeeds (a compiler, or Python importing a module).
/// When it does not, the test fails naming scripts/deps.sh, which installs it for `make
/// test`; with `ICKPT_ALLOW_NO_LANGS=1` (a machine with only Rust and a C compiler, as `make
/// check` assumes) it says SKIPPED instead and the caller returns.
pub fn have(program: &str, args: &[&str]) -> bool {
    let ok = Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let what = format!("{program} {}", args.join(" "));
        if std::env::var_os("ICKPT_ALLOW_NO_LANGS").is_some() {
            eprintln!("SKIPPED: `{what}` fails on this machine (scripts/deps.sh installs it)");
        } else {
            panic!("`{what}` fails: scripts/deps.sh installs what this test needs (ICKPT_ALLOW_NO_LANGS=1 skips it)");
        }
    }
    ok
}

/// How a program is started: `wrap… exe before… OUT after…`, with `env` added.
#[derive(Clone, Default)]
pub struct Program {
    pub exe: PathBuf,
    /// Arguments before the output file's path (a script's name).
    pub before: Vec<OsString>,
    /// Arguments after it.
    pub after: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    /// A command the program, `ickpt run` and `ickpt restart` are started through
    /// (`taskset`, `setpriv`); it must exec, keeping the process id.
    pub wrap: Vec<OsString>,
    /// A line the program prints on stderr once it has started up; the first checkpoint is
    /// asked for only after it.
    pub ready: Option<&'static str>,
    /// Options `ickpt run` and `ickpt restart` both get (`--object URL`).
    pub tiers: Vec<OsString>,
}

impl Program {
    pub fn new(exe: PathBuf, after: &[&str]) -> Program {
        Program {
            exe,
            after: after.iter().map(OsString::from).collect(),
            ..Program::default()
        }
    }

    pub fn env(mut self, key: &str, value: &str) -> Program {
        self.env.push((key.into(), value.into()));
        self
    }

    fn command(&self, program: &OsStr) -> Command {
        let mut c = match self.wrap.split_first() {
            Some((w, rest)) => {
                let mut c = Command::new(w);
                c.args(rest).arg(program);
                c
            }
            None => Command::new(program),
        };
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    fn argv(&self, out: &Path) -> Vec<OsString> {
        let mut a = vec![self.exe.clone().into_os_string()];
        a.extend(self.before.iter().cloned());
        a.push(out.into());
        a.extend(self.after.iter().cloned());
        a
    }

    /// The program alone, writing `out`.
    pub fn plain(&self, out: &Path) -> Command {
        let argv = self.argv(out);
        let mut c = self.command(&argv[0]);
        c.args(&argv[1..]);
        c
    }

    /// The program under `ickpt run` on `store`, checkpointing every `interval` if given.
    pub fn under_ickpt(&self, store: &Path, interval: Option<&str>, out: &Path) -> Command {
        let mut c = self.command(BIN.as_ref());
        c.arg("run").arg("--dir").arg(store).args(&self.tiers);
        if let Some(i) = interval {
            c.args(["--interval", i]);
        }
        c.arg("--").args(self.argv(out));
        c
    }

    /// `ickpt restart` on `store`.
    pub fn restart(&self, store: &Path) -> Command {
        let mut c = self.command(BIN.as_ref());
        c.arg("restart").arg("--dir").arg(store).args(&self.tiers);
        c
    }
}

#[derive(Default)]
struct State {
    stdout: String,
    stderr: String,
    /// stdout and stderr not at their end yet.
    open: u32,
    /// The exit code, or minus the signal that ended it.
    status: Option<i32>,
}

struct Shared {
    state: Mutex<State>,
    cond: Condvar,
}

impl Shared {
    /// Wait until `done` holds, at most LIMIT; false when it never did.
    fn wait(&self, mut done: impl FnMut(&State) -> bool) -> bool {
        let deadline = Instant::now() + LIMIT;
        let mut s = self.state.lock().unwrap();
        while !done(&s) {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            s = self.cond.wait_timeout(s, left).unwrap().0;
        }
        true
    }
}

/// A process the test started, its stdout and stderr collected as they come.
pub struct Proc {
    pub pid: i32,
    what: String,
    stdin: Option<ChildStdin>,
    shared: Arc<Shared>,
    /// How far [`Proc::expect`] has read stderr.
    seen: usize,
}

impl Proc {
    /// Start `cmd` with its three standard streams piped; `what` names it in failures.
    pub fn spawn(mut cmd: Command, what: &str) -> Proc {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {what}: {e}"));
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                open: 2,
                ..State::default()
            }),
            cond: Condvar::new(),
        });
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        for (stream, is_err) in [
            (Box::new(out) as Box<dyn Read + Send>, false),
            (Box::new(err), true),
        ] {
            let shared = shared.clone();
            std::thread::spawn(move || collect(stream, is_err, &shared));
        }
        let pid = child.id() as i32;
        let stdin = child.stdin.take();
        let s = shared.clone();
        std::thread::spawn(move || {
            // Wait without reaping, then reap under the lock: `kill` holds it, so the pid it
            // signals is never one the kernel gave to another process meanwhile.
            loop {
                // SAFETY: a zeroed siginfo is valid for waitid to fill in.
                let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                // SAFETY: waits for our own child; `info` is a valid out-parameter.
                let rc = unsafe {
                    libc::waitid(
                        libc::P_PID,
                        pid as libc::id_t,
                        &mut info,
                        libc::WEXITED | libc::WNOWAIT,
                    )
                };
                if rc == 0
                    || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
                {
                    break;
                }
            }
            let mut st = s.state.lock().unwrap();
            let status = child.wait().unwrap();
            use std::os::unix::process::ExitStatusExt;
            st.status = Some(
                status
                    .code()
                    .unwrap_or_else(|| -status.signal().unwrap_or(0)),
            );
            s.cond.notify_all();
        });
        Proc {
            pid,
            what: what.into(),
            stdin,
            shared,
            seen: 0,
        }
    }

    pub fn stderr(&self) -> String {
        self.shared.state.lock().unwrap().stderr.clone()
    }

    /// Kill it with SIGKILL (if it still runs) and wait until it is gone, and with it the
    /// processes under it: killing `ickpt run`'s supervisor ends the program through its PID
    /// namespace a moment later, and the next step must not find the program still there.
    pub fn kill(&self) {
        let below: Vec<std::os::fd::OwnedFd> = descendants(self.pid)
            .into_iter()
            .filter_map(pidfd)
            .collect();
        {
            let s = self.shared.state.lock().unwrap();
            if s.status.is_none() {
                // SAFETY: signals our own child, not reaped yet (the waiter reaps it only
                // under the lock held here).
                unsafe { libc::kill(self.pid, libc::SIGKILL) };
            }
        }
        assert!(
            self.shared.wait(|s| s.status.is_some()),
            "{} did not die of SIGKILL within {LIMIT:?}",
            self.what
        );
        for fd in below {
            use std::os::fd::AsRawFd;
            let mut p = libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: polls one pidfd of ours; it becomes readable when the process ends.
            let ready = unsafe { libc::poll(&mut p, 1, LIMIT.as_millis() as i32) };
            assert!(
                ready == 1,
                "a process under {} did not end within {LIMIT:?} of its SIGKILL",
                self.what
            );
        }
    }

    /// Wait until it exits and its streams end: (exit code, stdout, stderr).
    pub fn finish(self) -> (i32, String, String) {
        if !self.shared.wait(|s| s.status.is_some() && s.open == 0) {
            let threads = threads(self.pid);
            self.kill();
            panic!(
                "{} did not finish within {LIMIT:?}; its threads:\n{threads}stderr:\n{}",
                self.what,
                self.stderr()
            );
        }
        let s = self.shared.state.lock().unwrap();
        (s.status.unwrap(), s.stdout.clone(), s.stderr.clone())
    }

    /// Wait until stderr (past what earlier calls read) holds a whole line with `needle`;
    /// that line. Fails if the process ends first.
    pub fn expect(&mut self, needle: &str) -> String {
        let from = self.seen;
        // The whole line: the needle with a newline after it.
        let whole = |s: &State| {
            s.stderr[from..]
                .find(needle)
                .is_some_and(|i| s.stderr[from + i..].contains('\n'))
        };
        let found = self
            .shared
            .wait(|s| whole(s) || (s.status.is_some() && s.open == 0));
        let s = self.shared.state.lock().unwrap();
        let Some(at) = s.stderr[from..].find(needle).map(|i| from + i) else {
            panic!(
                "{}: {:?} never came on stderr ({}); stderr:\n{}",
                self.what,
                needle,
                if found {
                    format!("it ended, status {:?}", s.status)
                } else {
                    format!("waited {LIMIT:?}")
                },
                s.stderr
            );
        };
        let start = s.stderr[..at].rfind('\n').map_or(0, |i| i + 1);
        let end = s.stderr[at..].find('\n').map_or(s.stderr.len(), |i| at + i);
        self.seen = end;
        s.stderr[start..end].to_string()
    }

    /// Write a line to its stdin.
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}")
            .unwrap_or_else(|e| panic!("{}: writing {line:?}: {e}", self.what));
        stdin.flush().unwrap();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // A test that fails midway leaves no program running.
        let s = self.shared.state.lock().unwrap();
        if s.status.is_none() {
            // SAFETY: as in `kill`: our child, not reaped while the lock is held.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
    }
}

fn collect(mut stream: Box<dyn Read + Send>, is_err: bool, shared: &Shared) {
    let mut buf = [0u8; 8192];
    loop {
        let n = stream.read(&mut buf).unwrap_or(0);
        let mut s = shared.state.lock().unwrap();
        if n == 0 {
            s.open -= 1;
            shared.cond.notify_all();
            return;
        }
        let text = String::from_utf8_lossy(&buf[..n]);
        if is_err {
            s.stderr.push_str(&text);
        } else {
            s.stdout.push_str(&text);
        }
        shared.cond.notify_all();
    }
}

/// The store's versions, oldest first.
pub fn versions(store: &Path) -> Vec<u64> {
    let out = ickpt(&["ls", "--dir", store.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "ickpt ls: {}", text(&out));
    json(&out)["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_u64().unwrap())
        .collect()
}

/// `ickpt checkpoint --wait` of `proc`, which must succeed: the version committed.
pub fn checkpoint_now(store: &Path, proc: &Proc) -> u64 {
    let out = ickpt(&[
        "checkpoint",
        "--dir",
        store.to_str().unwrap(),
        "--wait",
        "--timeout",
        "60s",
    ]);
    assert!(
        out.status.success(),
        "ickpt checkpoint failed: {}; the program's threads:\n{}its stderr:\n{}",
        text(&out),
        threads(proc.pid),
        proc.stderr()
    );
    let t = text(&out);
    t.rsplit("committed version ")
        .next()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no version in {t:?}"))
}

/// The processes under `pid`, children first.
fn descendants(pid: i32) -> Vec<i32> {
    let mut all = Vec::new();
    let mut next = vec![pid];
    while let Some(p) = next.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                all.push(c);
                next.push(c);
            }
        }
    }
    all
}

/// A descriptor that becomes readable when process `pid` ends (none if it is gone already).
fn pidfd(pid: i32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags; a descriptor it returns is ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a new descriptor, owned from here on.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// Each thread of process `pid` and of the processes under it (the program under `ickpt
/// run`'s supervisor): its id, name, state, kernel wait channel and signal masks, for the
/// message of a checkpoint that never came.
pub fn threads(pid: i32) -> String {
    std::iter::once(pid)
        .chain(descendants(pid))
        .map(threads_of)
        .collect()
}

fn threads_of(pid: i32) -> String {
    let mut all = format!("process {pid}:\n");
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return format!("process {pid} is gone\n");
    };
    for t in tasks.flatten() {
        let d = t.path();
        let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap_or_default();
        let status = read("status");
        let field = |k: &str| {
            status
                .lines()
                .find(|l| l.starts_with(k))
                .map_or("", |l| l[k.len()..].trim())
                .to_string()
        };
        all += &format!(
            "  {} {:16} {} wchan {} blocked {} pending {}\n",
            t.file_name().to_string_lossy(),
            read("comm").trim(),
            field("State:"),
            read("wchan"),
            field("SigBlk:"),
            field("SigPnd:"),
        );
    }
    all
}

/// Ask for a checkpoint without waiting for it (one that is refused commits nothing).
pub fn request_checkpoint(store: &Path) {
    let out = ickpt(&["checkpoint", "--dir", store.to_str().unwrap()]);
    assert!(out.status.success(), "ickpt checkpoint: {}", text(&out));
}

pub fn verify(store: &Path, when: &str) {
    let out = ickpt(&["verify", "--dir", store.to_str().unwrap()]);
    assert!(out.status.success(), "{when}: ickpt verify: {}", text(&out));
}

/// Start `ickpt restart` and wait until stage A has read its version, which must be
/// `expected`: a restart that passes over a version that should restore fails here.
pub fn restart_expecting(p: &Program, store: &Path, expected: u64) -> Proc {
    let mut proc = Proc::spawn(p.restart(store), "ickpt restart");
    let line = proc.expect("ickpt restart: version ");
    let got: u64 = line
        .split("version ")
        .nth(1)
        .and_then(|w| w.split_whitespace().next())
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no version in {line:?}"));
    assert_eq!(
        got,
        expected,
        "the restart did not restore the newest version; its stderr:\n{}",
        proc.stderr()
    );
    proc
}

/// What an uninterrupted run gives: its stdout and its output file.
pub struct Reference {
    pub stdout: String,
    pub file: Vec<u8>,
}

/// Run `p` alone, writing `dir/reference.out`.
pub fn reference(p: &Program, dir: &Path) -> Reference {
    let out = dir.join("reference.out");
    let (code, stdout, stderr) = Proc::spawn(p.plain(&out), "the reference run").finish();
    assert_eq!(code, 0, "the reference run failed: {stderr}");
    Reference {
        stdout,
        file: std::fs::read(&out).unwrap(),
    }
}

/// Check a finished run against the reference.
pub fn assert_same(proc: Proc, out: &Path, want: &Reference) {
    let (code, stdout, stderr) = proc.finish();
    assert_eq!(code, 0, "the restarted program failed; stderr:\n{stderr}");
    assert_eq!(stdout, want.stdout, "stdout differs; stderr:\n{stderr}");
    assert!(
        std::fs::read(out).unwrap() == want.file,
        "the program's output file {} differs from the uninterrupted run's; stderr:\n{stderr}",
        out.display()
    );
}

/// Run `p` uninterrupted in `dir`, then under `ickpt run` with `kills` checkpoints, kills
/// and restarts; it must end as the uninterrupted run did, each restart from the newest
/// version, with `ickpt verify` passing after every kill.
pub fn generations(p: &Program, dir: &Path, kills: usize) {
    let want = reference(p, dir);
    let store = dir.join("store");
    let out = dir.join("run.out");
    let mut proc = Proc::spawn(p.under_ickpt(&store, Some("200ms"), &out), "ickpt run");
    if let Some(line) = p.ready {
        proc.expect(line);
    }
    let mut rng = rand::thread_rng();
    for generation in 0..kills {
        let committed = checkpoint_now(&store, &proc);
        // Let it run on a little past the checkpoint (or not at all), then kill it.
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..150)));
        proc.kill();
        let newest = *versions(&store).last().unwrap();
        assert!(newest >= committed);
        verify(&store, &format!("after kill {generation}"));
        proc = restart_expecting(p, &store, newest);
    }
    assert_same(proc, &out, &want);
    verify(&store, "at the end");
}
