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
