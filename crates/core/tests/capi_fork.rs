//! A child forked while another thread is inside an ickpt call can still call `ickpt_init`
//! (docs/abi.md rule 11). Review: the engine sat behind a standard RwLock, which the child
//! inherited held by a thread it does not have; its `ickpt_init` waited forever. Own binary:
//! it forks, and it sets the process's ickpt state through the C API.

mod common;
use common::scratch_dir;
use ickpt::capi::*;
use std::ffi::CString;
use std::time::Duration;

fn init(dir: &std::path::Path, bandwidth: u64) {
    let mut cfg = std::mem::MaybeUninit::<ickpt_config>::uninit();
    let size = std::mem::size_of::<ickpt_config>();
    assert_eq!(
        ickpt_config_init_sized(cfg.as_mut_ptr(), size),
        ickpt_result::ICKPT_OK
    );
    // SAFETY: initialised by ickpt_config_init_sized.
    let mut cfg = unsafe { cfg.assume_init() };
    let d = CString::new(dir.to_str().unwrap()).unwrap();
    cfg.dir = d.as_ptr();
    cfg.mode = ICKPT_MODE_ASYNC;
    cfg.bandwidth = bandwidth;
    assert_eq!(ickpt_init(&cfg), ickpt_result::ICKPT_OK);
}

/// Whether thread `tid` is asleep (state S in /proc): blocked, here, inside ickpt_wait.
fn asleep(tid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|r| r.trim_start().starts_with('S'))
        })
        .unwrap_or(false)
}

#[test]
fn a_child_forked_during_an_ickpt_call_can_start_its_own() {
    let dir = scratch_dir("capi-fork");
    // 4 MiB at 1 MiB/s: the commit takes seconds, and ickpt_wait holds the engine meanwhile.
    init(&dir, 1 << 20);
    let mut p = std::ptr::null_mut();
    assert_eq!(ickpt_malloc(1, 4 << 20, &mut p), ickpt_result::ICKPT_OK);
    // SAFETY: 4 MiB from ickpt_malloc.
    unsafe { p.cast::<u8>().add(12345).write_volatile(0xA5) };
    assert_eq!(
        ickpt_checkpoint(std::ptr::null_mut()),
        ickpt_result::ICKPT_OK
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tx.send(unsafe { libc::gettid() }).unwrap();
        ickpt_wait(std::ptr::null_mut())
    });
    let tid = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    common::spin_until("the waiter blocking in ickpt_wait", || asleep(tid));
    let child_scratch = scratch_dir("capi-fork-child");
    let child_dir = CString::new(child_scratch.to_str().unwrap()).unwrap();
    // SAFETY: the child calls only ickpt_init/finalize and async-signal-safe functions
    // before _exit; alarm turns a hang into a death by SIGALRM.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: alarm and _exit are async-signal-safe.
        unsafe { libc::alarm(20) };
        let mut cfg = std::mem::MaybeUninit::<ickpt_config>::uninit();
        let size = std::mem::size_of::<ickpt_config>();
        let ok = ickpt_config_init_sized(cfg.as_mut_ptr(), size) == ickpt_result::ICKPT_OK && {
            // SAFETY: initialised just above.
            let mut cfg = unsafe { cfg.assume_init() };
            cfg.dir = child_dir.as_ptr();
            ickpt_init(&cfg) == ickpt_result::ICKPT_OK
                && {
                    // abi.md rule 11: memory from the parent's ickpt_malloc stays valid, with
                    // its bytes, and writable in the child once its ickpt_init let the
                    // inherited engine go (review: dropping it unmapped that memory; the
                    // child's new engine then mapped its own memory there, zeroed).
                    let q = p.cast::<u8>();
                    // SAFETY: 4 MiB from ickpt_malloc, inherited through fork.
                    unsafe {
                        let kept = q.add(12345).read_volatile() == 0xA5;
                        q.add(12345).write_volatile(0x5A);
                        kept && q.add(12345).read_volatile() == 0x5A
                    }
                }
                && ickpt_finalize() == ickpt_result::ICKPT_OK
        };
        // SAFETY: ends the child without the parent's test harness.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's ickpt_init failed or hung, or its inherited memory was lost (status {status:#x})"
    );
    assert_eq!(waiter.join().unwrap(), ickpt_result::ICKPT_OK);
    assert_eq!(ickpt_finalize(), ickpt_result::ICKPT_OK);
}
