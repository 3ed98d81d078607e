//! The encoder a commit uses never calls C's malloc: a commit encodes while an application
//! thread may be stopped in a write fault holding malloc's lock. zstd's own context resized
//! its workspace (free, then malloc) after 128 calls with much smaller inputs (a review of
//! the commit path counted 16 mallocs in 400 sparse batches); `ickpt::frame_encoder` places
//! it in a fixed workspace. malloc, calloc, realloc and free are interposed in this test
//! binary and counted while `encode` runs on this thread.

// Unsafe allowed here: the interposed allocator functions forward raw pointers to glibc.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::ffi::c_void;

extern "C" {
    fn __libc_malloc(n: usize) -> *mut c_void;
    fn __libc_calloc(n: usize, m: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, n: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
}

thread_local! {
    /// Counting on this thread, and the calls counted.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static CALLS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    // try_with: a thread being torn down has no locals left; nothing to count there.
    let _ = COUNTING.try_with(|c| {
        if c.get() {
            CALLS.with(|n| n.set(n.get() + 1));
        }
    });
}

/// # Safety
/// C's contract for `malloc`.
#[no_mangle]
pub unsafe extern "C" fn malloc(n: usize) -> *mut c_void {
    count();
    // SAFETY: glibc's own entry point, with the caller's argument.
    unsafe { __libc_malloc(n) }
}
/// # Safety
/// C's contract for `calloc`.
#[no_mangle]
pub unsafe extern "C" fn calloc(n: usize, m: usize) -> *mut c_void {
    count();
    // SAFETY: as above.
    unsafe { __libc_calloc(n, m) }
}
/// # Safety
/// C's contract for `realloc`.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, n: usize) -> *mut c_void {
    count();
    // SAFETY: as above; `p` came from this allocator.
    unsafe { __libc_realloc(p, n) }
}
/// # Safety
/// C's contract for `free`.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if !p.is_null() {
        count();
    }
    // SAFETY: as above.
    unsafe { __libc_free(p) }
}

const PS: usize = 4096;

#[test]
fn encoding_batches_of_every_shape_never_calls_malloc() {
    let page = |seed: usize| -> Vec<u8> {
        (0..PS)
            .map(|i| ((i / 16).wrapping_mul(seed) % 7 + 1) as u8)
            .collect()
    };
    for level in [-7, -1, 1, 3, 9] {
        let mut enc = ickpt::frame_encoder(Some(level), PS).unwrap();
        let batch = 64;
        let mut buf = vec![0u8; batch * PS];
        let mut crcs = vec![0u32; batch];
        let mut calls = 0;
        // Full batches, sparse ones (one-page frames between zero pages), and the two mixed:
        // the pattern that made zstd's own context shrink its workspace, then grow it.
        for round in 0..400usize {
            let full = round % 50 == 49 || round < 20;
            for i in 0..batch {
                let p = if full || i % 2 == 0 {
                    page(i + 3)
                } else {
                    vec![0; PS]
                };
                buf[i * PS..(i + 1) * PS].copy_from_slice(&p);
                crcs[i] = ickpt::format::crc(&p);
            }
            let mut frames = 0usize;
            COUNTING.with(|c| c.set(true));
            CALLS.with(|n| n.set(0));
            let len = buf.len();
            enc.encode(&mut buf, len, PS, &crcs, |_| frames += 1);
            COUNTING.with(|c| c.set(false));
            calls += CALLS.with(Cell::get);
            assert!(frames >= 1);
        }
        assert_eq!(calls, 0, "level {level}: malloc/free called while encoding");
    }
}

#[test]
fn the_counting_sees_an_allocation() {
    // The interposition works: a C allocation on this thread while counting is seen.
    COUNTING.with(|c| c.set(true));
    CALLS.with(|n| n.set(0));
    // SAFETY: a plain allocation, freed at once.
    unsafe { free(malloc(64)) };
    let v: Vec<u8> = Vec::with_capacity(1 << 20);
    drop(v);
    COUNTING.with(|c| c.set(false));
    assert!(CALLS.with(Cell::get) >= 2);
}
