//! Another thread's writes placed between two regions' collects, through the checkpoint's
//! test hook (`track::test_pause::after_next_collects`): the way to put a write the version
//! leaves out before, in the writer's order, one it holds.

use super::spin_until;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

static GO: AtomicBool = AtomicBool::new(false);
static DONE: AtomicBool = AtomicBool::new(false);

fn after_collect(id: u64) {
    if id == 1 {
        GO.store(true, SeqCst);
        spin_until("the writer's two writes", || DONE.load(SeqCst));
    }
}

/// Run `take` (a checkpoint of regions 1 and 2, in that order) while, once region 1 is
/// collected, another thread writes 7 at address `first`, then at `second`; the checkpoint
/// goes on once both are written. One caller per test binary at a time.
pub fn writes_after_the_first_collect<T>(
    first: usize,
    second: usize,
    take: impl FnOnce() -> T,
) -> T {
    GO.store(false, SeqCst);
    DONE.store(false, SeqCst);
    std::thread::scope(|s| {
        s.spawn(move || {
            spin_until("region 1 collected", || GO.load(SeqCst));
            // SAFETY: the caller's addresses lie in its tracked buffers, which the
            // checkpoint only reads.
            unsafe {
                std::ptr::write_volatile(first as *mut u8, 7);
                std::ptr::write_volatile(second as *mut u8, 7);
            }
            DONE.store(true, SeqCst);
        });
        ickpt::track::test_pause::after_next_collects(after_collect);
        take()
    })
}

/// Two buffers of `pages` pages holding 1s, tracked by `e` as regions 1 and 2 (collected in
/// that order). The caller drops `e` before them.
pub fn two_regions_of_ones(e: &ickpt::Engine, pages: usize) -> (super::Buf, super::Buf) {
    let mut r1 = super::Buf::new(pages * 4096);
    let mut r2 = super::Buf::new(pages * 4096);
    r1.slice_mut().fill(1);
    r2.slice_mut().fill(1);
    // SAFETY: both buffers outlive the engine (the caller's promise).
    unsafe {
        e.protect(1, r1.ptr, r1.len).unwrap();
        e.protect(2, r2.ptr, r2.len).unwrap();
    }
    (r1, r2)
}
