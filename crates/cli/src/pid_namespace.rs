//! Exact process and thread ids across a restart. A program may keep a thread's id in its
//! memory (glibc's recursive and error-checking mutexes and the dynamic loader's lock record
//! their owner's), so a restart that gives its threads new ids can deadlock it. `ickpt run`
//! and `ickpt restart` therefore start the program as process 2 of a PID namespace of its own,
//! where a restart can ask for the old ids again (`clone3` with `set_tid`).
//!
//! Three processes: this one stays outside, passes the signals other processes send it on to
//! the program and ends as the program ends; the namespace's init (pid 1) mounts the
//! namespace's /proc and reaps; the program is init's first child. An unprivileged user gets
//! a user namespace as well, mapping only its own uid and gid, which is what allows the
//! mount and the choice of ids; root needs none. Where namespaces are not allowed (a
//! container that hides parts of /proc, a kernel without user namespaces), a probe finds out
//! first and the program runs without (its ids change at a restart), unless `on` was asked.

// fork, unshare, mount, sigwaitinfo and waitpid: the process tree is made with raw calls.
#![allow(unsafe_code)]

use std::io::Error;

/// Whether `ickpt run` and `ickpt restart` put the program in a PID namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// When the probe finds namespaces allowed.
    Auto,
    /// Always; a machine that does not allow them is an error.
    On,
    /// Never: the program keeps the ids the kernel gives it (new ones after a restart).
    Off,
}

/// What the process that goes on to become the program knows of its place.
#[derive(Clone, Copy, Debug)]
pub struct Inside {
    /// This process's id as processes outside the namespace see it (the one `ickpt
    /// checkpoint` signals).
    pub outer_pid: u32,
    /// In a namespace of its own: ids there can be chosen.
    pub namespaced: bool,
    /// A user namespace gave this process capabilities the program did not have.
    pub user_ns: bool,
    /// The signal mask the command started with (the kernel's 64 bits): in a namespace,
    /// this process returns with every signal blocked, and gives it back with
    /// [`Inside::restore_mask`] before it runs the program.
    mask: u64,
}

/// Work the supervisor has done beside the program (the object tier's drain, which needs
/// sockets the program may not hold). Started before the namespaces are made, as a process of
/// its own: a process whose children go to another PID namespace may not start threads.
/// Finished once the program has ended, before the supervisor ends as the program did.
pub trait Beside {
    fn start(&mut self) -> Result<(), String>;
    fn finish(&mut self);
}

/// Read by a re-executed `ickpt restart`, which is inside already: "OUTER_PID USER_NS".
const INSIDE_VAR: &str = "ICKPT_PID_NAMESPACE_INSIDE";

impl Inside {
    fn outside() -> Inside {
        Inside {
            outer_pid: std::process::id(),
            namespaced: false,
            user_ns: false,
            mask: sigmask(libc::SIG_BLOCK, 0),
        }
    }

    /// Give the signal mask the command started with back (before the program's exec).
    pub fn restore_mask(&self) {
        sigmask(libc::SIG_SETMASK, self.mask);
    }

    /// Set for a command this process runs in its place (`exec`), which is inside already.
    pub fn export(&self, cmd: &mut std::process::Command) {
        if self.namespaced {
            cmd.env(
                INSIDE_VAR,
                format!("{} {}", self.outer_pid, u8::from(self.user_ns)),
            );
        }
    }

    /// What a re-executed `ickpt restart` was told, believed only if this process is where
    /// the variable says: process 2 under the namespace's init (in the initial namespace,
    /// process 2 is the kernel's). A variable set by hand elsewhere is ignored.
    fn inherited() -> Option<Inside> {
        let v = std::env::var(INSIDE_VAR).ok()?;
        std::env::remove_var(INSIDE_VAR);
        // SAFETY: getppid cannot fail.
        if std::process::id() != 2 || unsafe { libc::getppid() } != 1 {
            return None;
        }
        let mut w = v.split_whitespace();
        let outer_pid = w.next()?.parse().ok()?;
        let user_ns = w.next()? == "1";
        Some(Inside {
            outer_pid,
            namespaced: true,
            user_ns,
            mask: sigmask(libc::SIG_BLOCK, 0),
        })
    }
}

