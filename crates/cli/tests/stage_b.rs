//! Stage B of `ickpt restart`, without the rest of the system: a forked child plays both the
//! checkpointed program and stage A in miniature, then runs the real blob on its own plan.
//!
//! The child starts two threads (a worker and one in the checkpointer's role) that compute in
//! a loop and stop themselves mid-loop with a signal, the loop's state pinned in registers
//! (r12, r13, xmm7) at that moment. Their handler records what a checkpoint records (frame, FS
//! base, tid address, robust list, rseq area) and ends the thread with a raw `exit`, as if the
//! old process had died: only the frame on its stack is left. The child then stages a data
//! mapping elsewhere and unmaps the original, moves `[vvar]`/`[vvar_vclock]`/`[vdso]` away,
//! and stops itself the same way; its handler points its own tid word, tid address, robust
//! list, thread pointer and alternate stack elsewhere, as stage A's would be, and enters stage
//! B. Stage B must bring back all of it: the data at its old address and stage A's mapping
//! gone, the vDSO where glibc calls it, the command line and auxv of the plan, both threads
//! recreated from their frames (finishing with the result of an uninterrupted run, so every
//! register survived, and `pthread_join` returning on them), each thread's kernel state, the
//! restart word, the checkpointer released first and the others only by it, and the leader
//! resuming after its own signal. A second test checks how a failing step is reported.
//!
//! Only the parent runs the test harness; the child reports through its exit status and what it
//! writes to fd 2, which the parent reads from a pipe.
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

#[allow(dead_code)]
#[path = "../src/restart/plan.rs"]
mod plan;

#[allow(dead_code)]
#[path = "../src/restart/jump.rs"]
mod jump;

use plan::{Move, Plan, Range, Thread};
use std::arch::asm;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

const PR_GET_TID_ADDRESS: libc::c_int = 40;
const ARCH_SET_FS: libc::c_int = 0x1002;
const ARCH_GET_FS: libc::c_int = 0x1003;
/// glibc's signature for its rseq areas on x86-64.
const RSEQ_SIG: u32 = 0x5305_3053;
const AT_FLAGS: u64 = 8;
/// What the child writes into the saved auxv's `AT_FLAGS`, to see stage B's auxv applied.
const AUXV_MARK: u64 = 0x1cc9;
const RESTART_VALUE: u64 = 0x1cc9_5eed_0000_0001;
const CMDLINE: &[u8] = b"ickpt-stage-b\0restarted\0";

const ROUNDS: u64 = 1_000_000;
const WORKER: usize = 0;
const CKPT: usize = 1;
const LEADER: usize = 2;
/// Per thread slot: the loop's seed and the round at which it stops itself.
const SEEDS: [u64; 2] = [0x1234_5678_9abc_def0, 0x0fed_cba9_8765_4321];
const STOPS: [u64; 2] = [ROUNDS / 3, ROUNDS / 2];

const PS: usize = 4096;
/// The hole: the plan and its arrays, the blob, a stack for stage B per thread, and `temp`.
const HOLE_LEN: usize = 4 << 20;
const THREADS_OFF: usize = 0x400;
const UNMAP_OFF: usize = 0x800;
const SPECIAL_OFF: usize = 0x900;
const MOVE_OFF: usize = 0xa00;
const AUXV_OFF: usize = 0x1000;
const PLAN_LEN: usize = 0x10000;
const BLOB_OFF: usize = 0x10000;
const STACKS_OFF: usize = 0x20000;
const STACK_LEN: usize = 0x10000;
const TEMP_OFF: usize = 0x100000;
/// Where the leader's thread state points, in place of stage A's, when it enters stage B.
const DECOY_OFF: usize = 0x8000;
const DATA_LEN: usize = 16 * PS;

