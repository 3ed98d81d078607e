//! The version file as a commit writes it: pages gathered into batches, each batch
//! checksummed, encoded and written by the committer between copies. A writer waiting for a
//! page waits for about one batch's write at most. (Writing the batches on a second thread
//! while the committer copied the next gained nothing on this project's VM's disk and was
//! several times slower on tmpfs: docs/benchmarks.md, "Copy and checksum overlapped with the
//! write".)

use crate::error::{CheckpointError, FileError};
use crate::store::StoreWriter;
use ickpt_format::{FrameEncoder, VersionLayout};
use std::io;
use std::time::{Duration, Instant};

/// Bytes gathered before one store write: 64 pages, so a write's system call costs little
/// per page, while a writer waiting on a page (which the committer takes only between
/// batches) waits at most about one such write: 1 ms at 256 MB/s.
const BATCH_BYTES: usize = 256 << 10;

/// Most pages one batch holds (a batch of 4 KiB pages).
pub(super) const BATCH_PAGES: usize = BATCH_BYTES / 4096;

/// Bytes of one batch buffer: a batch, and at least one page.
pub(super) fn batch_bytes(page_size: usize) -> usize {
    BATCH_BYTES.max(page_size)
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

/// The version file being written. After the first error nothing more is written, but
/// pages are still accepted (and only released).
pub(super) struct Sink<'a> {
    /// None when the file could not be created.
    out: Option<Box<dyn StoreWriter>>,
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
    bytes: u64,
    /// Time in the store's write calls.
    pub write_time: Duration,
    pub crc_time: Duration,
}

impl<'a> Sink<'a> {
    /// Write the version file `file` through `writer` (the store's `create`; its error is
    /// returned by `commit`), of which `written` bytes are there already: 0 for a new file,
    /// whose caller writes the prefix first; a file pre-copy began (`engine::precopy`) has
    /// its pages, and its prefix is written last, with [`overwrite`](Self::overwrite).
    /// `staging` is the batch buffer.
    pub(super) fn start(
        writer: io::Result<Box<dyn StoreWriter>>,
        file: String,
        written: u64,
        staging: &'a mut [u8],
        encoder: &'a mut FrameEncoder,
        ps: usize,
    ) -> Self {
        let (out, failure) = match writer {
            Ok(w) => (Some(w), None),
            Err(e) => (None, Some(Failure::Io("create", e))),
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
            crc_time: Duration::ZERO,
        }
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
        self.write(&data[..fill]);
        self.buf = Some(data);
    }

    /// Write `data` after what is written: the prefix, each batch, the trailer.
    pub(super) fn write(&mut self, data: &[u8]) {
        if data.is_empty() || self.failure.is_some() {
            return;
        }
        let Some(w) = &mut self.out else { return };
        let t = Instant::now();
        match w.write_all(data) {
            Ok(()) => self.bytes += data.len() as u64,
            Err(e) => self.failure = Some(Failure::Io("write", e)),
        }
        self.write_time += t.elapsed();
    }

    /// Replace bytes written before: a pre-copied page written again, the prefix at the end.
    pub(super) fn overwrite(&mut self, offset: u64, data: &[u8]) {
        if self.failure.is_some() {
            return;
        }
        let Some(w) = &mut self.out else { return };
        let t = Instant::now();
        if let Err(e) = w.overwrite_at(offset, data) {
            self.failure = Some(Failure::Io("overwrite", e));
        }
        self.write_time += t.elapsed();
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
        let Some(w) = self.out.take() else {
            unreachable!("a writer when there is no error")
        };
        let t = Instant::now();
        w.commit()
            .map_err(|e| FileError::new(&self.file, "commit", e))?;
        *commit_time = t.elapsed();
        Ok(self.bytes)
    }
}