/// A step of the set-up and the error it gave.
struct Failed(&'static str, i32);

impl Failed {
    fn last(step: &'static str) -> Failed {
        Failed(step, Error::last_os_error().raw_os_error().unwrap_or(0))
    }

    fn describe(&self) -> String {
        format!("{}: {}", self.0, Error::from_raw_os_error(self.1))
    }
}

/// Put this process's future in a new PID namespace: returns in the process that becomes
/// the program. The calling process stays outside as its supervisor, doing `beside`, and the
/// namespace's init reaps; neither returns. Must be called while this process has a single
/// thread. Without a namespace there is no supervisor, so `beside` makes it an error.
pub fn enter(mode: Mode, command: &str, beside: Option<Box<dyn Beside>>) -> Result<Inside, String> {
    if let Some(inside) = Inside::inherited() {
        return Ok(inside);
    }
    let mode = match (mode, &beside) {
        (Mode::Off, Some(_)) => {
            return Err(format!(
                "{command}: --object needs the program supervised from a PID namespace, and --pid-namespace is off"
            ))
        }
        (Mode::Auto, Some(_)) => Mode::On,
        (m, _) => m,
    };
    if mode == Mode::Off {
        return Ok(Inside::outside());
    }
    if ickpt_process::capture::list_tids().map_or(true, |t| t.len() != 1) {
        return Err(format!(
            "{command}: cannot make a PID namespace from a process with several threads"
        ));
    }
    // SAFETY: geteuid cannot fail.
    let user = unsafe { libc::geteuid() } != 0;
    if let Err(f) = probe(user) {
        let why = f.describe();
        if beside.is_some() {
            return Err(format!(
                "{command}: --object needs the program supervised from a PID namespace, which this machine refuses ({why}); use --shared"
            ));
        }
        if mode == Mode::On {
            return Err(format!(
                "{command}: a PID namespace for the program could not be made ({why}); run with --pid-namespace off (ICKPT_PID_NAMESPACE=off) to go without, its ids then changing at a restart"
            ));
        }
        eprintln!(
            "{command}: no PID namespace ({why}): the program's process and thread ids will change at a restart (docs/transparent.md, \"Process ids\")"
        );
        return Ok(Inside::outside());
    }
    let mut beside = beside;
    if let Some(b) = beside.as_mut() {
        b.start().map_err(|e| format!("{command}: {e}"))?;
    }
    setup(user).map_err(|f| format!("{command}: making a PID namespace: {}", f.describe()))?;
    let inside = Inside {
        outer_pid: 0,
        namespaced: true,
        user_ns: user,
        mask: 0,
    };
    start(inside, command, beside)
}

/// Whether `ickpt run` would give the program a PID namespace here (`ickpt probe`), or which
/// step this machine refuses.
pub fn allowed() -> Result<(), String> {
    // SAFETY: geteuid cannot fail.
    let user = unsafe { libc::geteuid() } != 0;
    probe(user).map_err(|f| f.describe())
}

/// Make the namespaces in a throwaway child and mount a /proc in them, as [`enter`] will.
fn probe(user: bool) -> Result<(), Failed> {
    let (rd, wr) = pipe().map_err(|_| Failed::last("pipe"))?;
    // SAFETY: this process has one thread; the child only makes system calls and exits.
    match unsafe { libc::fork() } {
        -1 => Err(Failed::last("fork")),
        0 => {
            let r = setup(user).and_then(|()| {
                // SAFETY: as above, in the child (one thread).
                match unsafe { libc::fork() } {
                    -1 => Err(Failed::last("fork")),
                    0 => {
                        let r = mount_proc();
                        report(wr, r);
                    }
                    child => {
                        wait_exit(child);
                        Ok(())
                    }
                }
            });
            if r.is_err() {
                report(wr, r);
            }
            // SAFETY: ends the probe's child.
            unsafe { libc::_exit(0) }
        }
        child => {
            close(wr);
            let mut buf = [0u8; 8];
            let n = read_full(rd, &mut buf);
            close(rd);
            wait_exit(child);
            if n != 8 {
                return Err(Failed("the probe ended without an answer", 0));
            }
            let step = u32::from_le_bytes(buf[..4].try_into().expect("4 bytes"));
            let errno = i32::from_le_bytes(buf[4..].try_into().expect("4 bytes"));
            match step {
                0 => Ok(()),
                s => Err(Failed(STEPS[(s as usize).min(STEPS.len() - 1)], errno)),
            }
        }
    }
}

/// The set-up steps by number, as the probe's child reports them (0: all went well).
const STEPS: [&str; 8] = [
    "",
    "unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID)",
    "writing /proc/self/setgroups",
    "writing /proc/self/uid_map",
    "writing /proc/self/gid_map",
    "making the mounts private to the namespace",
    "mounting /proc",
    "fork",
];

fn step_number(step: &str) -> u32 {
    STEPS
        .iter()
        .position(|s| *s == step)
        .unwrap_or(STEPS.len() - 1) as u32
}

/// Write the probe's answer and end this child.
fn report(wr: i32, r: Result<(), Failed>) -> ! {
    let (step, errno) = match r {
        Ok(()) => (0, 0),
        Err(f) => (step_number(f.0), f.1),
    };
    let mut buf = [0u8; 8];
    buf[..4].copy_from_slice(&step.to_le_bytes());
    buf[4..].copy_from_slice(&errno.to_le_bytes());
    // SAFETY: writes our buffer to our pipe, then ends this child.
    unsafe {
        libc::write(wr, buf.as_ptr().cast(), 8);
        libc::_exit(0)
    }
}

/// New user (unprivileged only), mount and PID namespaces, the user's own ids mapped.
fn setup(user: bool) -> Result<(), Failed> {
    // SAFETY: geteuid and getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWPID;
    if user {
        flags |= libc::CLONE_NEWUSER;
    }
    // SAFETY: unshare changes only this process's namespaces.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(Failed::last(STEPS[1]));
    }
    if user {
        let write = |file: &str, text: String, step: &'static str| {
            std::fs::write(file, text).map_err(|e| Failed(step, e.raw_os_error().unwrap_or(0)))
        };
        write("/proc/self/setgroups", "deny".into(), STEPS[2])?;
        write("/proc/self/uid_map", format!("{uid} {uid} 1"), STEPS[3])?;
        write("/proc/self/gid_map", format!("{gid} {gid} 1"), STEPS[4])?;
    }
    Ok(())
}