/// What the signal handlers need, set before any of them can run.
static PLAN: AtomicUsize = AtomicUsize::new(0);
static BLOB: AtomicUsize = AtomicUsize::new(0);
static TIDS: [AtomicI32; 2] = [AtomicI32::new(0), AtomicI32::new(0)];
static RECORDED: AtomicU32 = AtomicU32::new(0);
static RSEQ_OFFSET: AtomicUsize = AtomicUsize::new(0);
static RSEQ_SIZE: AtomicU32 = AtomicU32::new(0);
/// Stage B writes RESTART_VALUE here before any thread resumes.
static RESTART_WORD: AtomicU64 = AtomicU64::new(0);
/// Set by the checkpointer when it resumes, before it releases the others.
static CKPT_RESUMED: AtomicBool = AtomicBool::new(false);
/// What the checkpointer saw in RESTART_WORD, and the worker in CKPT_RESUMED, on resuming.
static CKPT_SAW_RESTART: AtomicU64 = AtomicU64::new(0);
static WORKER_SAW_CKPT: AtomicBool = AtomicBool::new(false);
/// go_all as the checkpointer found it on resuming: only it may release the others.
static CKPT_SAW_GO_ALL: AtomicU32 = AtomicU32::new(u32::MAX);
/// Whether the checkpointer saw the leader blocked on go_all before releasing it.
static CKPT_SAW_LEADER_WAIT: AtomicBool = AtomicBool::new(false);
static LEADER_TID: AtomicI32 = AtomicI32::new(0);

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn plan_ptr() -> *mut Plan {
    PLAN.load(Ordering::SeqCst) as *mut Plan
}

fn thread_slot(slot: usize) -> *mut Thread {
    // SAFETY: PLAN points at the plan page of the hole, THREADS_OFF lies inside it.
    unsafe {
        (plan_ptr() as *mut u8)
            .add(THREADS_OFF)
            .cast::<Thread>()
            .add(slot)
    }
}

/// The loop the threads run. At round `stop_at` it signals its own thread with the state of the
/// loop pinned in registers, so the signal frame holds it and only a correct `rt_sigreturn`
/// gives it back; `resumed` runs right after, which is after the restart.
fn work(seed: u64, stop_at: u64, resumed: fn()) -> (u64, u64) {
    // SAFETY: plain system calls without memory arguments.
    let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
    let mut acc = seed;
    let mut x = 1.0f64;
    let mut i = 0u64;
    while i < ROUNDS {
        acc = acc.rotate_left(7) ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x = x * 1.000_000_1 + (acc & 0xff) as f64;
        if i == stop_at {
            // SAFETY: tgkill to this thread; the handler does not return here (the thread
            // ends), stage B's rt_sigreturn does, with every register of the frame.
            unsafe {
                asm!(
                    "syscall",
                    inlateout("rax") libc::SYS_tgkill => _,
                    in("rdi") pid as i64,
                    in("rsi") tid as i64,
                    in("rdx") libc::SIGUSR2 as i64,
                    inout("r12") i,
                    inout("r13") acc,
                    inout("xmm7") x,
                    lateout("rcx") _,
                    lateout("r11") _,
                    options(nostack),
                );
            }
            resumed();
        }
        i += 1;
    }
    (acc, x.to_bits())
}

fn worker_resumed() {
    WORKER_SAW_CKPT.store(CKPT_RESUMED.load(Ordering::SeqCst), Ordering::SeqCst);
}

/// What ickpt's checkpointer does once back in the library: release everybody else.
fn ckpt_resumed() {
    CKPT_SAW_RESTART.store(RESTART_WORD.load(Ordering::SeqCst), Ordering::SeqCst);
    CKPT_RESUMED.store(true, Ordering::SeqCst);
    // The leader must be parked in stage B, in a futex wait on go_all, and stays there until
    // this thread releases it: /proc shows the call and its first argument.
    let go_all_at = plan_ptr() as usize;
    let syscall = format!(
        "/proc/self/task/{}/syscall",
        LEADER_TID.load(Ordering::SeqCst)
    );
    let waiting = format!("{} {go_all_at:#x} ", libc::SYS_futex);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if std::fs::read_to_string(&syscall).is_ok_and(|s| s.starts_with(&waiting)) {
            CKPT_SAW_LEADER_WAIT.store(true, Ordering::SeqCst);
            break;
        }
        std::thread::yield_now();
    }
    // SAFETY: go_all is the plan's first field, a u32 the plan page holds; stage B waits on
    // it with the private futex ops.
    unsafe {
        let go_all = AtomicU32::from_ptr(std::ptr::addr_of_mut!((*plan_ptr()).go_all));
        CKPT_SAW_GO_ALL.store(go_all.load(Ordering::SeqCst), Ordering::SeqCst);
        go_all.store(1, Ordering::SeqCst);
        libc::syscall(
            libc::SYS_futex,
            go_all.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
        );
    }
}

struct ThreadOutcome {
    result: (u64, u64),
    state: Result<(), String>,
}

