//! Stopping the program's threads at a checkpoint, and what each leaves behind.
//!
//! The checkpointing thread sends every other thread the checkpoint signal. Its handler
//! records where the kernel put the thread's signal frame (which holds every register,
//! the vector state and the signal mask, and which `rt_sigreturn` brings back), the thread's
//! TLS base, the kernel's per-thread pointers (clear-child-tid, robust futex list, rseq area),
//! then waits until it is released. The frame lies on the thread's own stack, which is
//! program memory and stored like any other. Everything here runs in a signal handler:
//! atomics and raw system calls only.

// Raw system calls on the thread's own behalf, in a signal handler.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering::SeqCst};

/// Threads a checkpoint can stop; a process with more is refused, naming the limit.
pub const MAX_THREADS: usize = 4096;

/// What one stopped thread left for the record.
pub struct Slot {
    pub tid: AtomicU32,
    pub frame: AtomicU64,
    pub fs_base: AtomicU64,
    pub tid_address: AtomicU64,
    pub robust_head: AtomicU64,
    pub robust_len: AtomicU64,
    pub rseq: AtomicU64,
}

impl Slot {
    // A template for the static table and for `here`: each use is a fresh value.
    #[allow(clippy::declare_interior_mutable_const)]
    const EMPTY: Slot = Slot {
        tid: AtomicU32::new(0),
        frame: AtomicU64::new(0),
        fs_base: AtomicU64::new(0),
        tid_address: AtomicU64::new(0),
        robust_head: AtomicU64::new(0),
        robust_len: AtomicU64::new(0),
        rseq: AtomicU64::new(0),
    };

    /// Fill in the calling thread's state; `frame`: its signal frame's ucontext.
    pub fn fill(&self, frame: usize) {
        let mut fs: u64 = 0;
        let mut tid_address: u64 = 0;
        let (mut head, mut len): (u64, u64) = (0, 0);
        // SAFETY: each call writes only the local it is given.
        unsafe {
            libc::syscall(libc::SYS_arch_prctl, ARCH_GET_FS, &mut fs as *mut u64);
            libc::prctl(libc::PR_GET_TID_ADDRESS, &mut tid_address as *mut u64);
            libc::syscall(
                libc::SYS_get_robust_list,
                0,
                &mut head as *mut u64,
                &mut len as *mut u64,
            );
        }
        self.tid.store(gettid(), SeqCst);
        self.frame.store(frame as u64, SeqCst);
        self.fs_base.store(fs, SeqCst);
        self.tid_address.store(tid_address, SeqCst);
        self.robust_head.store(head, SeqCst);
        self.robust_len.store(len, SeqCst);
        self.rseq.store(rseq_area(fs), SeqCst);
    }
}

impl Slot {
    /// The calling thread's slot, outside the table.
    pub fn here(frame: usize) -> Slot {
        let s = Slot::EMPTY;
        s.fill(frame);
        s
    }

    /// As the process record keeps it; `pid`: the thread group leader's id.
    pub fn record(&self, pid: u32) -> ickpt_process::ThreadRecord {
        let tid = self.tid.load(SeqCst);
        let rseq = self.rseq.load(SeqCst);
        ickpt_process::ThreadRecord {
            tid,
            role: if tid == pid {
                ickpt_process::role::LEADER
            } else {
                ickpt_process::role::OTHER
            },
            frame: self.frame.load(SeqCst),
            fs_base: self.fs_base.load(SeqCst),
            tid_address: self.tid_address.load(SeqCst),
            robust_head: self.robust_head.load(SeqCst),
            robust_len: self.robust_len.load(SeqCst),
            rseq,
            rseq_len: if rseq == 0 { 0 } else { RSEQ_LEN },
            rseq_sig: if rseq == 0 { 0 } else { RSEQ_SIG },
            // Read here, by the checkpointing thread, since the stopped thread's handler
            // must not open files.
            name: ickpt_process::capture::thread_name(tid),
        }
    }
}

