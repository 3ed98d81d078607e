//! Format 6's frames: a version's pages as the writer stores them (zero pages left out, the
//! others compressed with zstd where that makes them smaller), and the view that lets every
//! reader address pages as if they were stored raw, at the offsets the run index gives.

use crate::layout::{limits, Codec, Frame};
use crate::reader::{read_each_piece, Piece, PlacedFrame, ReadAt, VersionMeta};
use crate::FormatError;
use std::io;
use std::sync::Mutex;

/// Whether `page` is all zero bytes; `crc` is its CRC-32C, so that only pages whose CRC is
/// that of a zero page are compared byte by byte.
pub fn is_zero_page(page: &[u8], crc: u32) -> bool {
    crc == zero_page_crc(page.len()) && is_zero(page)
}

/// Whether `bytes` are all zeros. Compared with a page of zeros, so `memcmp` reads many
/// bytes a step where a loop that may stop at any byte reads one (64 MiB of zeros: 6 ms
/// against 43 ms).
pub fn is_zero(bytes: &[u8]) -> bool {
    static ZEROS: [u8; 4096] = [0; 4096];
    bytes.chunks(ZEROS.len()).all(|c| *c == ZEROS[..c.len()])
}

/// CRC-32C of `len` zero bytes, for the page sizes the format allows (computed once each).
pub fn zero_page_crc(len: usize) -> u32 {
    static CRCS: std::sync::OnceLock<[u32; 5]> = std::sync::OnceLock::new();
    let crcs = CRCS.get_or_init(|| {
        let zeros = vec![0u8; limits::MAX_PAGE_SIZE as usize];
        std::array::from_fn(|i| crate::crc(&zeros[..(limits::MIN_PAGE_SIZE as usize) << i]))
    });
    let i = len
        .trailing_zeros()
        .wrapping_sub(limits::MIN_PAGE_SIZE.trailing_zeros());
    match crcs.get(i as usize) {
        Some(&c) if len.is_power_of_two() => c,
        _ => crate::crc(&vec![0u8; len]),
    }
}

/// One zstd frame of `src` into `dst`: the bytes it took, or None when it does not fit.
pub trait Compress: Send {
    fn compress(&mut self, src: &[u8], dst: &mut [u8]) -> Option<usize>;
}

/// zstd's own context, which allocates as it sees fit: for tools and tests. The engine's
/// commits use a context in a fixed workspace (`ickpt::sys::zstd::StaticZstd`), since a
/// commit must not call malloc.
impl Compress for zstd::bulk::Compressor<'static> {
    fn compress(&mut self, src: &[u8], dst: &mut [u8]) -> Option<usize> {
        self.compress_to_buffer(src, dst).ok()
    }
}

/// The buffer an encoder compresses into, made once: a heap `Vec` by default, or memory the
/// caller keeps elsewhere (the engine's lies outside what a whole-process checkpoint stores:
/// every commit rewrites it, and nothing reads it afterwards).
pub trait Scratch: Send {
    fn bytes(&mut self) -> &mut [u8];
}

impl Scratch for Vec<u8> {
    fn bytes(&mut self) -> &mut [u8] {
        self
    }
}

/// Compresses batches of pages into frames, with a scratch buffer made once: given a
/// compressor that allocates nothing either, encoding a batch allocates nothing (the engine
/// encodes while application threads may be stopped holding the allocator's lock).
pub struct FrameEncoder {
    zstd: Option<Box<dyn Compress>>,
    scratch: Box<dyn Scratch>,
}

impl FrameEncoder {
    /// An encoder for batches of at most `batch_bytes`, compressing at zstd `level` with
    /// zstd's own context (None: zero pages are still left out, the rest stored raw).
    pub fn new(level: Option<i32>, batch_bytes: usize) -> io::Result<FrameEncoder> {
        let zstd = level
            .map(zstd::bulk::Compressor::new)
            .transpose()?
            .map(|z| Box::new(z) as Box<dyn Compress>);
        Ok(FrameEncoder::with(zstd, batch_bytes))
    }

    /// An encoder compressing with `zstd` (None: raw).
    pub fn with(zstd: Option<Box<dyn Compress>>, batch_bytes: usize) -> FrameEncoder {
        FrameEncoder::with_scratch(zstd, Box::new(vec![0u8; batch_bytes]))
    }

    /// An encoder compressing with `zstd` (None: raw) into `scratch`, as long as a batch.
    pub fn with_scratch(
        zstd: Option<Box<dyn Compress>>,
        scratch: Box<dyn Scratch>,
    ) -> FrameEncoder {
        // Made now: the first call allocates.
        zero_page_crc(limits::MIN_PAGE_SIZE as usize);
        FrameEncoder { zstd, scratch }
    }

