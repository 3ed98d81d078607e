//! Write tracking by userfaultfd write-protect with a handler thread. A first write blocks
//! the writer in the kernel and arrives as an event; the handler thread decides for it
//! (AI-Ckpt Algorithm 2, on the writer's behalf), clears the page's protection and so wakes
//! the writer. Faults inside system calls arrive the same way, so read(2), recv(2) or pread(2)
//! into tracked memory just work, where mprotect makes them fail with EFAULT.
//!
//! The handler never sleeps with a fault in hand: a write that must wait (the gate is closed,
//! or its page is not taken yet) is parked and tried again, so one waiting writer holds up
//! nobody else's fault. A sleeping handler costs the writer a wake-up per fault (tens of
//! microseconds on a VM), so the handler spins while a commit runs and for a short while
//! after each fault (a sweep's next fault comes within microseconds), and sleeps in poll(2)
//! otherwise. `ICKPT_UFFD_SPIN` = never | commit | burst (default) | always chooses, for
//! measuring the difference (docs/benchmarks.md).

// Unsafe allowed here (lib.rs fences it): the handler thread's event buffer lives in ickpt's own
// memory.
#![allow(unsafe_code)]

use crate::sys::pagemap::Pagemap;
use crate::sys::userfault::{wait_readable, UffdMsg, Userfault, Wakeup, WriteFault};
use crate::sys::{page_size, thread};
use crate::track::backends::uffd_shared::{Scanner, UffdRegions};
use crate::track::memory::bitmap;
use crate::track::memory::own_mem::{OwnArray, OwnBytes, OwnSlice};
use crate::track::protocol::first_write::{self, Catch, Outcome};
use crate::track::protocol::{Protocol, WaitTicket};
use crate::track::region::TrackedRegion;
use crate::track::{Backend, Guard, TrackError, Tracker};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

/// When the handler thread polls instead of sleeping (`ICKPT_UFFD_SPIN`, for measuring the
/// difference, docs/benchmarks.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UffdSpin {
    Never,
    /// While a commit runs.
    Commit,
    /// While a commit runs, and for a short burst after each fault (the default).
    Burst,
    Always,
}

/// Faults the handler can hold at once: at most one per application thread is outstanding.
const PARKED: usize = 4096;
/// Events read per read(2).
const BATCH: usize = 64;
/// Pagemap entries read at once where PAGEMAP_SCAN is missing: 512 pages' worth.
const PAGEMAP_ENTRIES_BYTES: usize = 4096;

/// How long the handler keeps polling after a fault: several first writes' worth of a sweep.
const BURST_NS: u64 = 50_000;

/// A write fault the handler could not finish yet.
#[derive(Clone, Copy)]
struct Parked {
    fault: WriteFault,
    /// Counted as waiting in this tracker's protocol (see `Protocol::begin_wait`).
    ticket: Option<WaitTicket>,
}

struct Shared {
    regions: UffdRegions,
    stop: Wakeup,
    /// Drains asked for by checkpoints (see `before_collect`), and drains done.
    drain: Wakeup,
    drains_asked: AtomicU64,
    /// What the handler thread writes, in a mapping of ickpt's own that no region may
    /// cover: a write of the handler's own to a tracked page would wait for itself. The heap
    /// `Shared` lives in may share a page with a tracked heap buffer (README's example
    /// protects a `calloc`'d grid). Word [`STARTED`]: set once the thread runs its own code;
    /// word [`DRAINS_DONE`]: drains done.
    handler_words: OwnSlice<AtomicU64>,
    /// Whether a page is still write-protected (a queued event may be stale).
    pagemap: Pagemap,
    stopping: AtomicBool,
    spin: UffdSpin,
    /// The protocol of the engine this tracker serves (set by the first attach).
    protocol: OnceLock<Arc<Protocol>>,
}

/// `Shared::handler_words`: set by the handler thread once it runs its own code (starting a
/// thread writes the heap: the runtime frees its start-up record, and a heap page may be
/// tracked once `new` returns). A barrier did this until a review found its hang: the
/// handler thread, woken late from `Barrier::wait` on a loaded machine, locked the barrier's
/// mutex on the heap after `new` had returned and a region sharing that page was protected,
/// and waited for itself (README's example, restarted on the uffd backend under load).
const STARTED: usize = 0;
/// `Shared::handler_words`: the drains the handler thread has done.
const DRAINS_DONE: usize = 1;

