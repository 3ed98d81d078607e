//! Reading the record's fields from the running process. Each call is `std::fs` opening,
//! reading, `readlink` or `stat`, or a raw system call: nothing that makes glibc allocate,
//! since another thread may be stopped inside malloc (the crate's top comment).

use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use crate::record::{
    FileId, PosixTimer, ProcessRecord, SigAction, TimerNotify, ITIMERS, MM_FIELDS, SIGNALS,
    THREAD_NAME_LEN, THREAD_NAME_MAX,
};

/// What `uname` says: release, a space, version (`6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC
/// Debian 6.1.76-1 (2024-02-01)`). The version string tells builds of one release apart.
pub fn kernel() -> io::Result<String> {
    let (release, version) = crate::sys::uname()?;
    Ok(format!("{release} {version}"))
}

pub fn arch() -> &'static str {
    std::env::consts::ARCH
}

pub fn page_size() -> u32 {
    crate::sys::page_size() as u32
}

/// The kernel's action for each of the signals 1 to 64, index = signal − 1 (SIGKILL and
/// SIGSTOP read as their defaults).
pub fn sigactions() -> io::Result<Vec<SigAction>> {
    (1..=SIGNALS as i32)
        .map(|sig| {
            let [handler, flags, restorer, mask] = crate::sys::sigaction(sig)?;
            Ok(SigAction {
                handler,
                flags,
                restorer,
                mask,
            })
        })
        .collect()
}

/// Where `brk` is among the mm fields.
const MM_BRK: usize = 5;

/// The mm fields, in [`ProcessRecord::mm`]'s order. All but `brk` are fields of
/// `/proc/self/stat` (proc(5), counting from 1: startcode 26, endcode 27, startstack 28,
/// start_data 45, end_data 46, start_brk 47, arg_start 48, arg_end 49, env_start 50,
/// env_end 51); `brk` is not there, so it is `brk(0)`.
pub fn mm_fields() -> io::Result<[u64; MM_FIELDS]> {
    let text = read_text("/proc/self/stat")?;
    parse_stat(&text, crate::sys::brk()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("cannot read the mm fields of /proc/self/stat: {text:?}"),
        )
    })
}

/// The mm fields of a `/proc/<pid>/stat` text, with `brk` given.
pub fn parse_stat(text: &str, brk: u64) -> Option<[u64; MM_FIELDS]> {
    // Field 2, the command name in parentheses, may itself hold spaces and parentheses:
    // fields 3 on follow the last ')'.
    let after = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
    Some([
        field(26)?,
        field(27)?,
        field(45)?,
        field(46)?,
        field(47)?,
        brk, // MM_BRK
        field(28)?,
        field(48)?,
        field(49)?,
        field(50)?,
        field(51)?,
    ])
}

/// The auxiliary vector, as words: (type, value) pairs ending with AT_NULL.
pub fn auxv() -> io::Result<Vec<u64>> {
    let mut bytes = Vec::new();
    std::fs::File::open("/proc/self/auxv")?.read_to_end(&mut bytes)?;
    if bytes.len() % 16 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/self/auxv has {} bytes, not whole pairs", bytes.len()),
        ));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes")))
        .collect())
}

/// The identity of the file at `path` now (following links).
pub fn file_id(path: &str) -> io::Result<FileId> {
    identity(path, path)
}

/// `path`'s name, with the identity of what `stat_path` leads to.
fn identity(path: &str, stat_path: &str) -> io::Result<FileId> {
    let m = std::fs::metadata(stat_path)
        .map_err(|e| io::Error::new(e.kind(), format!("{stat_path}: {e}")))?;
    Ok(FileId {
        path: path.to_string(),
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
    })
}

/// The program's executable: its path, and the identity of the file running, which
/// `/proc/self/exe` leads to even when the path now names another (a rebuilt program).
pub fn exe() -> io::Result<FileId> {
    let path = utf8(std::fs::read_link("/proc/self/exe")?, "/proc/self/exe")?;
    identity(&path, "/proc/self/exe")
}

pub fn cwd() -> io::Result<String> {
    utf8(std::fs::read_link("/proc/self/cwd")?, "/proc/self/cwd")
}

/// The umask, from `/proc/self/status` (Linux 4.7 on): `umask(2)` reads it only by
/// changing it, which another thread could see.
pub fn umask() -> io::Result<u32> {
    umask_of(&read_text("/proc/self/status")?)
}

/// The `Umask:` of a `/proc/self/status` text.
fn umask_of(status: &str) -> io::Result<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no Umask: in /proc/self/status"))
}

/// The process's threads' ids, ascending.
pub fn list_tids() -> io::Result<Vec<u32>> {
    Ok(crate::dir::numbered_entries("/proc/self/task")?
        .into_iter()
        .map(|t| t as u32)
        .collect())
}