pub static SLOTS: [Slot; MAX_THREADS] = [Slot::EMPTY; MAX_THREADS];
/// Slots filled in this checkpoint.
pub static FILLED: AtomicUsize = AtomicUsize::new(0);
/// Threads stopped in this checkpoint (futex word the checkpointing thread waits on).
pub static PARKED: AtomicU32 = AtomicU32::new(0);
/// The checkpoint under way; a stopped thread waits until `RELEASED` equals it.
pub static ROUND: AtomicU32 = AtomicU32::new(0);
/// Futex word: the round whose stopped threads may go on.
pub static RELEASED: AtomicU32 = AtomicU32::new(0);
/// The checkpointing thread's id.
pub static CHECKPOINTER: AtomicI32 = AtomicI32::new(0);

/// arch_prctl's code for reading the thread pointer (FS base).
const ARCH_GET_FS: i32 = 0x1003;

pub fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

extern "C" {
    /// glibc (2.35+): where each thread's rseq area lies from its thread pointer, and
    /// whether glibc registered one at all (0: it did not).
    static __rseq_offset: isize;
    static __rseq_size: u32;
}

/// The rseq area glibc registered for the thread whose thread pointer is `fs`; 0: none.
pub fn rseq_area(fs: u64) -> u64 {
    // SAFETY: plain reads of two constants glibc sets before any user code runs.
    let (offset, size) = unsafe { (__rseq_offset, __rseq_size) };
    if size == 0 || fs == 0 {
        return 0;
    }
    (fs as i64 + offset as i64) as u64
}

/// The length glibc registers its rseq areas with (its `struct rseq_area`).
pub const RSEQ_LEN: u32 = 32;
/// x86-64's rseq abort signature, the one glibc registers with.
pub const RSEQ_SIG: u32 = 0x5305_3053;

pub use ickpt::whole_process::{futex_wait, futex_wake};

/// Let the stopped threads of `round` go on.
pub fn release(round: u32) {
    RELEASED.store(round, SeqCst);
    futex_wake(&RELEASED);
}

/// Let the stopped threads of the round under way go on (an async checkpoint does once its
/// pages are scheduled), and note when.
pub fn release_now() {
    RELEASED_AT.store(monotonic_ns(), SeqCst);
    release(ROUND.load(SeqCst));
}

/// When `release_now` last ran (monotonic nanoseconds).
pub static RELEASED_AT: AtomicU64 = AtomicU64::new(0);

pub use ickpt::whole_process::monotonic_ns;

/// A thread the checkpoint signal found holding ickpt's heap lock: it stops as soon as it
/// lets go of it (`stop_if_deferred`), not inside.
static DEFERRED: AtomicU32 = AtomicU32::new(0);

/// Called by a thread that has just let go of ickpt's heap lock: if the checkpoint signal was
/// deferred for it, raise it now.
pub fn stop_if_deferred(me: u32) {
    if DEFERRED.load(SeqCst) == me && DEFERRED.swap(0, SeqCst) == me {
        let signal = crate::checkpointer::signal();
        // SAFETY: sends the checkpoint signal to this very thread.
        unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), me, signal) };
    }
}

/// The handler's part for a thread other than the checkpointing one: leave its state and
/// wait for the release of this round (once out of ickpt's heap, if it was inside).
pub fn park(frame: usize) {
    let me = gettid();
    if crate::HEAP.held_by(me) {
        DEFERRED.store(me, SeqCst);
        return;
    }
    let round = ROUND.load(SeqCst);
    let i = FILLED.fetch_add(1, SeqCst);
    if i < MAX_THREADS {
        SLOTS[i].fill(frame);
    }
    PARKED.fetch_add(1, SeqCst);
    futex_wake(&PARKED);
    loop {
        let released = RELEASED.load(SeqCst);
        if released == round {
            return;
        }
        futex_wait(&RELEASED, released, 1000);
    }
}