impl Shared {
    fn uffd(&self) -> &Userfault {
        &self.regions.uffd
    }
}

pub struct UffdTracker {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Buffers the handler thread and the kernel write, kept out of tracked memory.
    own: Vec<(usize, usize)>,
    /// Finds pages written without a fault (see `collect`).
    unfaulted: Unfaulted,
}

/// How `collect` finds pages written without a fault (discarded, then written again).
enum Unfaulted {
    /// PAGEMAP_SCAN (Linux 6.7+).
    Scan(Scanner),
    /// Before it: the pagemap's entries, read into a mapping of ickpt's own (the reading
    /// thread's heap or stack may be tracked).
    Entries(Mutex<OwnBytes>),
}

impl Unfaulted {
    /// The memory the kernel writes for it, kept out of tracked memory.
    fn span(&self) -> (usize, usize) {
        match self {
            Unfaulted::Scan(s) => s.span(),
            Unfaulted::Entries(b) => b.lock().unwrap_or_else(|e| e.into_inner()).span(),
        }
    }
}

impl UffdTracker {
    pub(crate) fn new(spin: UffdSpin, pagemap_scan: bool) -> Result<Self, TrackError> {
        let uffd = Userfault::for_events().map_err(TrackError::Userfault)?;
        let shared = Arc::new(Shared {
            regions: UffdRegions::new(uffd, Backend::Uffd)?,
            stop: Wakeup::new().map_err(TrackError::Userfault)?,
            drain: Wakeup::new().map_err(TrackError::Userfault)?,
            drains_asked: AtomicU64::new(0),
            handler_words: OwnSlice::new(2).map_err(TrackError::OwnAlloc)?,
            pagemap: Pagemap::open().map_err(TrackError::Userfault)?,
            stopping: AtomicBool::new(false),
            spin,
            protocol: OnceLock::new(),
        });
        let msgs = OwnArray::<UffdMsg>::new(BATCH).map_err(TrackError::OwnAlloc)?;
        let parked = OwnArray::<Parked>::new(PARKED).map_err(TrackError::OwnAlloc)?;
        let unfaulted = if pagemap_scan {
            Unfaulted::Scan(Scanner::new()?)
        } else {
            Unfaulted::Entries(Mutex::new(
                OwnBytes::scratch(PAGEMAP_ENTRIES_BYTES).map_err(TrackError::OwnAlloc)?,
            ))
        };
        let own = vec![
            msgs.span(),
            parked.span(),
            unfaulted.span(),
            shared.handler_words.span(),
        ];
        let sh = shared.clone();
        let handle = std::thread::Builder::new()
            .name("ickpt-uffd".into())
            .spawn(move || handle_faults(&sh, msgs, parked))
            .map_err(TrackError::Userfault)?;
        // A write of its own to a tracked page would wait for itself: let it get past the
        // runtime's start-up writes before any region can be protected. It runs: a spawned
        // thread is soon scheduled.
        while shared.handler_words[STARTED].load(SeqCst) == 0 {
            thread::yield_now();
        }
        Ok(UffdTracker {
            shared,
            thread: Mutex::new(Some(handle)),
            own,
            unfaulted,
        })
    }

    fn uffd(&self) -> &Userfault {
        self.shared.uffd()
    }
}