/// A record of everything the capture reads by itself: all but the mappings (the caller
/// classifies them), the threads (their parked handlers fill them in), the hole, the
/// restart word and the snapshots.
pub fn process_base() -> io::Result<ProcessRecord> {
    process_base_with(&mut Memo::default())
}

/// What one capture keeps for the next in the same process: what cannot change while it
/// lives (its kernel, which a restart checks is the same build; its auxiliary vector and
/// its mm fields but `brk`, which a restart puts back as recorded and which only a
/// privileged `PR_SET_MM` changes otherwise) and the descriptors it may describe again.
#[derive(Default)]
pub struct Memo {
    kernel: Option<String>,
    auxv: Option<Vec<u64>>,
    mm: Option<[u64; MM_FIELDS]>,
    pub fds: crate::fds::FdMemo,
}

/// [`process_base`], taking from `memo` what an earlier capture read and keeping there
/// what the next may take.
pub fn process_base_with(memo: &mut Memo) -> io::Result<ProcessRecord> {
    // Read once for two fields: each read of it costs 15-30 us, in the program's stop. The
    // interval timers first (`itimers_left`).
    let left = itimers_left();
    let status = read_text("/proc/self/status")?;
    if memo.kernel.is_none() {
        memo.kernel = Some(kernel()?);
    }
    if memo.auxv.is_none() {
        memo.auxv = Some(auxv()?);
    }
    let mm = match memo.mm {
        Some(mut mm) => {
            mm[MM_BRK] = crate::sys::brk();
            mm
        }
        None => *memo.mm.insert(mm_fields()?),
    };
    Ok(ProcessRecord {
        kernel: memo.kernel.clone().expect("set above"),
        arch: arch().to_string(),
        page_size: page_size(),
        pid: std::process::id(),
        exe: exe()?,
        cwd: cwd()?,
        umask: umask_of(&status)?,
        mm,
        auxv: memo.auxv.clone().expect("set above"),
        mappings: Vec::new(),
        threads: Vec::new(),
        sigactions: sigactions()?,
        fds: crate::fds::list_fds_with(&mut memo.fds)?,
        hole: (0, 0),
        restart_word: 0,
        itimers: itimers_with(left, mask_of(&status, "ShdPnd:")),
        snapshots: Vec::new(),
        timers: posix_timers()?,
    })
}

/// `linux/prctl.h`: while on, `timer_create` gives the id its `timer_t` argument holds
/// instead of choosing one (`EBUSY` when taken). Linux 6.15 on; `EINVAL` before.
pub const PR_TIMER_CREATE_RESTORE_IDS: libc::c_int = 77;

/// Whether a restart can create POSIX timers again with their ids: probed once, false
/// under `ICKPT_NO_TIMER_IDS=1` (which the tests use to see the refusal).
pub fn timer_ids_restorable() -> bool {
    static KNOWN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *KNOWN.get_or_init(|| {
        std::env::var_os("ICKPT_NO_TIMER_IDS").is_none_or(|v| v != "1")
            && crate::sys::timer_restore_ids_known()
    })
}

/// The process's POSIX timers, ascending by id, with the time each has left. Refused by
/// name: a timer on a thread's CPU clock (a restart could not give it to the same thread's
/// time), a timer signalling a thread the process does not have, and any timer where the
/// kernel cannot create it again with its id. A timer whose signal is pending (it fired
/// while the threads were stopped, with every signal blocked) is kept as due at once, as
/// [`itimers`] does: the pending signal itself is lost with the process.
pub fn posix_timers() -> io::Result<Vec<PosixTimer>> {
    let text = read_text("/proc/self/timers")?;
    let mut timers = parse_timers(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("cannot read /proc/self/timers: {text:?}"),
        )
    })?;
    if timers.is_empty() {
        return Ok(timers);
    }
    let refuse = |t: &PosixTimer, why: String| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!("POSIX timer {} {why}", t.id),
        )
    };
    if !timer_ids_restorable() {
        return Err(refuse(
            &timers[0],
            "cannot be created again with its id: this kernel lacks PR_TIMER_CREATE_RESTORE_IDS (Linux 6.15 or later)".into(),
        ));
    }
    let tids = list_tids()?;
    let shared = shared_pending();
    for t in &mut timers {
        if !clock_restorable(t.clock) {
            return Err(refuse(
                t,
                format!("counts a thread's CPU time (clock {}), which a restart cannot give back to that thread", t.clock),
            ));
        }
        let pending = match t.notify {
            TimerNotify::None => 0,
            TimerNotify::ThreadId(tid) => {
                if tids.binary_search(&tid).is_err() {
                    return Err(refuse(
                        t,
                        format!("signals thread {tid}, which is not a thread of this process"),
                    ));
                }
                thread_pending(tid)
            }
            TimerNotify::Signal | TimerNotify::Thread => shared,
        };
        let (interval, left) = crate::sys::timer_gettime_ns(t.id)
            .map_err(|e| refuse(t, format!("cannot be read: {e}")))?;
        t.interval_ns = interval;
        t.left_ns = left;
        if t.signal >= 1 && pending & (1 << (t.signal - 1)) != 0 {
            t.left_ns = 1;
        }
    }
    Ok(timers)
}