extern "C" fn thread_main(arg: *mut c_void) -> *mut c_void {
    let slot = arg as usize;
    // SAFETY: a system call without arguments.
    TIDS[slot].store(unsafe { libc::gettid() }, Ordering::SeqCst);
    let resumed = if slot == CKPT {
        ckpt_resumed
    } else {
        worker_resumed
    };
    let result = work(SEEDS[slot], STOPS[slot], resumed);
    let state = kernel_state(slot);
    Box::into_raw(Box::new(ThreadOutcome { result, state })).cast()
}

/// The registered rseq area of the thread whose FS base is `fs`, and the length it was
/// registered with: registering the same area again fails with EBUSY exactly when address,
/// length and signature all match the registration.
fn rseq_of(fs: u64) -> (u64, u32) {
    let size = RSEQ_SIZE.load(Ordering::SeqCst);
    if size == 0 {
        return (0, 0);
    }
    let area = fs.wrapping_add(RSEQ_OFFSET.load(Ordering::SeqCst) as u64);
    for len in [32, size] {
        // SAFETY: a registration attempt of the calling thread's own area; it only fails.
        let r = unsafe { libc::syscall(libc::SYS_rseq, area, len, 0, RSEQ_SIG) };
        if r == -1 && errno() == libc::EBUSY {
            return (area, len);
        }
    }
    (0, 0)
}

/// What a checkpoint's handler records of the calling thread (async-signal-safe: system calls
/// only). The stack and the role were set beforehand.
fn record(t: &mut Thread, uc: *mut c_void) {
    let mut fs = 0u64;
    let mut tid_address = 0u64;
    let mut robust_head = 0u64;
    let mut robust_len = 0usize;
    // SAFETY: each call writes only the local it is given.
    unsafe {
        libc::syscall(libc::SYS_arch_prctl, ARCH_GET_FS, &raw mut fs);
        libc::prctl(PR_GET_TID_ADDRESS, &raw mut tid_address);
        libc::syscall(
            libc::SYS_get_robust_list,
            0,
            &raw mut robust_head,
            &raw mut robust_len,
        );
    }
    let (rseq, rseq_len) = rseq_of(fs);
    t.frame = uc as u64;
    t.fs_base = fs;
    t.tid_address = tid_address;
    t.robust_head = robust_head;
    t.robust_len = robust_len as u64;
    t.rseq = rseq;
    t.rseq_len = rseq_len;
    t.rseq_sig = if rseq != 0 { RSEQ_SIG } else { 0 };
}

/// The threads' stop: record, then die as the old process's threads died, leaving only the
/// frame on the stack.
extern "C" fn on_thread_stop(_sig: libc::c_int, _info: *mut libc::siginfo_t, uc: *mut c_void) {
    // SAFETY: a system call without arguments.
    let me = unsafe { libc::gettid() };
    let Some(slot) = TIDS.iter().position(|t| t.load(Ordering::SeqCst) == me) else {
        // SAFETY: ends the process; nothing is left to check.
        unsafe { libc::_exit(3) }
    };
    // SAFETY: the slot is this thread's own; the leader reads it only after RECORDED counts it.
    record(unsafe { &mut *thread_slot(slot) }, uc);
    RECORDED.fetch_add(1, Ordering::SeqCst);
    // SAFETY: a wake on a static; then the raw exit ends this thread only, without glibc's
    // cleanup, so its stack and frame stay as they are.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            RECORDED.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
        );
        libc::syscall(libc::SYS_exit, 0);
    }
}

/// The leader's stop: record, and turn into stage B from inside the handler, as `ickpt-ckpt`
/// does; stage B's rt_sigreturn returns from this signal into the code that raised it.
extern "C" fn on_leader_stop(_sig: libc::c_int, _info: *mut libc::siginfo_t, uc: *mut c_void) {
    // SAFETY: the leader's slot and the plan are in the hole, written only by this thread.
    let (leader, plan) = unsafe { (&mut *thread_slot(LEADER), &mut *plan_ptr()) };
    record(leader, uc);
    plan.rseq_now = leader.rseq;
    plan.rseq_now_len = leader.rseq_len;
    plan.rseq_now_sig = leader.rseq_sig;
    // In a real restart the leader enters stage B as another task, with stage A's tid in
    // glibc's cache, stage A's tid address, robust list, thread pointer and alternate stack;
    // this one is the same task, so it points them elsewhere: stage B must put every one back.
    // The alternate stack covers the frame, as stage A's may cover the program's stack after
    // the moves. The thread pointer goes last: nothing after it reads TLS.
    let decoy = plan as *mut Plan as usize + DECOY_OFF;
    let alt = libc::stack_t {
        ss_sp: ((uc as usize & !(PS - 1)) - STACK_LEN / 2) as *mut c_void,
        ss_flags: 0,
        ss_size: STACK_LEN,
    };
    // SAFETY: the tid word is glibc's pd->tid of this thread, read by nothing before stage B
    // rewrites it; the decoy is a page of the hole; the alternate stack is only recorded.
    unsafe {
        std::ptr::write_volatile(leader.tid_address as *mut i32, 0x3fff_fff0);
        libc::syscall(libc::SYS_set_tid_address, decoy);
        libc::syscall(libc::SYS_set_robust_list, decoy, 24);
        libc::sigaltstack(&alt, std::ptr::null_mut());
        libc::syscall(libc::SYS_arch_prctl, ARCH_SET_FS, decoy);
    }
    // SAFETY: the blob is a copy of STAGE_B mapped read and execute, the plan is complete,
    // the leader's stack in the hole is unused, and all signals are blocked (sa_mask).
    unsafe { jump::enter_stage_b(BLOB.load(Ordering::SeqCst), plan, leader.stack_top as usize) }
}

