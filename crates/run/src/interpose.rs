//! Waits that a checkpoint does not cut short. The checkpoint signal has a handler, and the
//! kernel ends `nanosleep`, `poll`, `select` and `sigtimedwait` with EINTR after any handler,
//! `SA_RESTART` or not; an unmodified program that treats EINTR as an error, or that sleeps
//! once and goes on, would behave differently under `ickpt run`. So the library defines these
//! functions (it is preloaded, so the program's calls come here first): each calls libc's own
//! and, when it failed with EINTR and the checkpoint signal's handler ran on this thread
//! meanwhile, waits again for what was left of the time. An EINTR of the program's own
//! signals reaches it as before.
//!
//! libc's own functions are found with `dlsym(RTLD_NEXT)` (so they stay cancellation points)
//! once, at the library's start; until then, and in processes the library does not act in,
//! the calls go straight through.

// Exported C functions with raw pointers; dlsym.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

thread_local! {
    /// How many times the checkpoint signal's handler ran on this thread. Constant-initialised
    /// without a destructor: read and written from the handler without allocating.
    static HANDLED: Cell<u64> = const { Cell::new(0) };
}

/// Called by the checkpoint signal's handler, on its thread.
pub fn handled_here() {
    HANDLED.with(|h| h.set(h.get().wrapping_add(1)));
}

fn handled() -> u64 {
    HANDLED.with(Cell::get)
}

/// libc's functions, by index into [`NAMES`]; 0 until [`resolve`].
static REAL: [AtomicUsize; 9] = [const { AtomicUsize::new(0) }; 9];
const NAMES: [&std::ffi::CStr; 9] = [
    c"nanosleep",
    c"clock_nanosleep",
    c"usleep",
    c"sleep",
    c"poll",
    c"ppoll",
    c"select",
    c"sigtimedwait",
    c"sigwaitinfo",
];
const NANOSLEEP: usize = 0;
const CLOCK_NANOSLEEP: usize = 1;
const POLL: usize = 4;
const PPOLL: usize = 5;
const SELECT: usize = 6;
const SIGTIMEDWAIT: usize = 7;
const SIGWAITINFO: usize = 8;

/// Find libc's functions (at the library's start, before the program's `main`).
pub fn resolve() {
    for (slot, name) in REAL.iter().zip(NAMES) {
        // SAFETY: dlsym with a valid C string; RTLD_NEXT finds the definition after ours.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
        slot.store(p as usize, Relaxed);
    }
}

/// libc's function `i` as type `F` (a function pointer), if resolved.
fn real<F: Copy>(i: usize) -> Option<F> {
    let p = REAL[i].load(Relaxed);
    // SAFETY: `p` is the address dlsym gave for NAMES[i], and each caller names the C type
    // of that function as F (a function pointer of pointer size).
    (p != 0).then(|| unsafe { std::mem::transmute_copy::<usize, F>(&p) })
}

fn errno() -> i32 {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Whether a call that failed with `failed_with` (an errno) was cut short by a checkpoint
/// that began after `before` was read.
fn by_checkpoint(failed_with: i32, before: u64) -> bool {
    failed_with == libc::EINTR && handled() != before
}

fn now_ns() -> i128 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes our local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as i128 * 1_000_000_000 + t.tv_nsec as i128
}

/// What is left of a wait that was to end at `deadline` (monotonic ns), as milliseconds
/// rounded up (0 once past it).
fn left_ms(deadline: i128) -> i32 {
    let left = (deadline - now_ns()).max(0);
    ((left + 999_999) / 1_000_000).min(i32::MAX as i128) as i32
}

fn timespec_ns(t: &libc::timespec) -> i128 {
    t.tv_sec as i128 * 1_000_000_000 + t.tv_nsec as i128
}

