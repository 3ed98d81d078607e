//! Coarse-grained monitoring (ACCK): a piece whose first 10% of pages is more than
//! 80% written is released with the pieces after it, at the pace 1, 2, 4 … 2^(n−3); released
//! pages are stored whole; every piece is monitored again after a checkpoint; released
//! 2 MiB-aligned spans become huge pages and go back to 4 KiB tracking after the checkpoint.
//! With uffd-async no first write reaches ickpt, so nothing is released and versions hold
//! exactly the pages written.

use crate::common;
use common::{scratch_dir, Buf, Scratch};
use ickpt::{Backend, Config, Engine, Granularity};

const PS: usize = 4096;

fn adaptive(name: &str, n: u32) -> (Engine, Scratch) {
    let dir = scratch_dir(name);
    let mut c = Config::new(&dir);
    c.full_every = 1000;
    c.granularity = Granularity::Adaptive;
    c.acck_pieces_log2 = n;
    (Engine::open(c).unwrap(), dir)
}

fn write(buf: &Buf, page: usize, v: u8) {
    // SAFETY: callers pass pages inside `buf`.
    unsafe { buf.ptr.add(page * PS + 9).write_volatile(v) };
}

#[test]
fn hot_pieces_are_released_at_the_paper_pace() {
    let (e, dir) = adaptive("acck-pace", 6);
    // 64 pieces of 16 pages; a piece's head is its first 2 pages.
    let buf = Buf::new(1024 * PS);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    e.checkpoint().unwrap();
    let sees_faults = e.backend() != Backend::UffdAsync;
    let f0 = e.stats().faults;
    // Heads of pieces 1, 2, 4, 8 and 16: each release starts where the last one ended, at
    // the pace 1, 2, 4, 8 pieces, then 1 again.
    for start in [16usize, 32, 64, 128, 256] {
        write(&buf, start, 1);
        write(&buf, start + 1, 1);
    }
    // Inside what was released: no trap.
    for p in (18..272).filter(|p| !matches!(p, 32 | 33 | 64 | 65 | 128 | 129 | 256 | 257)) {
        write(&buf, p, 2);
    }
    let v = e.checkpoint().unwrap();
    let st = e.stats();
    if sees_faults {
        assert_eq!(st.faults - f0, 10, "only the heads trapped");
        assert_eq!(st.acck_released_pages, 256 - 10);
    } else {
        assert_eq!(st.acck_released_pages, 0);
    }
    // Pieces 1..=16 (pages 16..272) were released whole, and also all written.
    assert_eq!(v.pages, 256);
    // A new epoch monitors every piece again: a write outside a head is one page.
    write(&buf, 20, 3);
    let f1 = e.stats().faults;
    assert_eq!(e.checkpoint().unwrap().pages, 1);
    if sees_faults {
        assert_eq!(
            e.stats().faults - f1,
            0,
            "counted at the write, before the checkpoint"
        );
    }
    let want = buf.slice().to_vec();
    // SAFETY: inside `buf`.
    unsafe { std::ptr::write_bytes(buf.ptr, 0, buf.len) };
    e.restore(e.latest().unwrap().unwrap()).unwrap();
    assert!(buf.slice() == &want[..]);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn scattered_writes_release_nothing() {
    let (e, dir) = adaptive("acck-scattered", 6);
    let buf = Buf::new(1024 * PS);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    e.checkpoint().unwrap();
    // One page in the middle of every other piece: never a head.
    let pages: Vec<usize> = (0..64).step_by(2).map(|i| i * 16 + 7).collect();
    for &p in &pages {
        write(&buf, p, 5);
    }
    assert_eq!(e.checkpoint().unwrap().pages, pages.len() as u64);
    assert_eq!(e.stats().acck_released_pages, 0);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether `addr..addr+len` is backed by a huge page, per PAGEMAP_SCAN.
fn is_huge(addr: usize, len: usize) -> bool {
    const PAGE_IS_HUGE: u64 = 1 << 6;
    let pm = ickpt::sys::pagemap::Pagemap::open().unwrap();
    let regions = pm.categories(addr, addr + len, PAGE_IS_HUGE).unwrap();
    regions.iter().any(|r| {
        r.categories & PAGE_IS_HUGE != 0 && r.start as usize <= addr && r.end as usize >= addr + len
    })
}

#[test]
fn released_spans_become_huge_pages_and_split_back_after_the_checkpoint() {
    let (e, dir) = adaptive("acck-huge", 2);
    // 8 MiB, 2 MiB-aligned: 4 pieces of one huge page each.
    let raw = Buf::new(10 << 20);
    let base = (raw.ptr as usize).next_multiple_of(2 << 20);
    let len = 8 << 20;
    // Populated, as an application's arrays are after their first sweep (userfaultfd-
    // registered memory collapses only when no page of the span is missing).
    // SAFETY: inside `raw`.
    unsafe { std::ptr::write_bytes(base as *mut u8, 1, len) };
    // SAFETY: inside `raw`, which outlives the engine.
    unsafe { e.protect(1, base as *mut u8, len).unwrap() };
    e.checkpoint().unwrap();
    let w = |page: usize, v: u8| {
        // SAFETY: inside the region.
        unsafe { ((base + page * PS + 3) as *mut u8).write_volatile(v) }
    };
    // Piece 1 is pages 512..1024; its head is 52 pages; 41 written is not yet "more than 80%".
    for p in 512..553 {
        w(p, 1);
    }
    let released_before = e.stats().acck_released_pages;
    w(553, 1);
    let st = e.stats();
    if e.backend() == Backend::UffdAsync {
        assert_eq!(st.acck_released_pages, 0);
        assert_eq!(e.checkpoint().unwrap().pages, 42);
        drop(e);
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    assert_eq!(released_before, 0, "41 of 52 head pages is not hot yet");
    assert_eq!(
        st.acck_released_pages,
        512 - 42,
        "piece 1 released once hot"
    );
    // Where the kernel has transparent huge pages, piece 1 is one now.
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| !s.contains("[never]"));
    e.wait_huge_pages();
    if thp {
        assert_eq!(e.stats().acck_huge_spans, 1);
        assert!(is_huge(base + (2 << 20), 2 << 20));
    }
    for p in 554..1024 {
        w(p, 2);
    }
    assert_eq!(
        e.stats().faults - st.faults,
        0,
        "no trap in a released piece"
    );
    assert_eq!(e.checkpoint().unwrap().pages, 512);
    // Back to 4 KiB tracking: one write, one page.
    let f = e.stats().faults;
    w(700, 3);
    assert_eq!(e.stats().faults - f, 1);
    assert!(
        !is_huge(base + (2 << 20), 2 << 20),
        "split back at the first write"
    );
    assert_eq!(e.checkpoint().unwrap().pages, 1);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}