fn handle(sig: libc::c_int, f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void)) {
    // SAFETY: a zeroed sigaction is valid; the handler is an extern "C" function, and a full
    // sa_mask blocks every signal while it (and stage B) runs.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = f as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigfillset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(sig, &sa, std::ptr::null_mut()), 0);
    }
}

/// Waits until `done(*word)`, for at most 10 s: the kernel wakes `shared` words (a thread's
/// tid) with the shared futex ops, the handlers the others with the private ones.
fn wait_word(what: &str, word: *const u32, shared: bool, done: impl Fn(u32) -> bool) -> R {
    let op = if shared {
        libc::FUTEX_WAIT
    } else {
        libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG
    };
    let slice = libc::timespec {
        tv_sec: 0,
        tv_nsec: 50_000_000,
    };
    for _ in 0..200 {
        // SAFETY: the word is live memory of this process.
        let seen = unsafe { std::ptr::read_volatile(word) };
        if done(seen) {
            return Ok(());
        }
        // SAFETY: a bounded futex wait on that word.
        unsafe { libc::syscall(libc::SYS_futex, word, op, seen, &raw const slice) };
    }
    Err(format!("timed out waiting for {what}"))
}

type R = Result<(), String>;

fn ensure(ok: bool, what: impl FnOnce() -> String) -> R {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

fn mapped(addr: u64, len: usize) -> bool {
    let mut v = vec![0u8; len.div_ceil(PS)];
    // SAFETY: mincore only reports on the range; ENOMEM means part of it is not mapped.
    unsafe { libc::mincore(addr as *mut c_void, len, v.as_mut_ptr()) == 0 }
}

fn map(addr: usize, len: usize, prot: i32, flags: i32) -> Result<usize, String> {
    // SAFETY: an anonymous mapping; with MAP_FIXED only over the hole this test reserved.
    let p = unsafe { libc::mmap(addr as *mut c_void, len, prot, flags, -1, 0) };
    if p == libc::MAP_FAILED {
        return Err(format!("mmap: errno {}", errno()));
    }
    Ok(p as usize)
}

const ANON: i32 = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
const RW: i32 = libc::PROT_READ | libc::PROT_WRITE;

/// The special mappings, in address order, as /proc/self/maps names them.
fn specials() -> Result<Vec<(u64, u64)>, String> {
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for line in maps.lines() {
        let name = line.split_whitespace().nth(5).unwrap_or("");
        if ["[vvar]", "[vvar_vclock]", "[vdso]"].contains(&name) {
            let (s, e) = line.split_once(' ').unwrap().0.split_once('-').unwrap();
            let s = u64::from_str_radix(s, 16).unwrap();
            out.push((s, u64::from_str_radix(e, 16).unwrap() - s));
        }
    }
    ensure(!out.is_empty(), || "no [vdso] in maps".into())?;
    Ok(out)
}

/// prctl_mm_map's fields as the kernel has them now (/proc/self/stat, brk(0)).
fn mm_now() -> Result<[u64; 11], String> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(|e| e.to_string())?;
    let after = &stat[stat.rfind(')').ok_or("stat")? + 2..];
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|w| w.parse::<i64>().unwrap_or(0) as u64)
        .collect();
    // Field n of stat(5) is f[n - 3].
    let field = |n: usize| f[n - 3];
    // SAFETY: brk(0) only reports the current break.
    let brk = unsafe { libc::syscall(libc::SYS_brk, 0) } as u64;
    Ok([
        field(26),
        field(27),
        field(45),
        field(46),
        field(47),
        brk,
        field(28),
        field(48),
        field(49),
        field(50),
        field(51),
    ])
}