fn ns_timespec(ns: i128) -> libc::timespec {
    let ns = ns.max(0);
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

type NanosleepFn = unsafe extern "C" fn(*const libc::timespec, *mut libc::timespec) -> i32;
type ClockNanosleepFn =
    unsafe extern "C" fn(libc::clockid_t, i32, *const libc::timespec, *mut libc::timespec) -> i32;

/// # Safety
/// As libc's `nanosleep`.
#[no_mangle]
pub unsafe extern "C" fn nanosleep(req: *const libc::timespec, rem: *mut libc::timespec) -> i32 {
    // SAFETY: the caller passes what libc's function of this name requires; it gets
    // those pointers unchanged, or pointers to locals of ours.
    unsafe {
        let Some(f) = real::<NanosleepFn>(NANOSLEEP) else {
            return libc::syscall(libc::SYS_nanosleep, req, rem) as i32;
        };
        let mut want = *req;
        loop {
            let mut left = ns_timespec(0);
            let before = handled();
            let r = f(&want, &mut left);
            if r == 0 || !by_checkpoint(errno(), before) {
                if !rem.is_null() {
                    *rem = left;
                }
                return r;
            }
            want = left;
        }
    }
}

/// # Safety
/// As libc's `clock_nanosleep`.
#[no_mangle]
pub unsafe extern "C" fn clock_nanosleep(
    clock: libc::clockid_t,
    flags: i32,
    req: *const libc::timespec,
    rem: *mut libc::timespec,
) -> i32 {
    // SAFETY: the caller passes what libc's function of this name requires; it gets
    // those pointers unchanged, or pointers to locals of ours.
    unsafe {
        let Some(f) = real::<ClockNanosleepFn>(CLOCK_NANOSLEEP) else {
            return match libc::syscall(libc::SYS_clock_nanosleep, clock, flags, req, rem) {
                0 => 0,
                _ => errno(),
            };
        };
        let mut want = *req;
        loop {
            let mut left = ns_timespec(0);
            let before = handled();
            let r = f(clock, flags, &want, &mut left);
            // It returns the error number itself.
            if r == 0 || !by_checkpoint(r, before) {
                if !rem.is_null() && flags & libc::TIMER_ABSTIME == 0 {
                    *rem = left;
                }
                return r;
            }
            if flags & libc::TIMER_ABSTIME == 0 {
                want = left;
            }
        }
    }
}

/// # Safety
/// As libc's `usleep`.
#[no_mangle]
pub unsafe extern "C" fn usleep(us: libc::useconds_t) -> i32 {
    // SAFETY: the caller passes what libc's function of this name requires; it gets
    // those pointers unchanged, or pointers to locals of ours.
    unsafe {
        let t = ns_timespec(us as i128 * 1000);
        nanosleep(&t, std::ptr::null_mut())
    }
}

/// # Safety
/// As libc's `sleep`.
#[no_mangle]
pub unsafe extern "C" fn sleep(secs: u32) -> u32 {
    // SAFETY: the caller passes what libc's function of this name requires; it gets
    // those pointers unchanged, or pointers to locals of ours.
    unsafe {
        let t = ns_timespec(secs as i128 * 1_000_000_000);
        let mut left = ns_timespec(0);
        if nanosleep(&t, &mut left) == 0 {
            return 0;
        }
        // Seconds not slept, rounded up, as libc's.
        (left.tv_sec as u32).saturating_add(u32::from(left.tv_nsec > 0))
    }
}

type PollFn = unsafe extern "C" fn(*mut libc::pollfd, libc::nfds_t, i32) -> i32;

/// # Safety
/// As libc's `poll`.
#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: i32) -> i32 {
    // SAFETY: the caller passes what libc's function of this name requires; it gets
    // those pointers unchanged, or pointers to locals of ours.
    unsafe {
        let Some(f) = real::<PollFn>(POLL) else {
            return libc::syscall(libc::SYS_poll, fds, n, timeout) as i32;
        };
        let deadline = now_ns() + timeout.max(0) as i128 * 1_000_000;
        let mut wait = timeout;
        loop {
            let before = handled();
            let r = f(fds, n, wait);
            if r >= 0 || !by_checkpoint(errno(), before) {
                return r;
            }
            if timeout > 0 {
                wait = left_ms(deadline);
            }
        }
    }
}

type PpollFn = unsafe extern "C" fn(
    *mut libc::pollfd,
    libc::nfds_t,
    *const libc::timespec,
    *const libc::sigset_t,
) -> i32;

