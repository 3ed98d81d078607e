//! Stage A's signal state: every signal blocked (stage B must not be interrupted, and each
//! thread's own mask comes back from its signal frame), then the program's actions set with
//! the raw system call, whose handler and restorer addresses are the program's, mapped only
//! once stage B has moved memory into place.

use ickpt_process::ProcessRecord;

pub fn block_all() -> Result<(), String> {
    let all: u64 = !0;
    // SAFETY: the kernel reads an 8-byte mask; no old mask is asked for.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &all as *const u64,
            std::ptr::null_mut::<u64>(),
            8usize,
        )
    };
    if rc != 0 {
        return Err(format!(
            "blocking signals: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

pub fn set_actions(record: &ProcessRecord) -> Result<(), String> {
    for (i, a) in record.sigactions.iter().enumerate() {
        let sig = i as i32 + 1;
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        let act: [u64; 4] = [a.handler, a.flags, a.restorer, a.mask];
        // SAFETY: the kernel's struct sigaction layout (handler, flags, restorer, mask); the
        // handler is not called before stage B has put the program's memory back, since every
        // signal is blocked until each thread's own frame restores its mask.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                act.as_ptr(),
                std::ptr::null_mut::<u64>(),
                8usize,
            )
        };
        if rc != 0 {
            return Err(format!(
                "setting the action of signal {sig}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Arm the interval timers again with the time each had left (a timer that fires before the
/// program runs leaves its signal pending, blocked until a thread's own mask lets it in).
pub fn set_itimers(record: &ProcessRecord) -> Result<(), String> {
    let which = [libc::ITIMER_REAL, libc::ITIMER_VIRTUAL, libc::ITIMER_PROF];
    for (w, &(interval, value)) in which.into_iter().zip(&record.itimers) {
        let tv = |us: u64| libc::timeval {
            tv_sec: (us / 1_000_000) as libc::time_t,
            tv_usec: (us % 1_000_000) as libc::suseconds_t,
        };
        let t = libc::itimerval {
            it_interval: tv(interval),
            it_value: tv(value),
        };
        // SAFETY: a valid itimerval; no old value asked for.
        if unsafe { libc::setitimer(w, &t, std::ptr::null_mut()) } != 0 {
            return Err(format!(
                "arming interval timer {w} again: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}
