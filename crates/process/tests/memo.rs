//! What a capture takes from the one before (`capture::Memo`). A binary of its own: the test
//! moves the program break, which another test's allocations could move too.

use ickpt_process::capture::{process_base, process_base_with, Memo};

/// The mm fields but `brk` are taken from the capture before; `brk` is read anew.
#[test]
fn the_break_is_read_anew_and_the_rest_kept() {
    let mut memo = Memo::default();
    let first = process_base_with(&mut memo).unwrap();
    assert_eq!(first.mm, process_base().unwrap().mm);
    // SAFETY: moves the break up a page and back, as malloc itself does.
    let before = unsafe { libc::sbrk(4096) } as u64;
    let moved = process_base_with(&mut memo).unwrap();
    // SAFETY: gives back the page taken above.
    unsafe { libc::sbrk(-4096) };
    assert_eq!(moved.mm[5], before + 4096, "{:x?}", moved.mm);
    let mut expected = first.mm;
    expected[5] = before + 4096;
    assert_eq!(moved.mm, expected);
    assert_eq!(process_base_with(&mut memo).unwrap().mm, first.mm);
    assert_eq!((moved.kernel, moved.auxv), (first.kernel, first.auxv));
}
