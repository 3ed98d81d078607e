//! The checkpointing thread's own heap inside a tracked region (an application protects a
//! malloc'd buffer that shares pages with the allocator's other chunks). A global allocator
//! places every allocation the test thread makes during `checkpoint()` page-aligned in the
//! last pages of the tracked region, so the thread writes tracked pages while it schedules.
//! Writes made after `checkpoint()` returned must still never reach its version (found in
//! review: uffd-async's fence stayed down on such a page). A binary of its own: it replaces
//! the global allocator.

use crate::common;
use common::{scratch_dir, Buf};
use ickpt::{Config, Engine};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

const PS: usize = 4096;
const PAGES: usize = 512;
const ZONE_PAGES: usize = 64;

static NEXT: AtomicUsize = AtomicUsize::new(0);
static START: AtomicUsize = AtomicUsize::new(0);
static END: AtomicUsize = AtomicUsize::new(0);
static LOG: [AtomicUsize; 256] = [const { AtomicUsize::new(0) }; 256];
static LOG_SIZE: [AtomicUsize; 256] = [const { AtomicUsize::new(0) }; 256];
static NLOG: AtomicUsize = AtomicUsize::new(0);
/// The zone is one for the binary: its tests run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
thread_local! { static ON: Cell<bool> = const { Cell::new(false) }; }

struct Redirect;

// SAFETY: every block handed out is either System's or a fresh, page-aligned, never reused
// piece of the zone, large enough for its layout.
unsafe impl GlobalAlloc for Redirect {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if ON.with(|c| c.get()) && l.align() <= PS {
            let n = l.size().max(1).next_multiple_of(PS);
            let p = NEXT.fetch_add(n, SeqCst);
            if p + n <= END.load(SeqCst) {
                let i = NLOG.fetch_add(1, SeqCst);
                if i < 256 {
                    LOG[i].store(p, SeqCst);
                    LOG_SIZE[i].store(l.size(), SeqCst);
                }
                return p as *mut u8;
            }
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        let a = p as usize;
        if a >= START.load(SeqCst) && a < END.load(SeqCst) {
            return;
        }
        // SAFETY: not from the zone, so from System with this layout.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Redirect = Redirect;

#[test]
fn writes_after_checkpoint_stay_out_of_its_version_when_its_heap_is_tracked() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch_dir("owner-heap");
    let mut c = Config::new(&dir);
    c.mode = ickpt::format::CommitMode::Async;
    c.bandwidth = Some(2 << 20);
    c.flush_order = ickpt::format::FlushOrder::Address;
    let e = Engine::open(c).unwrap();
    let mut buf = Buf::new(PAGES * PS);
    let zone = buf.ptr as usize + (PAGES - ZONE_PAGES) * PS;
    START.store(zone, SeqCst);
    END.store(zone + ZONE_PAGES * PS, SeqCst);
    NEXT.store(zone, SeqCst);
    NLOG.store(0, SeqCst);
    // SAFETY: `buf` outlives the engine (it is leaked below).
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    buf.slice_mut().fill(1);
    e.checkpoint().unwrap();
    e.wait().unwrap();
    buf.slice_mut().fill(2);
    ON.with(|c| c.set(true));
    let v = e.checkpoint().unwrap().version;
    ON.with(|c| c.set(false));
    // After the checkpoint returned: mark the unused tail of each small zone allocation's page.
    let n = NLOG.load(SeqCst).min(256);
    let mut marked = vec![];
    for i in 0..n {
        let (p, s) = (LOG[i].load(SeqCst), LOG_SIZE[i].load(SeqCst));
        if s <= 3000 {
            // SAFETY: the tail of a zone page inside `buf`, unused by its allocation.
            unsafe { ((p + 3072) as *mut u64).write_volatile(0xdead_beef_dead_beef) };
            marked.push(p);
        }
    }
    assert!(
        !marked.is_empty(),
        "checkpoint() allocated nothing small: nothing checked"
    );
    e.wait().unwrap();
    e.restore(v).unwrap();
    let leaked: Vec<usize> = marked
        .iter()
        // SAFETY: inside `buf`.
        .filter(|&&p| unsafe { ((p + 3072) as *const [u8; 8]).read_volatile() } != [2u8; 8])
        .map(|&p| (p - buf.ptr as usize) / PS)
        .collect();
    assert!(
        leaked.is_empty(),
        "{:?}: writes made after checkpoint() returned are in version {v}: pages {leaked:?}",
        e.backend()
    );
    drop(e);
    // Zone allocations may still be referenced by freed-but-unreturned blocks: keep it mapped.
    std::mem::forget(buf);
}

/// The commit's staging buffer, where pages are copied before they are checksummed, must
/// never be on the heap: there it may share a page with protected heap memory, and copying
/// that very page into it wrote a page the commit had FLUSHING, which aborted the version
/// ("a thread ickpt needed to commit it wrote to a protected page it could not copy").
/// tests/c/stack_counter.c failed so in 16-25% of runs when its store path moved the heap
/// (CI's clone). Here the engine's first commit allocates the buffer in a zone that the
/// application then protects; the next commit, sync and without copy-on-write room, copies
/// every page of the zone through the buffer.
#[test]
fn the_commit_never_stages_pages_in_the_heap() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch_dir("owner-heap-staging");
    let mut c = Config::new(&dir);
    c.cow_bytes = 0;
    c.full_every = 1;
    let e = Engine::open(c).unwrap();
    let small = Buf::new(PS);
    let mut buf = Buf::new(PAGES * PS);
    // SAFETY: `small` outlives the engine (leaked below).
    unsafe { e.protect(1, small.ptr, small.len).unwrap() };
    let zone = buf.ptr as usize + PAGES / 2 * PS;
    // Only the thread that checkpoints allocates from the zone, and only inside checkpoint.
    std::thread::scope(|s| {
        s.spawn(|| {
            START.store(zone, SeqCst);
            END.store(zone + PAGES / 2 * PS, SeqCst);
            NEXT.store(zone, SeqCst);
            NLOG.store(0, SeqCst);
            ON.with(|c| c.set(true));
            let first = e.checkpoint();
            ON.with(|c| c.set(false));
            first.unwrap();
        });
    });
    assert!(
        NEXT.load(SeqCst) > zone,
        "the first checkpoint allocated nothing: nothing checked"
    );
    // SAFETY: `buf` outlives the engine (leaked below).
    unsafe { e.protect(2, buf.ptr, buf.len).unwrap() };
    buf.slice_mut().fill(3);
    let info = e.checkpoint().expect("the version commits");
    assert_eq!(info.pages, PAGES as u64 + 1);
    let want = buf.slice().to_vec();
    buf.slice_mut().fill(0);
    e.restore(info.version).unwrap();
    assert!(buf.slice() == &want[..]);
    drop(e);
    std::mem::forget(buf);
    std::mem::forget(small);
}
