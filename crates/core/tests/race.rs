//! Writes that race with a checkpoint are never lost: threads keep writing while checkpoints
//! are taken; once they stop, a quiet checkpoint must restore memory exactly. (A handler that
//! marked a page dirty before opening it lost such writes in about half of the runs of the C
//! threads test; this loops enough rounds to catch that reliably.)

mod common;
use common::scratch_dir;
use ickpt::{Config, Engine};
use std::sync::atomic::{AtomicBool, Ordering};

const PS: usize = 4096;
const PAGES: usize = 64;
const THREADS: usize = 3;

#[test]
fn writes_racing_checkpoints_are_never_lost() {
    let rounds: usize = common::env_knob("ICKPT_RACE_ROUNDS", 150);
    let dir = scratch_dir("race");
    let mut c = Config::new(&dir);
    c.keep_chains = 1;
    let e = Engine::open(c).unwrap();
    let base = e.alloc(1, PAGES * PS).unwrap() as usize;
    for round in 0..rounds {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let stop = &stop;
                s.spawn(move || {
                    let mut pass = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        pass += 1;
                        for p in 0..PAGES {
                            let at = base + p * PS + t * 8;
                            // SAFETY: inside the allocated region; each thread owns its bytes.
                            unsafe {
                                std::ptr::write_volatile(at as *mut u32, pass ^ round as u32)
                            };
                        }
                    }
                });
            }
            for _ in 0..3 {
                e.checkpoint().unwrap();
            }
            stop.store(true, Ordering::Relaxed);
        });
        // SAFETY: the region is PAGES*PS bytes; the writers have stopped.
        let mem = unsafe { std::slice::from_raw_parts(base as *const u8, PAGES * PS) };
        let before = mem.to_vec();
        let v = e.checkpoint().unwrap().version;
        e.restore(v).unwrap();
        let bad = (0..PAGES)
            .filter(|p| mem[p * PS..(p + 1) * PS] != before[p * PS..(p + 1) * PS])
            .count();
        assert_eq!(
            bad, 0,
            "round {round}: {bad} pages lost writes that raced with a checkpoint"
        );
    }
}

/// A first write that traps just before its region is unprotected finds the region gone
/// when the handler looks: it must retry the write (the page is open now), not treat it as
/// a genuine segfault and reset the SIGSEGV disposition for the whole process.
#[test]
fn unprotect_racing_first_writes_keeps_tracking_alive() {
    let rounds: usize = common::env_knob("ICKPT_RACE_ROUNDS", 150);
    let dir = scratch_dir("race-unprotect");
    let e = Engine::open(Config::new(&dir)).unwrap();
    for round in 0..rounds {
        let mut buf = common::Buf::new(PAGES * PS);
        let base = buf.ptr as usize;
        // SAFETY: `buf` outlives the region (unprotected below, before it drops).
        unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let stop = &stop;
                s.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        for p in 0..PAGES {
                            // SAFETY: inside `buf`; each thread owns its bytes.
                            unsafe {
                                std::ptr::write_volatile(
                                    (base + p * PS + t * 8) as *mut u32,
                                    round as u32,
                                )
                            };
                        }
                    }
                });
            }
            e.unprotect(1).unwrap();
            stop.store(true, Ordering::Relaxed);
        });
        buf.slice_mut()[0] = 1;
    }
    // Tracking still works: a new region's writes are trapped and checkpointed.
    let mut buf = common::Buf::new(4 * PS);
    // SAFETY: as above.
    unsafe { e.protect(2, buf.ptr, buf.len).unwrap() };
    e.checkpoint().unwrap();
    buf.slice_mut()[PS] = 9;
    assert_eq!(e.checkpoint().unwrap().pages, 1);
}