/// In the namespace's init: keep mounts made outside coming in but none of ours going out,
/// then a /proc of this PID namespace, so that the program's /proc/self is itself.
fn mount_proc() -> Result<(), Failed> {
    // SAFETY: mount with constant C strings; it changes this mount namespace only.
    unsafe {
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_SLAVE,
            std::ptr::null(),
        ) != 0
        {
            return Err(Failed::last(STEPS[5]));
        }
        if libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ) != 0
        {
            return Err(Failed::last(STEPS[6]));
        }
    }
    Ok(())
}

/// Signals this process passes on or acts on, as the kernel's 64-bit set: all but those it
/// cannot catch and those a fault of its own raises.
const HANDLED: u64 = !(bit(libc::SIGKILL)
    | bit(libc::SIGSTOP)
    | bit(libc::SIGSEGV)
    | bit(libc::SIGBUS)
    | bit(libc::SIGILL)
    | bit(libc::SIGFPE)
    | bit(libc::SIGTRAP));

const fn bit(sig: i32) -> u64 {
    1 << (sig - 1)
}

/// `rt_sigprocmask(how, set)` on this thread; the mask it had.
fn sigmask(how: i32, set: u64) -> u64 {
    let mut old: u64 = 0;
    // SAFETY: the kernel reads and writes 8-byte masks of ours.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            how,
            &set as *const u64,
            &mut old as *mut u64,
            8usize,
        )
    };
    old
}