/// Clocks a timer created by another thread of the restarted process measures alike: all
/// but `CLOCK_THREAD_CPUTIME_ID` and the encoded CPU clocks (negative) of a thread or of a
/// process named by its id; the process's own (−6, pid field 0) is fine.
fn clock_restorable(clock: i32) -> bool {
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    match clock {
        CLOCK_THREAD_CPUTIME_ID => false,
        0.. => true,
        // `~pid << 3 | perthread << 2 | which` (linux/posix-timers.h).
        c => !(c >> 3) == 0 && c & 4 == 0,
    }
}

/// `/proc/<pid>/timers`: per timer the lines `ID: 0`, `signal: 36/0000000000001234` (the
/// number, then `sigev_value` in hex), `notify: signal/pid.2` (`signal`, `none` or
/// `thread`, then `pid` or `tid` and the process or thread it signals) and `ClockID: 1`.
/// The times are left at 0. None when the text is not that.
pub fn parse_timers(text: &str) -> Option<Vec<PosixTimer>> {
    let mut out: Vec<PosixTimer> = Vec::new();
    for line in text.lines() {
        let (key, v) = line.split_once(": ")?;
        match key {
            "ID" => out.push(PosixTimer {
                id: v.parse().ok()?,
                ..Default::default()
            }),
            "signal" => {
                let (sig, value) = v.split_once('/')?;
                let t = out.last_mut()?;
                t.signal = sig.parse().ok()?;
                t.value = u64::from_str_radix(value, 16).ok()?;
            }
            "notify" => {
                let (how, target) = v.split_once('/')?;
                let (kind, id) = target.split_once('.')?;
                let t = out.last_mut()?;
                t.notify = match (how, kind) {
                    ("signal", "pid") => TimerNotify::Signal,
                    ("none", "pid") => TimerNotify::None,
                    ("thread", "pid") => TimerNotify::Thread,
                    ("signal", "tid") => TimerNotify::ThreadId(id.parse().ok()?),
                    _ => return None,
                };
            }
            "ClockID" => out.last_mut()?.clock = v.parse().ok()?,
            _ => {}
        }
    }
    out.sort_by_key(|t| t.id);
    Some(out)
}

/// The name of thread `tid` of this process, as [`crate::ThreadRecord::name`] keeps it;
/// zeros when it cannot be read (the thread is ending).
pub fn thread_name(tid: u32) -> [u8; THREAD_NAME_LEN] {
    let mut name = [0u8; THREAD_NAME_LEN];
    let mut buf = [0u8; THREAD_NAME_LEN + 1];
    let Ok(n) = std::fs::File::open(format!("/proc/self/task/{tid}/comm"))
        .and_then(|mut f| f.read(&mut buf))
    else {
        return name;
    };
    // The name, then the newline the file adds.
    let text = buf[..n].strip_suffix(b"\n").unwrap_or(&buf[..n]);
    let len = text.len().min(THREAD_NAME_MAX);
    name[..len].copy_from_slice(&text[..len]);
    name
}

/// The signals pending for thread `tid` alone (`SigPnd:` of its status).
fn thread_pending(tid: u32) -> u64 {
    status_mask(&format!("/proc/self/task/{tid}/status"), "SigPnd:")
}

/// The interval timers, as [`ProcessRecord::itimers`] keeps them. A timer that fired while
/// every thread is stopped with its signal blocked shows 0 left (the kernel re-arms it only
/// as the signal is taken, and that signal is pending, which a restart would lose): it is
/// kept as due at once, so that a restart fires it.
pub fn itimers() -> [(u64, u64); ITIMERS] {
    let left = itimers_left();
    itimers_with(left, shared_pending())
}

/// The interval timers and their signals, in [`ProcessRecord::itimers`]'s order.
const ITIMER_SIGNALS: [(i32, i32); ITIMERS] = [
    (libc::ITIMER_REAL, libc::SIGALRM),
    (libc::ITIMER_VIRTUAL, libc::SIGVTALRM),
    (libc::ITIMER_PROF, libc::SIGPROF),
];