/// The child's whole run; Ok means stage B restored all it had to.
fn child() -> R {
    let blob = plan::stage_b()?;
    // glibc's rseq ABI (2.35+); absent or 0 means no rseq to restore.
    for (name, slot) in [(c"__rseq_offset", 0), (c"__rseq_size", 1)] {
        // SAFETY: dlsym on the running program; the symbols are a ptrdiff_t and an unsigned
        // int when present.
        unsafe {
            let p = libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr());
            if !p.is_null() && slot == 0 {
                RSEQ_OFFSET.store(*(p as *const isize) as usize, Ordering::SeqCst);
            } else if !p.is_null() {
                RSEQ_SIZE.store(*(p as *const u32), Ordering::SeqCst);
            }
        }
    }
    let expected: Vec<(u64, u64)> = (0..2).map(|k| work(SEEDS[k], u64::MAX, || {})).collect();

    // The hole, as the program reserved it, and what stage A puts in it.
    let hole = map(0, HOLE_LEN, libc::PROT_NONE, ANON | libc::MAP_NORESERVE)?;
    let fixed = ANON | libc::MAP_FIXED;
    map(hole, PLAN_LEN, RW, fixed)?;
    map(hole + STACKS_OFF, 3 * STACK_LEN, RW, fixed)?;
    let blob_at = map(hole + BLOB_OFF, blob.len().div_ceil(PS) * PS, RW, fixed)?;
    // SAFETY: the blob's pages were just mapped writable, then become read and execute.
    unsafe {
        std::ptr::copy_nonoverlapping(blob.as_ptr(), blob_at as *mut u8, blob.len());
        let len = blob.len().div_ceil(PS) * PS;
        let rc = libc::mprotect(
            blob_at as *mut c_void,
            len,
            libc::PROT_READ | libc::PROT_EXEC,
        );
        ensure(rc == 0, || format!("mprotect blob: errno {}", errno()))?;
    }
    PLAN.store(hole, Ordering::SeqCst);
    BLOB.store(blob_at, Ordering::SeqCst);

    // The program's memory: data with the command line stage B points the kernel at; a
    // mapping of "stage A" to unmap; a staging area; a place the special mappings go for now.
    let data = map(0, DATA_LEN, RW, ANON)?;
    let mut content: Vec<u8> = (0..DATA_LEN).map(|i| (i * 31 + 7) as u8).collect();
    content[..CMDLINE.len()].copy_from_slice(CMDLINE);
    // SAFETY: DATA_LEN bytes just mapped writable.
    unsafe { std::ptr::copy_nonoverlapping(content.as_ptr(), data as *mut u8, DATA_LEN) };
    let scratch = map(0, 2 * PS, RW, ANON)?;
    let staging = map(0, DATA_LEN, RW, ANON)?;
    let special = specials()?;
    let (lo, hi) = (
        special[0].0,
        special.iter().map(|s| s.0 + s.1).max().unwrap(),
    );
    let away = map(
        0,
        (hi - lo) as usize,
        libc::PROT_NONE,
        ANON | libc::MAP_NORESERVE,
    )? as u64;

    let mut mm = mm_now()?;
    mm[7] = data as u64;
    mm[8] = (data + CMDLINE.len()) as u64;
    let mut auxv = std::fs::read("/proc/self/auxv").map_err(|e| e.to_string())?;
    let flags_at = auxv
        .chunks(16)
        .position(|e| u64::from_le_bytes(e[..8].try_into().unwrap()) == AT_FLAGS)
        .ok_or("no AT_FLAGS in auxv")?;
    auxv[flags_at * 16 + 8..flags_at * 16 + 16].copy_from_slice(&AUXV_MARK.to_le_bytes());

    // SAFETY: the plan page is mapped writable and nothing else uses it yet; every array
    // offset lies inside it.
    unsafe {
        let at = |off: usize| (hole + off) as u64;
        let unmap = (hole + UNMAP_OFF) as *mut Range;
        unmap.write(Range {
            start: scratch as u64,
            len: 2 * PS as u64,
        });
        let sp = (hole + SPECIAL_OFF) as *mut Move;
        for (k, &(start, len)) in special.iter().enumerate() {
            sp.add(k).write(Move {
                from: away + (start - lo),
                to: start,
                len,
            });
        }
        ((hole + MOVE_OFF) as *mut Move).write(Move {
            from: staging as u64,
            to: data as u64,
            len: DATA_LEN as u64,
        });
        let auxv_at = (hole + AUXV_OFF) as *mut u8;
        std::ptr::copy_nonoverlapping(auxv.as_ptr(), auxv_at, auxv.len());
        for (slot, role) in [
            (WORKER, plan::ROLE_OTHER),
            (CKPT, plan::ROLE_CHECKPOINTER),
            (LEADER, plan::ROLE_LEADER),
        ] {
            thread_slot(slot).write(Thread {
                stack_top: (hole + STACKS_OFF + (slot + 1) * STACK_LEN) as u64,
                role,
                ..Thread::default()
            });
        }
        plan_ptr().write(Plan {
            magic: plan::PLAN_MAGIC,
            n_unmap: 1,
            unmap_at: at(UNMAP_OFF),
            n_special: special.len() as u64,
            special_at: at(SPECIAL_OFF),
            temp: at(TEMP_OFF),
            n_move: 1,
            move_at: at(MOVE_OFF),
            mm,
            auxv_at: auxv_at as u64,
            auxv_size: auxv.len() as u32,
            n_thread: 3,
            thread_at: at(THREADS_OFF),
            restart_word: RESTART_WORD.as_ptr() as u64,
            restart_value: RESTART_VALUE,
            ..Plan::default()
        });
    }

    // The checkpoint: both threads stop themselves and die.
    handle(libc::SIGUSR2, on_thread_stop);
    handle(libc::SIGUSR1, on_leader_stop);
    // SAFETY: a system call without arguments.
    LEADER_TID.store(unsafe { libc::gettid() }, Ordering::SeqCst);
    let mut handles = [0 as libc::pthread_t; 2];
    for (slot, h) in handles.iter_mut().enumerate() {
        // SAFETY: thread_main takes its slot number as the argument.
        let rc =
            unsafe { libc::pthread_create(h, std::ptr::null(), thread_main, slot as *mut c_void) };
        ensure(rc == 0, || format!("pthread_create: {rc}"))?;
    }
    wait_word("both threads to record", RECORDED.as_ptr(), false, |n| {
        n == 2
    })?;
    for slot in [WORKER, CKPT] {
        // SAFETY: recorded by the thread before it counted itself in RECORDED.
        let tid_address = unsafe { (*thread_slot(slot)).tid_address };
        ensure(tid_address != 0, || "no tid address recorded".into())?;
        wait_word(
            "a stopped thread to exit",
            tid_address as *const u32,
            true,
            |t| t == 0,
        )?;
    }

    let alt_before = altstack()?;
    // Stage A: the data goes to its staging place, the special mappings away, and the leader
    // stops like the others; stage B's rt_sigreturn comes back here. Nothing between the move
    // of the vDSO and the restart may call into it (no clock reads).
    // SAFETY: both areas are DATA_LEN bytes of this test's own mappings.
    unsafe {
        std::ptr::copy_nonoverlapping(data as *const u8, staging as *mut u8, DATA_LEN);
        ensure(libc::munmap(data as *mut c_void, DATA_LEN) == 0, || {
            "munmap".into()
        })?;
        for &(start, len) in &special {
            let to = away + (start - lo);
            let r = libc::mremap(
                start as *mut c_void,
                len as usize,
                len as usize,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                to as *mut c_void,
            );
            ensure(r as u64 == to, || {
                format!("mremap special: errno {}", errno())
            })?;
        }
        libc::syscall(
            libc::SYS_tgkill,
            libc::getpid(),
            libc::gettid(),
            libc::SIGUSR1,
        );
    }

    // Restarted.
    ensure(RESTART_WORD.load(Ordering::SeqCst) == RESTART_VALUE, || {
        "restart word not written".into()
    })?;
    ensure(CKPT_RESUMED.load(Ordering::SeqCst), || {
        "the leader resumed before the checkpointer released it".into()
    })?;
    ensure(altstack()? == alt_before, || {
        "the leader's alternate stack is not its own".into()
    })?;
    ensure(!mapped(scratch as u64, 2 * PS), || {
        "stage A's mapping is still mapped".into()
    })?;
    ensure(!mapped(staging as u64, DATA_LEN), || {
        "the staging mapping is still there".into()
    })?;
    // SAFETY: mapped again by stage B (checked), DATA_LEN bytes.
    let now = unsafe { std::slice::from_raw_parts(data as *const u8, DATA_LEN) };
    ensure(now == &content[..], || {
        "the data differ after the restart".into()
    })?;
    ensure(specials()? == special, || {
        format!(
            "special mappings at {:x?}, were at {special:x?}",
            specials()
        )
    })?;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: glibc calls the vDSO at its old address, which stage B moved it back to.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ensure(rc == 0 && ts.tv_sec + ts.tv_nsec > 0, || {
        "clock_gettime".into()
    })?;
    let cmdline = std::fs::read("/proc/self/cmdline").map_err(|e| e.to_string())?;
    ensure(cmdline == CMDLINE, || format!("cmdline {cmdline:?}"))?;
    let auxv_now = std::fs::read("/proc/self/auxv").map_err(|e| e.to_string())?;
    ensure(auxv_now == auxv, || "auxv not the plan's".into())?;
    kernel_state(LEADER)?;

    let mut real = ts;
    // SAFETY: writes the current time into `real`.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut real) };
    let deadline = libc::timespec {
        tv_sec: real.tv_sec + 20,
        tv_nsec: 0,
    };
    for (slot, h) in handles.into_iter().enumerate() {
        let mut ret: *mut c_void = std::ptr::null_mut();
        // SAFETY: pthread_t of a thread this child created; its recreated task clears pd->tid
        // at exit; the result is the Box thread_main leaked.
        let out = unsafe {
            let rc = libc::pthread_timedjoin_np(h, &mut ret, &deadline);
            ensure(rc == 0, || {
                format!("pthread_timedjoin_np of slot {slot}: {rc}")
            })?;
            Box::from_raw(ret.cast::<ThreadOutcome>())
        };
        out.state.clone()?;
        ensure(out.result == expected[slot], || {
            format!(
                "slot {slot} finished with {:x?}, an uninterrupted run with {:x?}",
                out.result, expected[slot]
            )
        })?;
    }
    ensure(
        CKPT_SAW_RESTART.load(Ordering::SeqCst) == RESTART_VALUE,
        || "the checkpointer resumed before the restart word was written".into(),
    )?;
    ensure(CKPT_SAW_GO_ALL.load(Ordering::SeqCst) == 0, || {
        "the others were released before the checkpointer".into()
    })?;
    ensure(CKPT_SAW_LEADER_WAIT.load(Ordering::SeqCst), || {
        "the leader was not waiting on go_all when the checkpointer resumed".into()
    })?;
    ensure(WORKER_SAW_CKPT.load(Ordering::SeqCst), || {
        "the worker resumed before the checkpointer released it".into()
    })?;
    // SAFETY: the plan page is still mapped; stage B no longer writes it.
    let p = unsafe { *plan_ptr() };
    ensure(p.created == 2 && p.failed_step == 0, || {
        format!("created {}, failed_step {}", p.created, p.failed_step)
    })
}