/// [`HANDLED`] as a sigset_t, for sigwaitinfo.
fn handled() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; the calls fill and edit it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        for s in [
            libc::SIGKILL,
            libc::SIGSTOP,
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGILL,
            libc::SIGFPE,
            libc::SIGTRAP,
        ] {
            libc::sigdelset(&mut set, s);
        }
        set
    }
}

/// After `setup`: fork the namespace's init, which forks the program's process. This process
/// supervises; init reaps; the program's process returns.
fn start(
    mut inside: Inside,
    command: &str,
    beside: Option<Box<dyn Beside>>,
) -> Result<Inside, String> {
    // Blocked in this (single-threaded) process before any child exists, so that none meant
    // for the supervisor (SIGCHLD among them) is lost.
    inside.mask = sigmask(libc::SIG_BLOCK, HANDLED);
    let os = |what: &str| format!("{command}: {what}: {}", Error::last_os_error());
    let (life_rd, life_wr) = pipe().map_err(|_| os("pipe"))?;
    let (status_rd, status_wr) = pipe().map_err(|_| os("pipe"))?;
    let (msg_rd, msg_wr) = pipe().map_err(|_| os("pipe"))?;
    // SAFETY: one thread (checked by `enter`).
    let init = unsafe { libc::fork() };
    if init == -1 {
        return Err(os("fork"));
    }
    if init > 0 {
        close(life_rd);
        close(status_wr);
        close(msg_rd);
        close(msg_wr);
        supervise(init, status_rd, life_wr, command, beside);
    }
    // The namespace's init.
    close(status_rd);
    close(life_wr);
    // SAFETY: prctl and poll on our own descriptor. A supervisor killed before the first
    // call is seen by the second: the pipe's write end then has no holder.
    let orphan = unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        let mut p = libc::pollfd {
            fd: life_rd,
            events: libc::POLLIN,
            revents: 0,
        };
        libc::poll(&mut p, 1, 0) != 0
    };
    if orphan {
        // SAFETY: ends init, and with it the namespace.
        unsafe { libc::_exit(1) };
    }
    // SAFETY: one thread.
    let program = unsafe { libc::fork() };
    if program == 0 {
        close(life_rd);
        close(status_wr);
        close(msg_wr);
        let mut buf = [0u8; 4];
        let n = read_full(msg_rd, &mut buf);
        close(msg_rd);
        if n != 4 {
            // SAFETY: init failed (it said why); end.
            unsafe { libc::_exit(70) };
        }
        inside.outer_pid = u32::from_le_bytes(buf);
        // Signals stay blocked: the supervisor passes them on from now, and a restart's
        // stage A must keep them pending for the restored program (whose own handlers and
        // mask come back in stage B) rather than die of their default actions. `ickpt run`
        // gives the command's mask back just before the exec (`restore_mask`).
        return Ok(inside);
    }
    close(msg_rd);
    init_main(program, status_wr, msg_wr, command)
}

/// The namespace's init: tell the program and the supervisor the program's id outside, mount
/// /proc, reap until the program ends and pass its wait status on.
fn init_main(program: i32, status_wr: i32, msg_wr: i32, command: &str) -> ! {
    let fail = |what: String| -> ! {
        eprintln!("{command}: in the PID namespace's init: {what}");
        // SAFETY: ends init; the kernel ends the namespace's other processes.
        unsafe { libc::_exit(70) }
    };
    if program < 0 {
        fail(format!("fork: {}", Error::last_os_error()));
    }
    // Read before the namespace's own /proc covers the outer one.
    let outer: u32 = std::fs::read_to_string("/proc/thread-self/children")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| fail("reading /proc/thread-self/children".into()));
    if let Err(f) = mount_proc() {
        fail(f.describe());
    }
    let bytes = outer.to_le_bytes();
    // SAFETY: 4 bytes of ours to pipes of ours.
    unsafe {
        libc::write(msg_wr, bytes.as_ptr().cast(), 4);
        libc::write(status_wr, bytes.as_ptr().cast(), 4);
    }
    close(msg_wr);
    loop {
        let mut status = 0;
        // SAFETY: waits for any child of init (the program, and orphans it inherits).
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == program {
            // SAFETY: as above; then init ends, and with it whatever else the program left.
            unsafe {
                libc::write(status_wr, status.to_le_bytes().as_ptr().cast(), 4);
                libc::_exit(0)
            }
        }
        if pid < 0 && Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // SAFETY: no child left.
            unsafe { libc::_exit(0) }
        }
    }
}