    /// Encode the pages in `batch[..len]` (of `ps` bytes each, `crcs` theirs) in place: on
    /// return `batch[..n]` holds the bytes to store, and `frame` has been called with each
    /// frame in order. Stretches of zero pages become zero frames; every other stretch is one
    /// zstd frame when that is smaller, raw otherwise. Frames never exceed
    /// [`limits::MAX_FRAME_BYTES`].
    pub fn encode(
        &mut self,
        batch: &mut [u8],
        len: usize,
        ps: usize,
        crcs: &[u32],
        mut frame: impl FnMut(Frame),
    ) -> usize {
        debug_assert_eq!(len, crcs.len() * ps);
        let most = (limits::MAX_FRAME_BYTES as usize / ps).max(1);
        let zero_at = |batch: &[u8], k: usize| is_zero_page(&batch[k * ps..(k + 1) * ps], crcs[k]);
        let (mut out, mut i) = (0usize, 0usize);
        // Whether page `i` is zero: each page is tested once, the page that ends a stretch
        // carried over to start the next.
        let mut zero_next = !crcs.is_empty() && zero_at(batch, 0);
        while i < crcs.len() {
            let zero = zero_next;
            let mut n = 1;
            while i + n < crcs.len() && n < most {
                zero_next = zero_at(batch, i + n);
                if zero_next != zero {
                    break;
                }
                n += 1;
            }
            if n == most && i + n < crcs.len() {
                zero_next = zero_at(batch, i + n);
            }
            let from = i * ps;
            let raw = n * ps;
            let (codec, stored, crc) = if zero {
                (Codec::Zero, 0, 0)
            } else {
                match self.compress(&batch[from..from + raw]) {
                    Some(k) => {
                        batch[out..out + k].copy_from_slice(&self.scratch.bytes()[..k]);
                        (Codec::Zstd, k, crate::crc(&batch[out..out + k]))
                    }
                    None => {
                        batch.copy_within(from..from + raw, out);
                        (Codec::Raw, raw, 0)
                    }
                }
            };
            frame(Frame {
                page_count: n as u32,
                codec,
                stored_len: stored as u32,
                crc,
            });
            out += stored;
            i += n;
        }
        out
    }

    /// `pages` compressed into the scratch buffer, if that is smaller: the bytes it took.
    fn compress(&mut self, pages: &[u8]) -> Option<usize> {
        let z = self.zstd.as_mut()?;
        let scratch = self.scratch.bytes();
        // Room for one byte less than the pages: output that does not fit is not worth it.
        let room = (pages.len() - 1).min(scratch.len());
        z.compress(pages, &mut scratch[..room])
            .filter(|&k| k > 0 && k < pages.len())
    }
}

/// A version's data section seen as its pages stored raw: offsets are those of the run
/// index (`data_offset` + page index × page size), whatever the frames store. A version
/// without frames is read straight through.
pub struct PageView<'a, R: ReadAt + ?Sized> {
    meta: &'a VersionMeta,
    src: &'a R,
    /// The frame decompressed last (its index), since a read that ends inside a frame is
    /// usually followed by one that starts there.
    last: Mutex<Option<(usize, Vec<u8>)>>,
}

impl<'a, R: ReadAt + ?Sized> PageView<'a, R> {
    pub fn new(meta: &'a VersionMeta, src: &'a R) -> Self {
        PageView {
            meta,
            src,
            last: Mutex::new(None),
        }
    }

    fn ps(&self) -> u64 {
        self.meta.page_size() as u64
    }

    /// The frame holding byte `pos` of the log's pages.
    fn frame_at(&self, pos: u64) -> usize {
        let page = pos / self.ps();
        self.meta.frames.partition_point(|f| f.first_page <= page) - 1
    }

    /// When `len` bytes from log position `pos` lie in raw frames stored back to back: the
    /// file offset they start at.
    fn raw_stretch(&self, pos: u64, len: u64) -> Option<u64> {
        let ps = self.ps();
        let first = self.frame_at(pos);
        let start = &self.meta.frames[first];
        let mut end = start.first_page * ps;
        for f in &self.meta.frames[first..] {
            if end >= pos + len {
                break;
            }
            if f.frame.codec != Codec::Raw {
                return None;
            }
            end += f.frame.raw_len(self.meta.page_size());
        }
        (start.frame.codec == Codec::Raw && end >= pos + len)
            .then(|| start.offset + (pos - start.first_page * ps))
    }

    /// Log position of file offset `offset`, checked to lie, with `len` bytes, among the pages.
    fn position(&self, offset: u64, len: usize) -> io::Result<u64> {
        let start = self.meta.header.data_offset;
        let pages = self.meta.data_bytes();
        offset
            .checked_sub(start)
            .filter(|p| p.checked_add(len as u64).is_some_and(|e| e <= pages))
            .ok_or_else(|| {
                corrupt(
                    offset,
                    format!("{len} bytes at offset {offset} lie outside the version's pages"),
                )
            })
    }

