//! The library's own heap: every allocation of ickpt's Rust code in a program under
//! `ickpt run` comes from here, never from the program's malloc.
//!
//! Two reasons. The program's threads are stopped at arbitrary points while ickpt
//! checkpoints, one of them perhaps inside malloc holding its arena lock: ickpt calling malloc
//! then would wait for ever. And the program's heap is what is being checkpointed: ickpt's
//! state must be captured at one instant of its own (`snapshot.rs`), which it can only be if
//! it lives apart. So the heap is dlmalloc over one reservation made at the first allocation;
//! it only grows upwards, and everything ickpt holds lies below `high_water()`.

// SAFETY contract of this file: the reservation is private anonymous memory no one else
// maps; dlmalloc is only ever entered with the spin lock held.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// Address space reserved for the heap (untouched pages cost nothing).
const RESERVE: usize = 4 << 30;

static BASE: AtomicUsize = AtomicUsize::new(0);
static TOP: AtomicUsize = AtomicUsize::new(0);

/// The heap's span so far: (start, end). (0, 0) before the first allocation.
pub fn used() -> (usize, usize) {
    let base = BASE.load(Ordering::Acquire);
    (base, TOP.load(Ordering::Acquire))
}

/// The whole reservation: (start, end).
pub fn reserved() -> (usize, usize) {
    let base = BASE.load(Ordering::Acquire);
    (base, if base == 0 { 0 } else { base + RESERVE })
}

/// Freed blocks this large give their whole pages back to the kernel: a page no longer
/// backed is one the snapshot of ickpt's state neither compares nor copies
/// (`snapshot.rs`), where a freed page keeps its stale bytes and costs the snapshot as
/// much as a live one. The checkpoint's own large buffers (page lists, bitmaps, the
/// pre-copy's slots) are freed and made again each time; at 4 GiB tracked they left some
/// 45 MB of the heap present, 13 MB of it changed at every capture.
const RELEASE_FREED: usize = 64 << 10;

/// Bytes at each end of a freed block that dlmalloc may still use: the free chunk's links at
/// its start (a tree chunk's are 48 bytes after the user pointer at most) and the next
/// chunk's footer at its end.
const FREE_CHUNK_EDGE: usize = 64;

/// Give back the whole pages inside the freed block `ptr..ptr + len`, but for its edges.
fn release(ptr: usize, len: usize) {
    let lo = (ptr + FREE_CHUNK_EDGE).next_multiple_of(4096);
    let hi = (ptr + len - FREE_CHUNK_EDGE) / 4096 * 4096;
    if lo < hi {
        // SAFETY: whole pages of a block just freed to dlmalloc, which keeps nothing inside
        // it past its edges; they read as zeros from now on, as fresh pages do.
        unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_DONTNEED) };
    }
}

struct Pages;

// SAFETY: hands out disjoint, zeroed, page-aligned parts of a reservation only this type
// uses; never frees, which dlmalloc accepts (`free` returns false).
unsafe impl dlmalloc::Allocator for Pages {
    fn alloc(&self, size: usize) -> (*mut u8, usize, u32) {
        let mut base = BASE.load(Ordering::Acquire);
        if base == 0 {
            // SAFETY: a fresh private anonymous mapping aliases no existing memory.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    RESERVE,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return (std::ptr::null_mut(), 0, 0);
            }
            base = p as usize;
            BASE.store(base, Ordering::Release);
            TOP.store(base, Ordering::Release);
        }
        let top = TOP.load(Ordering::Acquire);
        let size = size.next_multiple_of(4096);
        if top + size > base + RESERVE {
            return (std::ptr::null_mut(), 0, 0);
        }
        TOP.store(top + size, Ordering::Release);
        (top as *mut u8, size, 0)
    }

    fn remap(&self, _ptr: *mut u8, _old: usize, _new: usize, _can_move: bool) -> *mut u8 {
        std::ptr::null_mut()
    }

    fn free_part(&self, _ptr: *mut u8, _old: usize, _new: usize) -> bool {
        false
    }

    fn free(&self, _ptr: *mut u8, _size: usize) -> bool {
        false
    }

    fn can_release_part(&self, _flags: u32) -> bool {
        false
    }

    fn allocates_zeros(&self) -> bool {
        true
    }

    fn page_size(&self) -> usize {
        4096
    }
}

/// dlmalloc behind a spin lock: no futex a stopped thread could hold, and nothing that
/// allocates to take it. The lock word holds its holder's thread id, so that the checkpoint
/// signal's handler can tell that the thread it interrupted holds it, and leave the thread
/// to stop when it lets go (`park.rs`); otherwise the checkpointing thread, which allocates,
/// would wait for ever for a lock held by a stopped thread.
pub struct Arena {
    lock: AtomicU32,
    heap: std::cell::UnsafeCell<dlmalloc::Dlmalloc<Pages>>,
}

// SAFETY: the heap is only reached with `lock` held.
unsafe impl Sync for Arena {}

impl Arena {
    pub const fn new() -> Arena {
        Arena {
            lock: AtomicU32::new(0),
            heap: std::cell::UnsafeCell::new(dlmalloc::Dlmalloc::new_with_allocator(Pages)),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut dlmalloc::Dlmalloc<Pages>) -> R) -> R {
        let me = crate::park::gettid();
        while self
            .lock
            .compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        // SAFETY: the lock is held, so this is the only reference to the heap.
        let r = f(unsafe { &mut *self.heap.get() });
        self.lock.store(0, Ordering::Release);
        crate::park::stop_if_deferred(me);
        r
    }

    /// Whether thread `tid` holds the lock.
    pub fn held_by(&self, tid: u32) -> bool {
        self.lock.load(Ordering::Acquire) == tid
    }
}

impl Default for Arena {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: dlmalloc's malloc/free/realloc contract is GlobalAlloc's; every call holds the lock.
unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        self.with(|h| unsafe { h.malloc(layout.size(), layout.align()) })
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        self.with(|h| unsafe { h.calloc(layout.size(), layout.align()) })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.with(|h| {
            // SAFETY: `ptr` came from this allocator with `layout` (the caller's promise).
            unsafe { h.free(ptr, layout.size(), layout.align()) };
            // Under the lock: no allocation can hand these bytes out again before they are
            // released.
            if layout.size() >= RELEASE_FREED {
                release(ptr as usize, layout.size());
            }
        })
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc`, and `new_size` is the caller's promise.
        self.with(|h| unsafe { h.realloc(ptr, layout.size(), layout.align(), new_size) })
    }
}