/// Outside: pass signals sent by other processes on to the program, stop when the terminal
/// stops the job, and end as the program ended.
fn supervise(
    init: i32,
    status_rd: i32,
    life_wr: i32,
    command: &str,
    mut beside: Option<Box<dyn Beside>>,
) -> ! {
    let mut buf = [0u8; 4];
    let program = if read_full(status_rd, &mut buf) == 4 {
        i32::from_le_bytes(buf)
    } else {
        0
    };
    let set = handled();
    loop {
        // SAFETY: siginfo_t is plain data, filled by the call.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waits for a signal of the blocked set.
        let sig = unsafe { libc::sigwaitinfo(&set, &mut info) };
        if sig < 0 {
            continue;
        }
        // Negative codes and SI_USER are sent by processes (kill, sigqueue, tgkill); the
        // terminal's signals (SI_KERNEL) reach the program's process group by themselves.
        let sent = info.si_code <= 0;
        if sig == libc::SIGCHLD {
            let mut status = 0;
            // SAFETY: reaps our child only.
            if unsafe { libc::waitpid(init, &mut status, libc::WNOHANG) } == init {
                let reported =
                    (read_full(status_rd, &mut buf) == 4).then(|| i32::from_le_bytes(buf));
                close(life_wr);
                if let Some(b) = beside.as_mut() {
                    b.finish();
                }
                end_as(reported.unwrap_or(status), reported.is_none(), command);
            }
            continue;
        }
        if sent && program > 0 {
            // SAFETY: a signal to the program's process; sigqueue keeps a sender's value.
            unsafe {
                if info.si_code == libc::SI_QUEUE {
                    libc::sigqueue(program, sig, info.si_value());
                } else {
                    libc::kill(program, sig);
                }
            }
        }
        if matches!(sig, libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU) {
            // The shell waits for this process to stop before it calls the job stopped.
            // SAFETY: stops this process until SIGCONT.
            unsafe { libc::kill(libc::getpid(), libc::SIGSTOP) };
        }
    }
}

/// End this process as the program ended: its exit code, or its signal (without a core dump
/// of this process).
fn end_as(status: i32, init_died: bool, command: &str) -> ! {
    if init_died {
        eprintln!("{command}: the PID namespace's init ended before the program did");
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: this process's own limit, action and mask, then the signal to itself.
        unsafe {
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(sig, libc::SIG_DFL);
            let mut one: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut one);
            libc::sigaddset(&mut one, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
        }
        std::process::exit(128 + sig);
    }
    std::process::exit(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        70
    })
}

fn pipe() -> Result<(i32, i32), ()> {
    let mut fds = [0i32; 2];
    // SAFETY: the kernel fills two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(());
    }
    Ok((fds[0], fds[1]))
}

fn close(fd: i32) {
    // SAFETY: closes a descriptor this module made and no one else uses.
    unsafe { libc::close(fd) };
}

/// Read until `buf` is full or the writer is gone; how many bytes came.
fn read_full(fd: i32, buf: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reads into the rest of our buffer.
        let n = unsafe { libc::read(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if n > 0 {
            got += n as usize;
        } else if n == 0 || Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    got
}

fn wait_exit(child: i32) {
    let mut status = 0;
    // SAFETY: reaps our own child, retrying when interrupted.
    while unsafe { libc::waitpid(child, &mut status, 0) } < 0
        && Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
}