impl Drop for UffdTracker {
    fn drop(&mut self) {
        // A forked child has no handler thread, and shares the stop eventfd with its parent:
        // signalling it would set the parent's handler spinning.
        if self.shared.regions.forked() {
            return;
        }
        self.shared.stopping.store(true, SeqCst);
        self.shared.stop.signal();
        let handle = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

/// The handler thread's loop.
fn handle_faults(sh: &Shared, mut msgs: OwnArray<UffdMsg>, mut parked: OwnArray<Parked>) {
    // Its last write outside ickpt's own memory.
    sh.handler_words[STARTED].store(1, SeqCst);
    let uffd = sh.uffd().raw();
    let mut last_fault = 0u64;
    while !sh.stopping.load(SeqCst) {
        let asked = sh.drains_asked.load(SeqCst);
        let draining = asked != sh.handler_words[DRAINS_DONE].load(SeqCst);
        let committing = sh.protocol.get().is_some_and(|e| e.committing());
        let spin = match sh.spin {
            UffdSpin::Never => false,
            UffdSpin::Commit => committing,
            UffdSpin::Burst => committing || thread::monotonic_ns() - last_fault < BURST_NS,
            UffdSpin::Always => true,
        };
        let busy = !parked.is_empty() || spin || draining;
        if !busy {
            wait_readable(&[uffd, sh.stop.raw(), sh.drain.raw()]);
        }
        let room = (parked.capacity() - parked.len()).min(BATCH);
        // SAFETY: uffd_msg records are plain integers, valid at any bytes.
        let n = sh
            .uffd()
            .read_events(&mut unsafe { msgs.buffer() }[..room])
            .unwrap_or(0);
        if n > 0 {
            last_fault = thread::monotonic_ns();
        }
        for i in 0..n {
            // SAFETY: as above.
            let Some(fault) = unsafe { msgs.buffer() }[i].write_fault() else {
                continue;
            };
            let mut p = Parked {
                fault,
                ticket: None,
            };
            match try_finish(sh, &mut p) {
                Some(Outcome::Gate) if stale(sh, &fault) => {}
                Some(_) => {
                    parked.push(p);
                }
                None => {}
            }
        }
        parked.retain(|p| try_finish(sh, p).is_some());
        if draining && (n == 0 || room == 0) {
            // Every event queued before the checkpoint asked has been read.
            sh.drain.clear();
            sh.handler_words[DRAINS_DONE].store(asked, SeqCst);
        }
        if busy && n == 0 {
            // Nothing new: let the committer and the application have the CPU a moment.
            thread::yield_now();
        }
    }
    // Stopping: every region was detached (unregistered, which wakes its writers).
    parked.retain(|p| {
        if let (Some(t), Some(e)) = (p.ticket.take(), sh.protocol.get()) {
            e.end_wait(t);
        }
        false
    });
}

/// Whether a fault event held at the gate is stale: its page is no longer write-protected,
/// so another event for the page opened it and woke this writer with it. Read only now
/// (events are read late under load), it would open the page again once the checkpoint
/// re-protects it, and the next version would store a page nobody wrote since. A page whose
/// state cannot be read counts as protected: the event is kept, as before.
fn stale(sh: &Shared, f: &WriteFault) -> bool {
    let ps = page_size();
    if sh.pagemap.uffd_write_protected(f.addr, ps).unwrap_or(true) {
        return false;
    }
    let _ = sh.uffd().wake(f.addr & !(ps - 1), ps);
    true
}

/// Decide and open for a parked or new fault. None when it is finished (the writer woken);
/// otherwise why it must wait.
fn try_finish(sh: &Shared, p: &mut Parked) -> Option<Outcome> {
    let mut c = UffdCatch {
        sh,
        ticket: &mut p.ticket,
    };
    let ps = page_size();
    match first_write::first_write(p.fault.addr, p.fault.tid, &mut c) {
        Outcome::Done => {}
        // Its region left, and unregistering released the page: just wake the writer.
        Outcome::Retry => {
            let _ = sh.uffd().wake(p.fault.addr & !(ps - 1), ps);
        }
        // No region holds the page: let the write through.
        Outcome::NotOurs => {
            let _ = sh.uffd().write_protect(p.fault.addr & !(ps - 1), ps, false);
        }
        o @ (Outcome::Gate | Outcome::Wait | Outcome::Failed) => return Some(o),
    }
    if let (Some(t), Some(e)) = (p.ticket.take(), sh.protocol.get()) {
        e.end_wait(t);
    }
    None
}

struct UffdCatch<'a> {
    sh: &'a Shared,
    ticket: &'a mut Option<WaitTicket>,
}

impl Catch for UffdCatch<'_> {
    fn blocking(&self) -> bool {
        false
    }

    fn wait(&mut self, r: &TrackedRegion, page: usize, _brief: bool) -> bool {
        // Count the writer as waiting once (in this engine's protocol; a region of another
        // engine sharing the page is simply tried again).
        let ours = self
            .sh
            .protocol
            .get()
            .is_some_and(|e| std::ptr::eq(&**e, &*r.protocol));
        if ours && self.ticket.is_none() {
            *self.ticket = Some(r.protocol.begin_wait(r.id, page));
        }
        false
    }