/// The calling thread's alternate signal stack.
fn altstack() -> Result<(usize, i32, usize), String> {
    // SAFETY: a zeroed stack_t is valid; sigaltstack only fills it.
    let mut now: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: queries the alternate stack into `now`.
    let rc = unsafe { libc::sigaltstack(std::ptr::null(), &mut now) };
    ensure(rc == 0, || format!("sigaltstack: errno {}", errno()))?;
    Ok((now.ss_sp as usize, now.ss_flags, now.ss_size))
}

/// The calling thread's kernel state after the restart, against what was recorded for `slot`.
fn kernel_state(slot: usize) -> R {
    // SAFETY: the slot was recorded before the restart and is not written since.
    let t = unsafe { *thread_slot(slot) };
    let mut fs = 0u64;
    let mut tid_address = 0u64;
    let mut head = 0u64;
    let mut len = 0usize;
    // SAFETY: each call writes only the local it is given; tid_address is glibc's pd->tid.
    let (tid, cached) = unsafe {
        libc::syscall(libc::SYS_arch_prctl, ARCH_GET_FS, &raw mut fs);
        libc::prctl(PR_GET_TID_ADDRESS, &raw mut tid_address);
        libc::syscall(libc::SYS_get_robust_list, 0, &raw mut head, &raw mut len);
        (
            libc::gettid(),
            std::ptr::read_volatile(t.tid_address as *const i32),
        )
    };
    ensure(fs == t.fs_base, || format!("slot {slot}: FS base"))?;
    ensure(tid_address == t.tid_address, || {
        format!(
            "slot {slot}: tid address {tid_address:x}, was {:x}",
            t.tid_address
        )
    })?;
    ensure(cached == tid, || {
        format!("slot {slot}: glibc's cached tid {cached}, the thread is {tid}")
    })?;
    ensure(head == t.robust_head && len as u64 == t.robust_len, || {
        format!("slot {slot}: robust list")
    })?;
    if t.rseq != 0 {
        ensure(rseq_of(fs) == (t.rseq, t.rseq_len), || {
            format!("slot {slot}: rseq area not registered")
        })?;
    }
    Ok(())
}

