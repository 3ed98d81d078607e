//! Ranges ickpt must refuse without harm. In a test binary of its own: the hole it makes
//! in a mapping must not be filled by another test thread's mmap while it runs.

mod common;
use common::{scratch_dir, Buf};
use ickpt::{Config, Engine, ProtectError, RangeProblem};

const PS: usize = 4096;

/// Refused as memory that is not all mapped, naming the region.
fn assert_not_mapped(r: Result<(), ProtectError>) {
    assert!(
        matches!(
            r,
            Err(ProtectError::BadRange {
                id: 1,
                problem: RangeProblem::NotMapped,
                ..
            })
        ),
        "{r:?}"
    );
}

#[test]
fn bad_ranges_fail_cleanly_and_leave_memory_writable() {
    let dir = scratch_dir("ranges");
    let e = Engine::open(Config::new(&dir)).unwrap();
    let mut a = Buf::new(2 * PS);
    // A length no machine has: an error, not an abort.
    // SAFETY: the call must fail before touching memory beyond `a`.
    let r = unsafe { e.protect(1, a.ptr, 1 << 52) };
    assert_not_mapped(r);
    // A range with a hole: nothing is left read-only.
    // SAFETY: unmapping the second page of our own mapping; `a` keeps only the first.
    unsafe { ickpt::sys::mem::unmap(a.ptr.add(PS), PS).unwrap() };
    a.len = PS;
    // SAFETY: as above; the call must fail.
    let r = unsafe { e.protect(1, a.ptr, 2 * PS) };
    assert_not_mapped(r);
    a.slice_mut()[10] = 1; // still writable: would die by SIGSEGV otherwise
                           // SAFETY: `a` outlives the engine.
    unsafe { e.protect(1, a.ptr, PS).unwrap() };
}
