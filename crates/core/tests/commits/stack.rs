//! Protected memory on the calling thread's own stack. Its page also holds the frames of
//! the calls the thread makes, ickpt's included: when checkpoint or restore protected it
//! again while their own frames sat on it, the next write trapped with the stack pointer on
//! the protected page, the kernel could not write the signal frame, and the process died by
//! SIGSEGV (mprotect, uffd-async). A separate test binary, since a death takes every test
//! in the process with it.

use crate::common;
use common::{scratch_dir, Scratch};
use ickpt::{Config, Engine};
use std::hint::black_box;

/// State as an iterative code keeps it, on the stack of the function that loops.
#[derive(Clone, Copy, PartialEq, Debug)]
#[repr(C)]
struct State {
    iter: u64,
    acc: [u64; 5],
}

/// One checkpoint/restore cycle with `st` on this frame. Called below `pad` bytes of padding
/// so that, over the calls, `st` sits at every offset within its page: at some of them the
/// frames of ickpt's calls share its page.
#[inline(never)]
fn cycle(e: &Engine, id: u64) {
    let mut st = State {
        iter: 0,
        acc: [0; 5],
    };
    // SAFETY: `st` lives until this frame returns, and is unprotected before that.
    unsafe {
        e.protect(id, std::ptr::addr_of_mut!(st).cast(), size_of::<State>())
            .unwrap()
    };
    let mut kept = None;
    for _ in 0..6 {
        let s = black_box(&mut st);
        s.iter += 1;
        s.acc[(s.iter % 5) as usize] = s.acc[((s.iter + 1) % 5) as usize] * 3 + s.iter;
        let v = e.checkpoint().unwrap();
        if s.iter == 3 {
            kept = Some((v.version, *s));
        }
    }
    let (v, want) = kept.unwrap();
    e.restore(v).unwrap();
    assert_eq!(black_box(&st), &want, "restored version {v}");
    // Writes after the restore are tracked (the page was protected again) and checkpointed.
    black_box(&mut st).iter = 100;
    let v = e.checkpoint().unwrap().version;
    black_box(&mut st).iter = 0;
    e.restore(v).unwrap();
    assert_eq!(black_box(&st).iter, 100);
    e.unprotect(id).unwrap();
}

#[inline(never)]
fn padded(e: &Engine, id: u64, pad: usize) {
    if pad == 0 {
        return cycle(e, id);
    }
    let filler = black_box([0u8; 256]);
    padded(e, id, pad - 1);
    black_box(filler);
}

fn engine(name: &str) -> (Engine, Scratch) {
    let dir = scratch_dir(name);
    let mut c = Config::new(&dir);
    c.full_every = 4;
    (Engine::open(c).unwrap(), dir)
}

/// The calling thread's alternate signal stack, if any.
fn signal_stack() -> Option<(usize, usize)> {
    // SAFETY: a zeroed stack_t is a valid out-value; a NULL new stack only queries.
    let mut ss: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    assert_eq!(unsafe { libc::sigaltstack(std::ptr::null(), &mut ss) }, 0);
    (ss.ss_flags & libc::SS_DISABLE == 0).then_some((ss.ss_sp as usize, ss.ss_size))
}

/// Run `f` on a new thread without an alternate signal stack, as a thread a C program starts
/// has none (Rust's runtime gives each of its threads one, for its stack overflow message).
fn on_a_thread_without_signal_stack(f: impl FnOnce() + Send) {
    std::thread::scope(|s| {
        s.spawn(|| {
            let off = libc::stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: disabling the calling thread's alternate stack; nothing runs on it.
            assert_eq!(unsafe { libc::sigaltstack(&off, std::ptr::null_mut()) }, 0);
            assert_eq!(signal_stack(), None);
            f()
        });
    });
}

#[test]
fn memory_on_the_calling_threads_stack_checkpoints_and_restores() {
    on_a_thread_without_signal_stack(|| {
        let (e, dir) = engine("stack-own");
        for pad in 0..20 {
            padded(&e, 1 + pad as u64, pad);
        }
        assert!(signal_stack().is_some(), "ickpt gave the thread one");
        drop(e);
        let _ = std::fs::remove_dir_all(&dir);
    });
}

#[test]
fn a_threads_own_signal_stack_is_kept() {
    let (e, dir) = engine("stack-kept");
    let before = signal_stack();
    assert!(before.is_some(), "Rust's runtime gives its threads one");
    padded(&e, 1, 3);
    assert_eq!(signal_stack(), before);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn threads_protecting_their_own_stack_come_and_go() {
    // Each thread gets an alternate signal stack when it protects its stack and releases it
    // when it exits; the next threads (often on the same, reused stacks) start afresh. Each
    // has an engine of its own: a restore puts back every region of its engine.
    for round in 0..4usize {
        std::thread::scope(|s| {
            for t in 0..2usize {
                s.spawn(move || {
                    on_a_thread_without_signal_stack(|| {
                        let (e, dir) = engine("stack-threads");
                        padded(&e, 1, (round * 3 + t * 7) % 17);
                        drop(e);
                        let _ = std::fs::remove_dir_all(&dir);
                    })
                });
            }
        });
    }
}

#[test]
fn a_range_over_the_threads_signal_stack_is_refused() {
    // The handler runs there: protecting it would leave the handler nowhere to run.
    let (e, dir) = engine("stack-refused");
    let (sp, len) = signal_stack().expect("Rust's runtime gives its threads one");
    // SAFETY: refused before any byte is protected.
    let r = unsafe { e.protect(1, sp as *mut u8, len) };
    let msg = r.expect_err("refused").to_string();
    assert!(msg.contains("alternate signal stack"), "{msg}");
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}