/// Forks, runs `body` in the child and returns its wait status and what it wrote to fd 2; a
/// child still running after 20 s is killed and the test fails.
fn in_child(body: fn() -> R) -> (i32, String) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) };
    assert_eq!(rc, 0, "pipe2: errno {}", errno());
    // SAFETY: the child only runs `body` and _exits; it never returns into the harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: errno {}", errno());
    if pid == 0 {
        // SAFETY: fd 2 becomes the pipe, so stage B's messages reach the parent.
        unsafe { libc::dup2(fds[1], 2) };
        let code = match std::panic::catch_unwind(body) {
            Ok(Ok(())) => 0,
            Ok(Err(msg)) => {
                say(&msg);
                1
            }
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                say(&format!("panic: {msg}"));
                2
            }
        };
        // SAFETY: ends the child without running the parent's harness or destructors.
        unsafe { libc::_exit(code) }
    }
    // SAFETY: the parent's copy of the write end; the child holds its own.
    unsafe { libc::close(fds[1]) };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut status = 0;
        // SAFETY: waits for the child this test forked.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let _ = tx.send(status);
    });
    let status = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| {
            // SAFETY: the child this test forked, still running.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = rx.recv();
            panic!("the child did not finish within 20 s");
        });
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: reads into buf from the pipe's read end, which never blocks.
        let n = unsafe { libc::read(fds[0], buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        text.extend_from_slice(&buf[..n as usize]);
    }
    // SAFETY: the read end, no longer used.
    unsafe { libc::close(fds[0]) };
    (status, String::from_utf8_lossy(&text).into_owned())
}