/// # Safety
/// As libc's `ppoll`.
#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    timeout: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> i32 {
    // SAFETY: the caller passes what libc's function of this name requires; it gets
    // those pointers unchanged, or pointers to locals of ours.
    unsafe {
        let Some(f) = real::<PpollFn>(PPOLL) else {
            return libc::syscall(libc::SYS_ppoll, fds, n, timeout, mask, 8) as i32;
        };
        let deadline = (!timeout.is_null()).then(|| now_ns() + timespec_ns(&*timeout));
        loop {
            let left = deadline.map(|d| ns_timespec(d - now_ns()));
            let before = handled();
            let r = f(
                fds,
                n,
                left.as_ref().map_or(std::ptr::null(), |l| l as *const _),
                mask,
            );
            if r >= 0 || !by_checkpoint(errno(), before) {
                return r;
            }
        }
    }
}

type SelectFn = unsafe extern "C" fn(
    i32,
    *mut libc::fd_set,
    *mut libc::fd_set,
    *mut libc::fd_set,
    *mut libc::timeval,
) -> i32;

/// # Safety
/// As libc's `select`.
#[no_mangle]
pub unsafe extern "C" fn select(
    n: i32,
    read: *mut libc::fd_set,
    write: *mut libc::fd_set,
    except: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> i32 {
    // SAFETY: the caller passes what libc's function of this name requires; it gets
    // those pointers unchanged, or pointers to locals of ours.
    unsafe {
        let Some(f) = real::<SelectFn>(SELECT) else {
            return libc::syscall(libc::SYS_select, n, read, write, except, timeout) as i32;
        };
        let deadline = (!timeout.is_null()).then(|| {
            now_ns() + (*timeout).tv_sec as i128 * 1_000_000_000 + (*timeout).tv_usec as i128 * 1000
        });
        // The sets as given: a failed call leaves them as they were, but the caller's are the
        // ones to fill once one succeeds.
        let sets = [read, write, except].map(|s| (!s.is_null()).then(|| *s));
        loop {
            let before = handled();
            let r = f(n, read, write, except, timeout);
            if r >= 0 || !by_checkpoint(errno(), before) {
                return r;
            }
            for (s, saved) in [read, write, except].into_iter().zip(&sets) {
                if let Some(saved) = saved {
                    *s = *saved;
                }
            }
            if let Some(d) = deadline {
                let left = (d - now_ns()).max(0);
                (*timeout).tv_sec = (left / 1_000_000_000) as libc::time_t;
                (*timeout).tv_usec = ((left % 1_000_000_000) / 1000) as libc::suseconds_t;
            }
        }
    }
}

type SigtimedwaitFn =
    unsafe extern "C" fn(*const libc::sigset_t, *mut libc::siginfo_t, *const libc::timespec) -> i32;
type SigwaitinfoFn = unsafe extern "C" fn(*const libc::sigset_t, *mut libc::siginfo_t) -> i32;

/// # Safety
/// As libc's `sigtimedwait`.
#[no_mangle]
pub unsafe extern "C" fn sigtimedwait(
    set: *const libc::sigset_t,
    info: *mut libc::siginfo_t,
    timeout: *const libc::timespec,
) -> i32 {
    // SAFETY: the caller passes what libc's function of this name requires; it gets
    // those pointers unchanged, or pointers to locals of ours.
    unsafe {
        let Some(f) = real::<SigtimedwaitFn>(SIGTIMEDWAIT) else {
            return libc::syscall(libc::SYS_rt_sigtimedwait, set, info, timeout, 8) as i32;
        };
        let deadline = (!timeout.is_null()).then(|| now_ns() + timespec_ns(&*timeout));
        loop {
            let left = deadline.map(|d| ns_timespec(d - now_ns()));
            let before = handled();
            let r = f(
                set,
                info,
                left.as_ref().map_or(std::ptr::null(), |l| l as *const _),
            );
            if r >= 0 || !by_checkpoint(errno(), before) {
                return r;
            }
        }
    }
}

/// # Safety
/// As libc's `sigwaitinfo`.
#[no_mangle]
pub unsafe extern "C" fn sigwaitinfo(
    set: *const libc::sigset_t,
    info: *mut libc::siginfo_t,
) -> i32 {
    // SAFETY: the caller passes what libc's function of this name requires; it gets
    // those pointers unchanged, or pointers to locals of ours.
    unsafe {
        let Some(f) = real::<SigwaitinfoFn>(SIGWAITINFO) else {
            return libc::syscall(libc::SYS_rt_sigtimedwait, set, info, 0usize, 8) as i32;
        };
        loop {
            let before = handled();
            let r = f(set, info);
            if r >= 0 || !by_checkpoint(errno(), before) {
                return r;
            }
        }
    }
}
