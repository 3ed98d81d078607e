//! The version file as a commit writes it: pages gathered into batches, each batch
//! checksummed by the committer and written, by the committer between copies or (a sync
//! commit with `ICKPT_WRITE_THREAD`) by a second thread while the committer copies the next
//! one. Copy and checksum then hide under the write instead of adding to it (issue 11: at
//! 100% dirty they were a quarter of a sync checkpoint's time); a writer waiting for a page
//! still waits for about one batch's write at most. The thread is off by default: on this
//! project's VM it gained nothing on disk and was several times slower on tmpfs in the
//! recorded runs (docs/benchmarks.md, "Copy and checksum overlapped with the write").

use crate::error::{CheckpointError, FileError};
use crate::store::StoreWriter;
use ickpt_format::{FrameEncoder, VersionLayout};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

/// Bytes gathered before one store write: 64 pages, so a write's system call costs little
/// per page, while a writer waiting on a page (which the committer takes only between
/// batches) waits at most about one such write: 1 ms at 256 MB/s.
const BATCH_BYTES: usize = 256 << 10;

/// Most pages one batch holds (a batch of 4 KiB pages).
pub(super) const BATCH_PAGES: usize = BATCH_BYTES / 4096;

/// Batch buffers: the committer fills one while the writing thread writes the others. With
/// two, each side waited for the other at every batch, and the wake-ups (tens of
/// microseconds on a VM) cost more than the overlap gained; with eight the writing thread
/// finds the next batch queued and never sleeps while the committer is ahead.
pub(super) const BATCHES: usize = 8;

/// A commit of fewer batches writes them itself: starting the thread and waking it for each
/// batch cost more than the overlap gained (the first run of the thread, its JSON not kept:
/// a 1% checkpoint of 256 MiB, 11 batches, took 1.20x the time of writing inline).
pub(super) const THREAD_MIN_BATCHES: usize = 32;

/// Bytes of one batch buffer: a batch, and at least one page.
pub(super) fn batch_bytes(page_size: usize) -> usize {
    BATCH_BYTES.max(page_size)
}

/// The buffer pages are staged in (see `Engine::staging`): one batch buffer, or `BATCHES`
/// for an engine whose sync commits may use the writing thread.
pub(super) fn staging_buffer(
    page_size: usize,
    write_thread: bool,
) -> io::Result<crate::track::OwnBytes> {
    let buffers = if write_thread { BATCHES } else { 1 };
    crate::track::OwnBytes::new(buffers * batch_bytes(page_size))
}

/// The batches passed between the committer and the writing thread.
pub(super) struct Handoff<'a> {
    state: Mutex<Pass<'a>>,
    /// The writing thread waits here for a batch.
    to_write: Condvar,
    /// The committer waits here for an empty buffer.
    to_fill: Condvar,
}

struct Pass<'a> {
    /// The file, while the writing thread does not hold it: before it starts, and after it
    /// returns (or if it could not be started).
    writer: Option<Box<dyn StoreWriter>>,
    /// Batches for the writing thread, oldest first, with how many of their bytes to write.
    full: VecDeque<(&'a mut [u8], usize)>,
    /// Buffers the writing thread is done with.
    empty: Vec<&'a mut [u8]>,
    /// No more batches: the writing thread returns once `full` is written.
    closed: bool,
    /// The writing thread is running and holds the file: its start-up (which allocates) is
    /// over.
    started: bool,
    /// The writing thread has ended (returned, or panicked): nothing more comes back.
    gone: bool,
    /// A write failed: nothing more is written, whatever is queued.
    failed: bool,
    /// The failure, until the committer takes it.
    err: Option<io::Error>,
    write_time: Duration,
    bytes: u64,
}