fn say(msg: &str) {
    let line = format!("{msg}\n");
    // SAFETY: writes the bytes of `line` to fd 2.
    unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}

#[test]
fn stage_b_restores_memory_threads_and_kernel_state() {
    let (status, text) = in_child(child);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status:#x} (exit {}, signal {}): {text}",
        libc::WEXITSTATUS(status),
        libc::WTERMSIG(status)
    );
}

/// A plan whose second step fails: stage B names the step and errno, records the step in the
/// plan and ends the process with its own status.
#[test]
fn stage_b_reports_the_failing_step() {
    // A shared page, so the parent sees failed_step after the child is gone.
    let page = map(0, PS, RW, libc::MAP_SHARED | libc::MAP_ANONYMOUS).unwrap();
    PLAN.store(page, Ordering::SeqCst);
    let (status, text) = in_child(|| {
        let blob = plan::stage_b()?;
        let len = blob.len().div_ceil(PS) * PS;
        let blob_at = map(0, len, RW, ANON)?;
        let stack = map(0, STACK_LEN, RW, ANON)?;
        // SAFETY: the blob's pages were just mapped writable, then become read and execute;
        // the plan page is this test's shared page.
        unsafe {
            std::ptr::copy_nonoverlapping(blob.as_ptr(), blob_at as *mut u8, blob.len());
            libc::mprotect(
                blob_at as *mut c_void,
                len,
                libc::PROT_READ | libc::PROT_EXEC,
            );
            let unmap = (PLAN.load(Ordering::SeqCst) + UNMAP_OFF) as *mut Range;
            unmap.write(Range { start: 1, len: 1 });
            plan_ptr().write(Plan {
                magic: plan::PLAN_MAGIC,
                n_unmap: 1,
                unmap_at: unmap as u64,
                ..Plan::default()
            });
            jump::enter_stage_b(blob_at, plan_ptr(), stack + STACK_LEN)
        }
    });
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == plan::STAGE_B_FAILED,
        "child status {status:#x}: {text}"
    );
    assert_eq!(
        text,
        format!(
            "ickpt restart: stage B step 2 (munmap) failed: errno {}\n",
            libc::EINVAL
        )
    );
    // SAFETY: the shared page, written by the child before it exited.
    assert_eq!(unsafe { (*plan_ptr()).failed_step }, 2);
}