/// Each interval timer's (interval, time left), as `getitimer` says. Read before the
/// signals pending: a timer expiring between the two reads has queued its signal by the
/// time it shows 0 left, so it is seen fired; read after, it would be seen disarmed, and a
/// restart would lose it.
fn itimers_left() -> [(u64, u64); ITIMERS] {
    ITIMER_SIGNALS.map(|(which, _)| crate::sys::getitimer_us(which))
}

/// [`itimers`] from the timers as `itimers_left` read them and the signals pending for the
/// whole process, read after them.
fn itimers_with(left: [(u64, u64); ITIMERS], pending: u64) -> [(u64, u64); ITIMERS] {
    let mut out = left;
    for (t, &(_, sig)) in out.iter_mut().zip(&ITIMER_SIGNALS) {
        let fired = pending & (1 << (sig - 1)) != 0;
        if t.1 == 0 && fired {
            t.1 = 1;
        }
    }
    out
}

/// The signals pending for the whole process (`ShdPnd:` of /proc/self/status).
fn shared_pending() -> u64 {
    status_mask("/proc/self/status", "ShdPnd:")
}

/// A hexadecimal signal mask of a status file; 0 when it cannot be read.
fn status_mask(path: &str, key: &str) -> u64 {
    read_text(path).map_or(0, |t| mask_of(&t, key))
}

/// The hexadecimal mask on a status text's line `key`; 0 when there is none.
fn mask_of(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0)
}

/// The text of a small `/proc` file (see [`read_all`]).
pub fn read_text(path: &str) -> io::Result<String> {
    read_all(&std::fs::File::open(path)?)
}

/// The text of a small `/proc` file, at most 1 MiB. Read with plain `read` calls: the
/// standard library's `read_to_string` on a `File` first asks its size and position
/// (`statx`, `lseek`), which a `/proc` file does not have, two more system calls for each
/// file the capture reads while the program is stopped.
pub(crate) fn read_all(file: &std::fs::File) -> io::Result<String> {
    let mut text = String::with_capacity(2048);
    Read::take(file, 1 << 20).read_to_string(&mut text)?;
    Ok(text)
}

/// A path the record can hold: the record's strings are UTF-8, so a path that is not is
/// refused, naming where it came from, rather than stored as another path.
pub(crate) fn utf8(p: PathBuf, from: &str) -> io::Result<String> {
    p.into_os_string().into_string().map_err(|p| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{from} is {p:?}, not UTF-8, which the process record cannot hold"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_past_a_command_name_with_spaces_and_parens() {
        // Fields 3..=52, each its own number, so a miscount shows.
        let rest: Vec<String> = (3..=52).map(|n| n.to_string()).collect();
        let text = format!("4242 (a b) c) {}\n", rest.join(" "));
        assert_eq!(
            parse_stat(&text, 7),
            Some([26, 27, 45, 46, 47, 7, 28, 48, 49, 50, 51])
        );
        assert_eq!(parse_stat("1 (x) 3 4", 0), None);
        assert_eq!(parse_stat("no parens", 0), None);
    }

    #[test]
    fn timers_are_read_as_the_kernel_lists_them() {
        let text = "ID: 2\nsignal: 36/0000000000001234\nnotify: none/pid.20318\nClockID: -6\n\
                    ID: 1\nsignal: 32/00005652f055c460\nnotify: signal/tid.20319\nClockID: 0\n\
                    ID: 0\nsignal: 35/0000000000000000\nnotify: signal/pid.20318\nClockID: 1\n";
        let t = parse_timers(text).unwrap();
        assert_eq!(t.iter().map(|t| t.id).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(
            (t[0].notify, t[0].signal, t[0].clock),
            (TimerNotify::Signal, 35, 1)
        );
        assert_eq!(t[1].notify, TimerNotify::ThreadId(20319));
        assert_eq!(t[1].value, 0x5652_f055_c460);
        assert_eq!(
            (t[2].notify, t[2].clock, t[2].value),
            (TimerNotify::None, -6, 0x1234)
        );
        assert_eq!(parse_timers("").unwrap(), []);
        assert_eq!(parse_timers("signal: 1/0\n"), None);
        assert_eq!(parse_timers("ID: 1\nnotify: signal/xid.3\n"), None);
    }

    #[test]
    fn only_a_threads_cpu_clock_is_refused() {
        for ok in [0, 1, 2, 7, 11, -6] {
            assert!(clock_restorable(ok), "{ok}");
        }
        // CLOCK_THREAD_CPUTIME_ID, glibc's thread clock (-2), and pid 5's process clock.
        for bad in [3, -2, (!5 << 3) | 2] {
            assert!(!clock_restorable(bad), "{bad}");
        }
    }
}