impl<'a> Handoff<'a> {
    /// `spares` are the batch buffers the committer does not start with. Allocates here,
    /// before any page is taken, and never after (`full` and `empty` hold every buffer).
    pub(super) fn new(spares: impl Iterator<Item = &'a mut [u8]>) -> Self {
        let empty: Vec<&'a mut [u8]> = spares.collect();
        Handoff {
            state: Mutex::new(Pass {
                writer: None,
                full: VecDeque::with_capacity(empty.len() + 1),
                empty,
                closed: false,
                started: false,
                gone: false,
                failed: false,
                err: None,
                write_time: Duration::ZERO,
                bytes: 0,
            }),
            to_write: Condvar::new(),
            to_fill: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Pass<'a>> {
        // Nothing is left half-changed under the lock: a panic never happens while it is held.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait_until<'h>(
        &'h self,
        on: &Condvar,
        p: MutexGuard<'h, Pass<'a>>,
        ready: impl Fn(&Pass<'a>) -> bool,
    ) -> MutexGuard<'h, Pass<'a>> {
        on.wait_while(p, |p| !ready(p))
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The writing thread: write each batch handed over, in order, and hand its buffer back.
    /// After an error nothing more is written (the committer stops handing batches over
    /// once it sees it).
    fn write_batches(&self) {
        struct Gone<'h, 'a>(&'h Handoff<'a>);
        impl Drop for Gone<'_, '_> {
            fn drop(&mut self) {
                // Also on a panic in the store: the committer must not wait for a buffer.
                self.0.lock().gone = true;
                self.0.to_fill.notify_all();
            }
        }
        let _gone = Gone(self);
        let mut p = self.lock();
        let Some(mut w) = p.writer.take() else {
            return;
        };
        p.started = true;
        drop(p);
        self.to_fill.notify_one();
        loop {
            let ready = |p: &Pass<'a>| !p.full.is_empty() || p.closed;
            let mut p = self.wait_until(&self.to_write, self.lock(), ready);
            let Some((buf, len)) = p.full.pop_front() else {
                p.writer = Some(w);
                return;
            };
            let failed = p.failed;
            drop(p);
            let t = Instant::now();
            let r = if failed {
                Ok(())
            } else {
                w.write_all(&buf[..len])
            };
            let took = t.elapsed();
            let mut p = self.lock();
            p.write_time += took;
            match r {
                Ok(()) if !failed => p.bytes += len as u64,
                Ok(()) => {}
                Err(e) => {
                    p.failed = true;
                    p.err = Some(e);
                }
            }
            p.empty.push(buf);
            drop(p);
            self.to_fill.notify_one();
        }
    }
}

/// Why nothing more is written. Kept as it came, and made a `CheckpointError` (which
/// allocates, for the file's name) only once every page is released: a writer waiting for a
/// page may hold the allocator's lock.
enum Failure {
    /// A store call failed: which one, and how.
    Io(&'static str, io::Error),
    /// The commit gave up (it met a write, or the protocol was poisoned).
    Abort(CheckpointError),
}

/// Where batches go: written by this thread, or by the writing thread.
enum Out<'s, 'a> {
    Here(Box<dyn StoreWriter>),
    Thread {
        handoff: &'a Handoff<'a>,
        thread: ScopedJoinHandle<'s, ()>,
    },
    /// The file could not be created, or the writing thread is being joined.
    Nowhere,
}

/// The version file being written. After the first error nothing more is written, but
/// pages are still accepted (and only released).
pub(super) struct Sink<'s, 'a> {
    out: Out<'s, 'a>,
    failure: Option<Failure>,
    file: String,
    /// The batch being filled; None once writing has failed.
    buf: Option<&'a mut [u8]>,
    fill: usize,
    /// The batch's pages as (region index, page), in the order of their bytes in `buf`.
    batch: [(u32, u64); BATCH_PAGES],
    /// Their CRCs, once the batch is checksummed.
    crcs: [u32; BATCH_PAGES],
    /// Turns a checksummed batch into the frames stored (format 6).
    encoder: &'a mut FrameEncoder,
    ps: usize,
    /// Bytes written by this thread; the writing thread counts its own.
    bytes: u64,
    /// Time in the store's write calls, on either thread.
    pub write_time: Duration,
    /// Time this thread waited for the writing thread to hand a batch buffer back (or, with
    /// no writing thread, wrote itself): the part of the writing that did not overlap.
    pub io_wait: Duration,
    pub crc_time: Duration,
    /// Counts the batches the commit waited for the store to take (`Stats::commit_stalls`).
    stalls: &'a AtomicU64,
}

impl<'s, 'a> Sink<'s, 'a> {
    /// Write the version file `file` through `writer` (the store's `create`; its error is
    /// returned by `commit`), of which `written` bytes are there already: 0 for a new file,
    /// whose caller writes the prefix first; a file pre-copy began (`engine::precopy`) has
    /// its pages, and its prefix is written last, with [`overwrite`](Self::overwrite).
    /// `staging` is the batch buffer to fill first. Batches are written here until
    /// [`write_on_thread`](Self::write_on_thread).
    pub(super) fn start(
        writer: io::Result<Box<dyn StoreWriter>>,
        file: String,
        written: u64,
        staging: &'a mut [u8],
        encoder: &'a mut FrameEncoder,
        stalls: &'a AtomicU64,
        ps: usize,
    ) -> Self {
        let (out, failure) = match writer {
            Ok(w) => (Out::Here(w), None),
            Err(e) => (Out::Nowhere, Some(Failure::Io("create", e))),
        };
        Sink {
            out,
            failure,
            file,
            buf: Some(staging),
            fill: 0,
            batch: [(0, 0); BATCH_PAGES],
            crcs: [0; BATCH_PAGES],
            encoder,
            ps,
            bytes: written,
            write_time: Duration::ZERO,
            io_wait: Duration::ZERO,
            crc_time: Duration::ZERO,
            stalls,
        }
    }

    /// From now on, write batches on a thread of `scope`, passing them through `handoff`
    /// (which holds the other buffers); here still if no thread can be started. Call before
    /// the first page is taken: it allocates.
    pub(super) fn write_on_thread(&mut self, scope: &'s Scope<'s, '_>, handoff: &'a Handoff<'a>)
    where
        'a: 's,
    {
        if self.failure.is_some() {
            return;
        }
        let Out::Here(w) = std::mem::replace(&mut self.out, Out::Nowhere) else {
            return;
        };
        handoff.lock().writer = Some(w);
        let spawned = std::thread::Builder::new()
            .name("ickpt-write".into())
            .spawn_scoped(scope, || handoff.write_batches());
        self.out = match spawned {
            Ok(thread) => {
                // A thread starting up allocates (thread-locals, its malloc arena): that must
                // be over before the first page is taken, since a writer waiting for a page
                // may hold the allocator's lock.
                let p = handoff.lock();
                drop(handoff.wait_until(&handoff.to_fill, p, |p| p.started || p.gone));
                Out::Thread { handoff, thread }
            }
            // No thread to be had: the batches are written here, as before issue 11.
            Err(_) => Out::Here(handoff.lock().writer.take().expect("not taken")),
        };
    }

    /// Where the next page's bytes go; None once writing has failed (the page is then
    /// only released, not copied). The caller made room before it claimed the page
    /// ([`make_room`](Self::make_room)): a flush here would hold a claimed page across a write.
    pub(super) fn slot(&mut self) -> Option<&mut [u8]> {
        if self.failure.is_some() {
            return None;
        }
        debug_assert!(
            self.buf
                .as_ref()
                .is_none_or(|b| self.fill + self.ps <= b.len())
                && self.fill / self.ps < BATCH_PAGES,
            "a batch full at slot(): make_room was not called first"
        );
        let (fill, ps) = (self.fill, self.ps);
        self.buf.as_deref_mut().map(|b| &mut b[fill..fill + ps])
    }

    /// The page copied into `slot` is complete; it is checksummed with its batch.
    pub(super) fn seal(&mut self, ri: usize, page: usize) {
        if self.failure.is_some() {
            return;
        }
        self.batch[self.fill / self.ps] = (ri as u32, page as u64);
        self.fill += self.ps;
    }

    /// Pass the batch on if it has no room for another page.
    pub(super) fn make_room(&mut self, layout: &mut VersionLayout) {
        let cap = self.buf.as_ref().map_or(0, |b| b.len());
        if self.fill + self.ps > cap || self.fill / self.ps == BATCH_PAGES {
            self.flush(layout);
        }
    }

    /// Checksum the batch's pages into the layout, in order, encode them into frames (zero
    /// pages left out, the rest compressed where that is smaller) and pass the stored bytes
    /// on to be written. The pages are released already: a writer waiting for one never
    /// waits for its checksum or its compression.
    pub(super) fn flush(&mut self, layout: &mut VersionLayout) {
        let fill = std::mem::take(&mut self.fill);
        if self.failure.is_some() || fill == 0 {
            // After a failed write, or a commit that met a write, nothing more is written.
            return;
        }
        let Some(data) = self.buf.take() else { return };
        let t = Instant::now();
        let n = fill / self.ps;
        for (i, page) in data[..fill].chunks_exact(self.ps).enumerate() {
            let (ri, p) = self.batch[i];
            self.crcs[i] = ickpt_format::crc(page);
            layout.push_page(ri, p, self.crcs[i]);
        }
        let fill = self
            .encoder
            .encode(data, fill, self.ps, &self.crcs[..n], |f| {
                layout.push_frame(f)
            });
        self.crc_time += t.elapsed();
        self.buf = match &self.out {
            Out::Thread { handoff, .. } => self.hand_over(handoff, data, fill),
            _ => {
                // A batch written here is one the commit waits for the store to take.
                self.stalls.fetch_add(1, Ordering::Relaxed);
                self.write(&data[..fill]);
                Some(data)
            }
        };
    }

    /// Queue `data` for the writing thread and take an empty buffer to fill next, waiting
    /// for one if every buffer is still queued or being written. None if the writing thread
    /// failed or is gone.
    fn hand_over(
        &mut self,
        handoff: &'a Handoff<'a>,
        data: &'a mut [u8],
        fill: usize,
    ) -> Option<&'a mut [u8]> {
        let t = Instant::now();
        let mut p = handoff.lock();
        if p.empty.is_empty() && !p.gone {
            self.stalls.fetch_add(1, Ordering::Relaxed);
            let ready = |p: &Pass<'a>| !p.empty.is_empty() || p.gone;
            p = handoff.wait_until(&handoff.to_fill, p, ready);
        }
        self.io_wait += t.elapsed();
        if let Some(e) = p.err.take() {
            self.failure = Some(Failure::Io("write", e));
            return None;
        }
        let next = p.empty.pop()?;
        p.full.push_back((data, fill));
        drop(p);
        handoff.to_write.notify_one();
        Some(next)
    }

    /// Write `data` on this thread: the prefix and the trailer, and every batch when there
    /// is no writing thread.
    pub(super) fn write(&mut self, data: &[u8]) {
        if data.is_empty() || self.failure.is_some() {
            return;
        }
        let Out::Here(w) = &mut self.out else { return };
        let t = Instant::now();
        match w.write_all(data) {
            Ok(()) => self.bytes += data.len() as u64,
            Err(e) => self.failure = Some(Failure::Io("write", e)),
        }
        let took = t.elapsed();
        self.write_time += took;
        self.io_wait += took;
    }

    /// Replace bytes written before, on this thread (a resumed file has no writing thread):
    /// a pre-copied page written again, the prefix at the end.
    pub(super) fn overwrite(&mut self, offset: u64, data: &[u8]) {
        if self.failure.is_some() {
            return;
        }
        let Out::Here(w) = &mut self.out else { return };
        let t = Instant::now();
        if let Err(e) = w.overwrite_at(offset, data) {
            self.failure = Some(Failure::Io("overwrite", e));
        }
        let took = t.elapsed();
        self.write_time += took;
        self.io_wait += took;
    }

    /// Wait for the writing thread to write what it was given, and write here from now on
    /// (the trailer). Call after the last `flush`. A panic on the writing thread (a store
    /// that panics) is raised here, once every page has been released.
    pub(super) fn finish_batches(&mut self) {
        if !matches!(self.out, Out::Thread { .. }) {
            return;
        }
        let Out::Thread { handoff, thread } = std::mem::replace(&mut self.out, Out::Nowhere) else {
            unreachable!("matched above")
        };
        let t = Instant::now();
        // It writes what is queued before it sees this.
        handoff.lock().closed = true;
        handoff.to_write.notify_one();
        let joined = thread.join();
        self.io_wait += t.elapsed();
        if let Err(panic) = joined {
            std::panic::resume_unwind(panic);
        }
        let mut p = handoff.lock();
        self.write_time += p.write_time;
        self.bytes += p.bytes;
        if let Some(e) = p.err.take() {
            // A failed write outranks an abort: it is what the retry would meet again.
            if !matches!(self.failure, Some(Failure::Io(..))) {
                self.failure = Some(Failure::Io("write", e));
            }
        }
        self.out = p.writer.take().map_or(Out::Nowhere, Out::Here);
    }

    /// Whether nothing more is written (a store call failed, or the commit gave up).
    pub(super) fn failed(&self) -> bool {
        self.failure.is_some()
    }

    /// Give up the version: nothing more is written, and `commit` returns `e` (unless a store
    /// call failed first).
    pub(super) fn abort(&mut self, e: CheckpointError) {
        self.failure.get_or_insert(Failure::Abort(e));
    }

    /// Whether the version was given up with `abort`, and no store call failed.
    pub(super) fn aborted(&self) -> bool {
        matches!(self.failure, Some(Failure::Abort(_)))
    }

    /// Make the version durable and visible; returns the file's size.
    pub(super) fn commit(mut self, commit_time: &mut Duration) -> Result<u64, CheckpointError> {
        match self.failure.take() {
            Some(Failure::Io(op, e)) => return Err(FileError::new(&self.file, op, e).into()),
            Some(Failure::Abort(e)) => return Err(e),
            None => {}
        }
        let Out::Here(w) = std::mem::replace(&mut self.out, Out::Nowhere) else {
            unreachable!("a writer when there is no error, once the batches are finished")
        };
        let t = Instant::now();
        w.commit()
            .map_err(|e| FileError::new(&self.file, "commit", e))?;
        *commit_time = t.elapsed();
        Ok(self.bytes)
    }
}

impl Drop for Sink<'_, '_> {
    /// A commit that unwinds (a bug) before `finish_batches` lets the writing thread return,
    /// or the scope it runs in would wait for it forever.
    fn drop(&mut self) {
        if let Out::Thread { handoff, .. } = &self.out {
            let mut p = handoff.lock();
            // What is queued belongs to a file that will be discarded.
            p.failed = true;
            p.closed = true;
            drop(p);
            handoff.to_write.notify_one();
        }
    }
}