    /// The writer sleeps on until `finish`, so its page is marked (and the fault counted)
    /// before it can go on: what it sees in the stats afterwards includes its own write.
    fn open(&mut self, r: &TrackedRegion, lo: usize, hi: usize) -> bool {
        let ps = page_size();
        self.sh
            .uffd()
            .release_quietly(r.page_addr(lo), (hi - lo) * ps)
            .is_ok()
    }

    fn open_whole(&mut self, r: &TrackedRegion) -> bool {
        // Not while a commit still needs the scheduled pages protected; tried again later.
        !r.protocol.committing()
            && self
                .sh
                .uffd()
                .release_quietly(r.base(), r.span_len())
                .is_ok()
    }

    fn finish(&mut self, addr: usize) {
        let ps = page_size();
        let _ = self.sh.uffd().wake(addr & !(ps - 1), ps);
    }
}

impl Tracker for UffdTracker {
    fn backend(&self) -> Backend {
        Backend::Uffd
    }

    /// Have the handler thread read every fault event queued so far, while the pages are
    /// still as the ending epoch left them: it drops the stale ones (see `stale`), which read
    /// after `collect` re-protected their page would open and mark it in the new epoch (the C
    /// threads test stored a page more than was written in about half of its runs).
    fn before_collect(&self) {
        let sh = &self.shared;
        if sh.regions.forked() {
            return;
        }
        let ticket = sh.drains_asked.fetch_add(1, SeqCst) + 1;
        sh.drain.signal();
        while sh.handler_words[DRAINS_DONE].load(SeqCst) < ticket {
            let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner());
            if !matches!(&*thread, Some(h) if !h.is_finished()) {
                return; // no handler thread to drain
            }
            drop(thread);
            thread::yield_now();
        }
    }

    fn attach(&self, r: &Arc<TrackedRegion>, armed: bool) -> Result<(), TrackError> {
        let _ = self.shared.protocol.set(r.protocol.clone());
        self.shared.regions.attach(r, armed, &self.own)
    }

    fn detach(&self, r: &Arc<TrackedRegion>) -> Result<(), TrackError> {
        self.shared.regions.detach(r)
    }

    fn collect(
        &self,
        r: &TrackedRegion,
        _guard: Guard,
        out: &mut Vec<u64>,
        before_rearm: &mut dyn FnMut(&[u64]),
    ) -> Result<(), TrackError> {
        if let Some(done) = self.shared.regions.collect_common(r, out, before_rearm) {
            return done;
        }
        // As with mprotect: bits first, then protect; the gate holds other writers.
        r.dirty.take_into(out);
        // A page the application discarded (MADV_DONTNEED) loses its write-protection with
        // its contents, so writing it again takes no fault: find such pages as present and
        // not write-protected. (One zapped and refilled by another thread during these few
        // milliseconds can still slip through; see docs/design.md.)
        let found = match &self.unfaulted {
            Unfaulted::Scan(s) => s.written(r, out, false).map(drop),
            Unfaulted::Entries(buf) => {
                let mut buf = buf.lock().unwrap_or_else(|e| e.into_inner());
                self.shared.pagemap.present_unprotected(
                    r.base(),
                    r.span_end(),
                    page_size(),
                    buf.as_mut_slice(),
                    |p| bitmap::set(out, p),
                )
            }
        };
        found.map_err(TrackError::Userfault)?;
        before_rearm(out);
        self.uffd()
            .write_protect(r.base(), r.span_len(), true)
            .map_err(TrackError::Userfault)
    }

    fn collect_pages(
        &self,
        r: &TrackedRegion,
        pages: std::ops::Range<usize>,
        out: &mut Vec<u64>,
    ) -> Result<(), TrackError> {
        self.shared
            .regions
            .collect_pages(r, pages, out, |pages, _| {
                self.uffd()
                    .write_protect(r.page_addr(pages.start), pages.len() * page_size(), true)
            })
    }

    fn disarm(&self, r: &TrackedRegion) -> Result<(), TrackError> {
        self.shared.regions.disarm(r)
    }

    fn handler_intact(&self) -> Result<bool, TrackError> {
        let alive = self
            .thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|h| !h.is_finished());
        let regions = &self.shared.regions;
        Ok(alive && (regions.fallback_count() == 0 || regions.fence.handler_intact()?))
    }
}
