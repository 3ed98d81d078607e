//! The checkpoint signal: a real-time signal (SIGRTMIN+3 unless `ICKPT_RUN_SIGNAL` says
//! otherwise), queued per thread, that no ordinary program uses.
//!
//! Sent by the checkpointing thread to a thread of its own process (`tgkill`), it stops that
//! thread (`park.rs`), or, sent to itself, runs the checkpoint. Sent from anywhere else
//! (`ickpt checkpoint`), it only asks for a checkpoint.

// Installs a signal handler; reads the siginfo the kernel passes it.
#![allow(unsafe_code)]

use crate::checkpointer::{in_handler, TRIGGER};
use crate::park::{futex_wake, gettid, park, CHECKPOINTER};
use std::sync::atomic::Ordering::SeqCst;

const SI_TKILL: i32 = -6;

extern "C" fn on_signal(_sig: libc::c_int, info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    // SAFETY: errno is this thread's; saved here and put back before returning, so the
    // interrupted code never sees the handler's system calls.
    let errno = unsafe { *libc::__errno_location() };
    crate::interpose::handled_here();
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let (code, sender) = unsafe { ((*info).si_code, (*info).si_pid()) };
    // SAFETY: getpid cannot fail.
    let ours = code == SI_TKILL && sender == unsafe { libc::getpid() };
    if !ours {
        TRIGGER.fetch_add(1, SeqCst);
        futex_wake(&TRIGGER);
    } else if gettid() as i32 == CHECKPOINTER.load(SeqCst) {
        in_handler(uc as usize);
    } else {
        park(uc as usize);
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// The synchronous faults, which no thread may block (a fault with its signal blocked kills
/// the process).
const FAULTS: [i32; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGTRAP,
];

/// Block every signal but the faults on the calling thread; returns the mask it had.
pub fn block_all_but_faults() -> libc::sigset_t {
    // SAFETY: sigset operations on local sets; pthread_sigmask changes this thread only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        for f in FAULTS {
            libc::sigdelset(&mut set, f);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &set, &mut old);
        old
    }
}

/// Give the calling thread `mask`.
pub fn set_mask(mask: &libc::sigset_t) {
    // SAFETY: a valid set; changes this thread only.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, mask, std::ptr::null_mut()) };
}

/// Let the checkpoint signal in on the calling thread (the checkpointing thread, which
/// blocks every other).
pub fn unblock(signal: i32) {
    // SAFETY: sigset operations on a local set; changes this thread only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// Install the handler. No SA_ONSTACK: a thread's frame must land on its own stack, which is
/// stored, never on an alternate stack, which may not be. SA_RESTART: a thread stopped in a
/// restartable system call makes it again when it goes on (or after a restart). Every
/// signal but the synchronous faults is blocked while a thread is stopped in it: a program's
/// own handler (a SIGALRM tick) must not run on a stopped thread, on top of its frame, while
/// the process is captured; it runs once the thread goes on. The faults stay open for the
/// checkpointing thread, whose commit may take one on a fenced page.
pub fn install(signal: i32) -> std::io::Result<()> {
    // SAFETY: a zeroed sigaction is a valid starting point; every field used is set below.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_signal as *const () as usize;
    sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
    // SAFETY: `sa.sa_mask` is a valid sigset to fill and trim; sigaction reads `sa` only.
    let rc = unsafe {
        libc::sigfillset(&mut sa.sa_mask);
        for fault in [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGILL,
            libc::SIGFPE,
            libc::SIGTRAP,
        ] {
            libc::sigdelset(&mut sa.sa_mask, fault);
        }
        libc::sigaction(signal, &sa, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the program replaced the handler since.
pub fn intact(signal: i32) -> bool {
    // SAFETY: reads the current action into a zeroed struct.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a NULL new action only reads.
    let rc = unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) };
    rc == 0 && old.sa_sigaction == on_signal as *const () as usize
}