    /// Decompress frame `k` and hand its pages to `take`.
    fn with_frame<T>(&self, k: usize, take: impl FnOnce(&[u8]) -> T) -> io::Result<T> {
        if let Ok(last) = self.last.try_lock() {
            if let Some((i, pages)) = &*last {
                if *i == k {
                    return Ok(take(pages));
                }
            }
        }
        let pages = self.decompress(&self.meta.frames[k])?;
        let r = take(&pages);
        if let Ok(mut last) = self.last.try_lock() {
            *last = Some((k, pages));
        }
        Ok(r)
    }

    fn decompress(&self, f: &PlacedFrame) -> io::Result<Vec<u8>> {
        let mut stored = vec![0u8; f.frame.stored_len as usize];
        self.src.read_exact_at(&mut stored, f.offset)?;
        let crc = crate::crc(&stored);
        if crc != f.frame.crc {
            return Err(corrupt(
                f.offset,
                format!(
                    "compressed frame of pages {}..{} fails its checksum (stored {:08x}, computed {crc:08x})",
                    f.first_page,
                    f.first_page + f.frame.page_count as u64,
                    f.frame.crc
                ),
            ));
        }
        let raw = f.frame.raw_len(self.meta.page_size()) as usize;
        let bad = |what: String| corrupt(f.offset, format!("compressed frame: {what}"));
        // One zstd frame, exactly: the decoder would also take several, or skippable ones.
        match zstd::zstd_safe::find_frame_compressed_size(&stored) {
            Ok(n) if n == stored.len() => {}
            _ => return Err(bad("not exactly one zstd frame".into())),
        }
        let mut pages = vec![0u8; raw];
        let mut z = zstd::bulk::Decompressor::new()?;
        // A frame never needs a window larger than its pages; refuse one that claims more.
        z.window_log_max(limits::MAX_FRAME_BYTES.trailing_zeros())?;
        match z.decompress_to_buffer(&stored[..], &mut pages[..]) {
            Ok(n) if n == raw => Ok(pages),
            Ok(n) => Err(bad(format!("{n} bytes of pages where {raw} belong"))),
            Err(e) => Err(bad(e.to_string())),
        }
    }
}

/// An error a [`PageView`] read returns for damaged stored bytes: the [`FormatError`] inside
/// an `InvalidData` I/O error, which [`format_error_in`] takes back out.
fn corrupt(offset: u64, what: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        FormatError::Corrupt { offset, what },
    )
}

/// Zero `dst`, writing only the pages not zero already: memory a restart maps fresh for a
/// version stays unbacked where the version stored zero pages, instead of a page of memory
/// each (under `ickpt run`, most of ickpt's own snapshot buffer, which the first capture
/// after the restart then compares at memory speed rather than in the shared zero page).
/// Whether it wrote anything. Pages are compared by [`is_zero`].
pub fn zero_where_not(dst: &mut [u8]) -> bool {
    let mut wrote = false;
    for c in dst.chunks_mut(4096) {
        if !is_zero(c) {
            c.fill(0);
            wrote = true;
        }
    }
    wrote
}

/// The format error a [`PageView`] read failed with, if the failure was damage.
pub fn format_error_in(e: &io::Error) -> Option<FormatError> {
    e.get_ref()?.downcast_ref::<FormatError>().cloned()
}

impl<R: ReadAt + ?Sized> ReadAt for PageView<'_, R> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if self.meta.frames.is_empty() {
            return self.src.read_exact_at(buf, offset);
        }
        let ps = self.ps();
        let mut pos = self.position(offset, buf.len())?;
        let mut done = 0usize;
        while done < buf.len() {
            let want = (buf.len() - done) as u64;
            if let Some(at) = self.raw_stretch(pos, want) {
                return self.src.read_exact_at(&mut buf[done..], at);
            }
            let k = self.frame_at(pos);
            let f = self.meta.frames[k];
            let start = f.first_page * ps;
            let within = (pos - start) as usize;
            let n = ((f.frame.raw_len(self.meta.page_size()) - (pos - start)).min(want)) as usize;
            let dst = &mut buf[done..done + n];
            match f.frame.codec {
                Codec::Zero => {
                    zero_where_not(dst);
                }
                Codec::Raw => self.src.read_exact_at(dst, f.offset + within as u64)?,
                Codec::Zstd => {
                    self.with_frame(k, |p| dst.copy_from_slice(&p[within..within + n]))?
                }
            }
            done += n;
            pos += n as u64;
        }
        Ok(())
    }

    fn read_pieces_at(&self, pieces: &mut [Piece<'_>], offset: u64) -> io::Result<()> {
        if self.meta.frames.is_empty() {
            return self.src.read_pieces_at(pieces, offset);
        }
        let len: usize = pieces.iter().map(|p| p.len()).sum();
        let pos = self.position(offset, len)?;
        match self.raw_stretch(pos, len as u64) {
            // Raw frames back to back are read as the file holds them, gaps and all.
            Some(at) => self.src.read_pieces_at(pieces, at),
            None => read_each_piece(pieces, offset, |b, at| self.read_exact_at(b, at)),
        }
    }
}
