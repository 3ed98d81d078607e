//! Dropping an engine (ickpt_finalize) while a fault handler is still leaving its epoch:
//! `first_write` leaves its epochs after its registry lookups, and the engine used to wait
//! only for the registry before freeing the epoch, so the handler's last atomic landed on
//! unmapped memory (a fault inside the SIGSEGV handler kills the process) or on whatever was
//! mapped there next. A handler is held at that point with a test hook. A separate binary: the
//! hook pauses the first fault of the whole process.

mod common;
use common::{scratch_dir, Buf};
use ickpt::track::test_pause;
use ickpt::{Config, Engine};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

const PS: usize = 4096;

#[test]
fn the_engine_waits_for_a_handler_leaving_its_epoch() {
    // A hang is a failure, not a stuck test run.
    let _watchdog = common::watchdog("finalize", 120);
    let buf = Arc::new(Buf::new(4 * PS));
    // Page 0 is held by another engine: with a userfaultfd backend, the engine under test
    // cannot register it (EBUSY) and tracks its region by page protection, whose faults reach
    // the first-write path as signals on every backend (uffd-async would take them in the
    // kernel otherwise).
    let d0 = scratch_dir("finalize-other");
    let holder = Engine::open(Config::new(&d0)).unwrap();
    // SAFETY: `buf` outlives both engines.
    unsafe { holder.protect(1, buf.ptr, 100).unwrap() };
    let d1 = scratch_dir("finalize");
    let e = Engine::open(Config::new(&d1)).unwrap();
    // SAFETY: as above.
    unsafe { e.protect(1, buf.ptr.add(200), 3 * PS).unwrap() };
    assert_eq!(e.stats().regions_by_protection, 1);
    e.checkpoint().unwrap();

    test_pause::arm();
    let writer = {
        let buf = buf.clone();
        // Not scoped: on the old code the handler stays paused for good.
        std::thread::spawn(move || {
            // SAFETY: page 2 of `buf`, in the region only `e` tracks.
            unsafe { buf.ptr.add(2 * PS).write_volatile(7) };
        })
    };
    common::spin_until(
        "the writer's fault reaching the paused handler",
        test_pause::paused,
    );
    let dropped = Arc::new(AtomicBool::new(false));
    let dropper = {
        let dropped = dropped.clone();
        std::thread::spawn(move || {
            drop(e);
            dropped.store(true, SeqCst);
        })
    };
    // The drop either waits for the paused handler, or (the bug) returns under it.
    common::spin_until("the drop waiting for the handler, or returning", || {
        test_pause::draining() || dropped.load(SeqCst)
    });
    assert!(
        !dropped.load(SeqCst),
        "the engine was dropped (its epoch freed) while a fault handler was inside the epoch"
    );
    test_pause::release();
    writer.join().unwrap();
    dropper.join().unwrap();
    // The write went through once the region was gone.
    // SAFETY: inside `buf`.
    assert_eq!(unsafe { buf.ptr.add(2 * PS).read_volatile() }, 7);
    drop(holder);
    let _ = std::fs::remove_dir_all(&d0);
    let _ = std::fs::remove_dir_all(&d1);
}
