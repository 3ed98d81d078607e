//! Reads and checks the metadata of a version file: every length and offset is checked
//! against the file's size before it is used, so a hostile file cannot make us allocate
//! or read out of bounds.

use crate::layout::{
    has_frames, header_len_for, limits, stats_len_for, Codec, CommitStats, Footer, Frame, Header,
    RegionEntry, Run, FOOTER_LEN, FRAME_ENTRY_LEN, HEADER_LEN_V1, REGION_ENTRY_LEN, RUN_ENTRY_LEN,
};
use crate::FormatError;
use std::sync::Arc;

/// Positional reads from a file-like source.
pub trait ReadAt {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;

    /// Read `pieces` back to back from `offset`, each in full: a kept piece's bytes into its
    /// buffer, a skipped piece's nowhere. A source that can read the whole stretch in one call
    /// (`preadv`, with the skipped bytes sent to a scratch buffer) does; this default reads
    /// each kept piece on its own.
    fn read_pieces_at(&self, pieces: &mut [Piece<'_>], offset: u64) -> std::io::Result<()> {
        read_each_piece(pieces, offset, |b, at| self.read_exact_at(b, at))
    }
}

/// [`ReadAt::read_pieces_at`] one kept piece at a time, with `read_exact_at`.
pub fn read_each_piece(
    pieces: &mut [Piece<'_>],
    offset: u64,
    mut read_exact_at: impl FnMut(&mut [u8], u64) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut at = offset;
    for p in pieces {
        if let Piece::Keep(b) = p {
            read_exact_at(b, at)?;
        }
        at += p.len() as u64;
    }
    Ok(())
}

/// One stretch of a scattered read ([`ReadAt::read_pieces_at`]).
#[derive(Debug)]
pub enum Piece<'a> {
    /// Bytes wanted, read into this buffer.
    Keep(&'a mut [u8]),
    /// This many bytes read past (cheaper than another call when the gap is short).
    Skip(usize),
}

impl Piece<'_> {
    pub fn len(&self) -> usize {
        match self {
            Piece::Keep(b) => b.len(),
            Piece::Skip(n) => *n,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl ReadAt for &[u8] {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| std::io::ErrorKind::UnexpectedEof)?;
        let end = start
            .checked_add(buf.len())
            .filter(|&e| e <= self.len())
            .ok_or(std::io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(&self[start..end]);
        Ok(())
    }
}

impl ReadAt for Vec<u8> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.as_slice().read_exact_at(buf, offset)
    }
}

/// Everything in a version file except its page data, checked.
#[derive(Debug, Clone)]
pub struct VersionMeta {
    pub header: Header,
    pub regions: Vec<RegionEntry>,
    /// Runs in log (flush) order; their data tiles the data section without gaps.
    pub runs: Vec<Run>,
    /// One CRC-32C per stored page, in log order.
    pub page_crcs: Vec<u32>,
    /// How the commit went; `None` for format version 1 files, which predate the block.
    pub stats: Option<CommitStats>,
    /// The frame table (format 6), each frame with where it lies; empty when every page is
    /// stored raw at its place in the log.
    pub frames: Vec<PlacedFrame>,
    pub footer: Footer,
}

/// A frame and where it lies: its first page's index in the log, and its bytes' file offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacedFrame {
    pub frame: Frame,
    pub first_page: u64,
    pub offset: u64,
}

impl VersionMeta {
    /// Runs with the CRCs of their pages.
    pub fn runs_with_crcs(&self) -> impl Iterator<Item = (&Run, &[u32])> {
        let mut at = 0usize;
        self.runs.iter().map(move |r| {
            let crcs = &self.page_crcs[at..at + r.page_count as usize];
            at += r.page_count as usize;
            (r, crcs)
        })
    }

    pub fn page_size(&self) -> u32 {
        self.header.page_size
    }

    /// Bytes of page data in this version, as the pages are (before compression).
    pub fn data_bytes(&self) -> u64 {
        self.footer.page_count * self.header.page_size as u64
    }

    /// Bytes the page data takes in the file (compressed, zero pages left out).
    pub fn stored_bytes(&self) -> u64 {
        self.footer.index_offset - self.header.data_offset
    }

    /// Pages stored as zero frames: no bytes in the file.
    pub fn zero_pages(&self) -> u64 {
        self.frames
            .iter()
            .filter(|f| f.frame.codec == Codec::Zero)
            .map(|f| f.frame.page_count as u64)
            .sum()
    }

    pub fn region_by_id(&self, id: u64) -> Option<(usize, &RegionEntry)> {
        self.regions.iter().enumerate().find(|(_, r)| r.id == id)
    }
}

/// Room for `len` bytes, or an error instead of an abort when the allocator refuses.
pub(crate) fn buffer(len: u64, at: u64) -> Result<Vec<u8>, FormatError> {
    let mut buf = Vec::new();
    usize::try_from(len)
        .ok()
        .and_then(|n| buf.try_reserve_exact(n).ok())
        .ok_or_else(|| {
            FormatError::corrupt(
                at,
                format!("needs {len} bytes of memory to read; too large"),
            )
        })?;
    buf.resize(len as usize, 0);
    Ok(buf)
}

/// A vector with room for `n` items, or an error instead of an abort.
pub(crate) fn vec_for<T>(n: u64, at: u64) -> Result<Vec<T>, FormatError> {
    let mut v = Vec::new();
    usize::try_from(n)
        .ok()
        .and_then(|n| v.try_reserve_exact(n).ok())
        .ok_or_else(|| FormatError::corrupt(at, format!("{n} entries: too many to hold")))?;
    Ok(v)
}

fn read(src: &dyn ReadAt, offset: u64, len: u64) -> Result<Vec<u8>, FormatError> {
    let mut buf = buffer(len, offset)?;
    read_into(src, &mut buf, offset)?;
    Ok(buf)
}

fn read_into(src: &dyn ReadAt, buf: &mut [u8], offset: u64) -> Result<(), FormatError> {
    src.read_exact_at(buf, offset).map_err(|e| FormatError::Io {
        offset,
        source: Arc::new(e),
    })
}

/// Read and check header, region table, index, page-CRC table, commit stats and footer.
///
/// Every count is checked against the file's size and [`limits`](crate::limits) before it
/// is used; the region table (at most 32 MiB) is read whole, the trailer streams through a
/// 1 MiB buffer: the run index grows entry by entry as each entry passes its checks, and the
/// page-CRC table is read into memory only once the metadata checksum has matched, so memory
/// follows valid bytes that are really in the file, not the counts it claims.
/// Allocations the system refuses become errors, never aborts.
pub fn read_meta(src: &dyn ReadAt, file_len: u64) -> Result<VersionMeta, FormatError> {
    let short = |need: usize| {
        FormatError::corrupt(
            file_len,
            format!("file is {file_len} bytes, shorter than its header and footer ({need})"),
        )
    };
    if file_len < (HEADER_LEN_V1 + FOOTER_LEN) as u64 {
        return Err(short(HEADER_LEN_V1 + FOOTER_LEN));
    }
    let first = read(src, 0, HEADER_LEN_V1 as u64)?;
    let header_len = header_len_for(Header::peek_format_version(&first));
    if file_len < (header_len + FOOTER_LEN) as u64 {
        return Err(short(header_len + FOOTER_LEN));
    }
    let header = Header::decode(&read(src, 0, header_len as u64)?)?;
    let footer_at = file_len - FOOTER_LEN as u64;
    if header.data_offset > footer_at {
        return Err(FormatError::corrupt(
            48,
            "region table runs past the end of the file",
        ));
    }
    let footer = Footer::decode(&read(src, footer_at, FOOTER_LEN as u64)?, footer_at)?;
    if footer.file_length != file_len {
        return Err(FormatError::corrupt(
            footer_at + 32,
            format!(
                "footer says the file is {} bytes but it is {file_len}: truncated or appended to",
                footer.file_length
            ),
        ));
    }
    let ps = header.page_size as u64;
    let bad_index = || FormatError::corrupt(footer_at + 8, "index offset or counts out of range");
    if footer.index_offset < header.data_offset || footer.index_offset > footer_at {
        return Err(bad_index());
    }
    let data_len = footer.index_offset - header.data_offset;
    let trailer_len = footer_at - footer.index_offset;
    let stats_len = stats_len_for(header.format_version) as u64;
    if footer.frame_count != 0 && !has_frames(header.format_version) {
        return Err(FormatError::corrupt(
            footer_at + 40,
            "reserved footer bytes are not zero",
        ));
    }
    let expect_trailer = footer
        .run_count
        .checked_mul(RUN_ENTRY_LEN as u64)
        .and_then(|r| {
            footer
                .page_count
                .checked_mul(4)
                .and_then(|p| r.checked_add(p))
        })
        .and_then(|t| {
            footer
                .frame_count
                .checked_mul(FRAME_ENTRY_LEN as u64)
                .and_then(|f| t.checked_add(f))
        })
        .and_then(|t| t.checked_add(stats_len));
    let pages_len = footer.page_count.checked_mul(ps);
    // Raw pages fill the data section; frames store them in at most as many bytes.
    let data_fits = if footer.frame_count == 0 {
        pages_len == Some(data_len)
    } else {
        footer.frame_count <= footer.page_count && pages_len.is_some_and(|p| data_len <= p)
    };
    if expect_trailer != Some(trailer_len) || !data_fits || footer.run_count > footer.page_count {
        return Err(bad_index());
    }
    if footer.page_count > limits::MAX_PAGES {
        return Err(FormatError::corrupt(
            footer_at + 24,
            format!(
                "{} pages: more than the {} a version may hold",
                footer.page_count,
                limits::MAX_PAGES
            ),
        ));
    }

    // Where the runs' pages end in the log: runs address pages as if stored raw, whatever
    // the frames do with them.
    let pages_end = header.data_offset + footer.page_count * ps;
    let meta_end = file_len - 4;
    // The table is bounded by MAX_REGIONS; the padding after it (under a page) is read in
    // the same call.
    let prefix = read(src, 0, header.data_offset)?;
    let mut computed = crate::crc(&prefix);
    let table_end = header_len + header.region_count as usize * REGION_ENTRY_LEN;
    let mut regions: Vec<RegionEntry> = vec_for(header.region_count as u64, 36)?;
    for at in (header_len..table_end).step_by(REGION_ENTRY_LEN) {
        let r = RegionEntry::decode(&prefix[at..at + REGION_ENTRY_LEN], at as u64, &header)?;
        regions.push(r);
    }
    check_unique_ids(&regions, header_len)?;
    if let Some(i) = prefix[table_end..].iter().position(|&b| b != 0) {
        return Err(FormatError::corrupt(
            (table_end + i) as u64,
            "padding before page data is not zero",
        ));
    }
    drop(prefix);

    // The trailer streams through a bounded buffer: each run is checked as it arrives and
    // the run table grows only with entries that passed, so what a file makes the reader
    // hold follows bytes that are really there and valid (a sparse file's holes fail at the
    // first run), never the counts it claims. The page-CRC table has no such check (any
    // four bytes are a CRC, zeros too): it is only checksummed here, and read into memory
    // once the metadata checksum has matched (outside testing: one real run and a table
    // left as a hole made the reader hold 1 GiB before refusing the file).
    let mut runs: Vec<Run> = Vec::new();
    let mut stats_bytes: Vec<u8> = Vec::with_capacity(stats_len as usize);
    let mut next_data = header.data_offset;
    let runs_end = footer.run_count * RUN_ENTRY_LEN as u64;
    let crcs_end = runs_end + footer.page_count * 4;
    let mut run_carry = Vec::new();
    let mut on_run = |entry: &[u8], runs: &mut Vec<Run>| -> Result<(), FormatError> {
        let at = footer.index_offset + (runs.len() * RUN_ENTRY_LEN) as u64;
        let run = Run::decode(entry);
        let region = regions.get(run.region_index as usize).ok_or_else(|| {
            FormatError::corrupt(at, format!("run names region index {}", run.region_index))
        })?;
        let npages = region.page_count(header.page_size);
        if run.page_count == 0
            || run
                .first_page
                .checked_add(run.page_count as u64)
                .is_none_or(|end| end > npages)
        {
            return Err(FormatError::corrupt(at + 4, "run pages outside its region"));
        }
        if run.data_offset != next_data {
            return Err(FormatError::corrupt(
                at + 16,
                "run data is not contiguous in the log",
            ));
        }
        next_data += run.page_count as u64 * ps;
        if next_data > pages_end {
            return Err(FormatError::corrupt(
                at + 16,
                "run data runs into the index",
            ));
        }
        grow(runs, footer_at + 16)?;
        runs.push(run);
        Ok(())
    };
    let frames_end = crcs_end + footer.frame_count * FRAME_ENTRY_LEN as u64;
    let mut frames: Vec<PlacedFrame> = Vec::new();
    let (mut frame_page, mut frame_at) = (0u64, header.data_offset);
    let mut frame_carry = Vec::new();
    let mut on_frame = |entry: &[u8], frames: &mut Vec<PlacedFrame>| -> Result<(), FormatError> {
        let at = footer.index_offset + crcs_end + (frames.len() * FRAME_ENTRY_LEN) as u64;
        let frame = Frame::decode(entry, at, header.page_size)?;
        let placed = PlacedFrame {
            frame,
            first_page: frame_page,
            offset: frame_at,
        };
        frame_page += frame.page_count as u64;
        frame_at += frame.stored_len as u64;
        if frame_page > footer.page_count || frame_at > footer.index_offset {
            return Err(FormatError::corrupt(
                at,
                "frames hold more pages or bytes than the version",
            ));
        }
        grow(frames, footer_at + 40)?;
        frames.push(placed);
        Ok(())
    };
    const CHUNK: u64 = 1 << 20;
    let total = meta_end - footer.index_offset;
    let mut buf = vec![0u8; CHUNK.min(total) as usize];
    let mut pos = 0u64;
    // The CRC table's own checksum, so its second read is checked against what the
    // metadata checksum covered.
    let mut table_crc = 0u32;
    while pos < total {
        let n = CHUNK.min(total - pos) as usize;
        let chunk = &mut buf[..n];
        read_into(src, chunk, footer.index_offset + pos)?;
        computed = crate::crc_append(computed, chunk);
        let section = |from: u64, to: u64| {
            let lo = from.clamp(pos, pos + n as u64) - pos;
            let hi = to.clamp(pos, pos + n as u64) - pos;
            lo as usize..hi as usize
        };
        records(
            &mut run_carry,
            RUN_ENTRY_LEN,
            &chunk[section(0, runs_end)],
            |e| on_run(e, &mut runs),
        )?;
        table_crc = crate::crc_append(table_crc, &chunk[section(runs_end, crcs_end)]);
        records(
            &mut frame_carry,
            FRAME_ENTRY_LEN,
            &chunk[section(crcs_end, frames_end)],
            |e| on_frame(e, &mut frames),
        )?;
        stats_bytes.extend_from_slice(&chunk[section(frames_end, total)]);
        pos += n as u64;
    }
    if computed != footer.meta_crc {
        return Err(FormatError::corrupt(
            footer_at + 60,
            format!(
                "metadata checksum mismatch (stored {:08x}, computed {computed:08x})",
                footer.meta_crc
            ),
        ));
    }
    if next_data != pages_end {
        return Err(FormatError::corrupt(
            footer_at + 8,
            "runs do not fill the data section",
        ));
    }
    if !frames.is_empty() && (frame_page != footer.page_count || frame_at != footer.index_offset) {
        return Err(FormatError::corrupt(
            footer_at + 40,
            "frames do not tile the version's pages and data section",
        ));
    }
    check_coverage(&header, &regions, &runs, footer.index_offset)?;
    drop(buf);
    let page_crcs = read_page_crcs(
        src,
        footer.index_offset + runs_end,
        footer.page_count,
        table_crc,
    )?;
    let stats = if stats_len == 0 {
        None
    } else {
        Some(CommitStats::decode(
            &stats_bytes,
            footer.index_offset + frames_end,
            header.format_version,
        )?)
    };
    Ok(VersionMeta {
        header,
        regions,
        runs,
        page_crcs,
        stats,
        frames,
        footer,
    })
}

/// The `count` page CRCs at `at` (the metadata checksum over them has matched; `count` is
/// within the limits and the file), which must checksum to `expected` as they did then: a
/// file changed between the two reads is refused, never trusted unchecked.
fn read_page_crcs(
    src: &dyn ReadAt,
    at: u64,
    count: u64,
    expected: u32,
) -> Result<Vec<u32>, FormatError> {
    const STEP: u64 = 64 << 10;
    let mut crcs = vec_for(count, at)?;
    let mut buf = vec![0u8; STEP.min(count * 4) as usize];
    let (mut pos, end, mut computed) = (0u64, count * 4, 0u32);
    while pos < end {
        let n = STEP.min(end - pos) as usize;
        read_into(src, &mut buf[..n], at + pos)?;
        computed = crate::crc_append(computed, &buf[..n]);
        crcs.extend(
            buf[..n]
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))),
        );
        pos += n as u64;
    }
    if computed != expected {
        return Err(FormatError::corrupt(
            at,
            "page checksum table changed while the file was read",
        ));
    }
    Ok(crcs)
}

/// Cut `bytes` (the next bytes of a table of `size`-byte records) into records for `each`,
/// keeping a record split across reads in `carry` until its rest arrives.
fn records(
    carry: &mut Vec<u8>,
    size: usize,
    mut bytes: &[u8],
    mut each: impl FnMut(&[u8]) -> Result<(), FormatError>,
) -> Result<(), FormatError> {
    if !carry.is_empty() {
        let k = (size - carry.len()).min(bytes.len());
        carry.extend_from_slice(&bytes[..k]);
        bytes = &bytes[k..];
        if carry.len() < size {
            return Ok(());
        }
        each(carry)?;
        carry.clear();
    }
    let whole = bytes.len() / size * size;
    for r in bytes[..whole].chunks_exact(size) {
        each(r)?;
    }
    carry.extend_from_slice(&bytes[whole..]);
    Ok(())
}

/// Room for one more entry, or an error instead of an abort when the allocator refuses.
fn grow<T>(v: &mut Vec<T>, at: u64) -> Result<(), FormatError> {
    v.try_reserve(1)
        .map_err(|_| FormatError::corrupt(at, "too many entries to hold in memory"))
}

/// Region ids are unique within a table. Sorting a copy of the ids keeps this O(n log n) for
/// the largest tables the limits allow.
fn check_unique_ids(regions: &[RegionEntry], header_len: usize) -> Result<(), FormatError> {
    let mut ids: Vec<(u64, usize)> = vec_for(regions.len() as u64, 36)?;
    ids.extend(regions.iter().enumerate().map(|(i, r)| (r.id, i)));
    ids.sort_unstable();
    match ids.windows(2).find(|w| w[0].0 == w[1].0) {
        Some(w) => Err(FormatError::corrupt(
            (header_len + w[1].1 * REGION_ENTRY_LEN) as u64,
            format!("region id {} twice", w[0].0),
        )),
        None => Ok(()),
    }
}

/// No page is stored twice, and a region that must be stored whole (full version, or first
/// stored in this version) is. Works on the runs alone, so memory is bounded by the file size
/// whatever lengths the region table claims.
fn check_coverage(
    header: &Header,
    regions: &[RegionEntry],
    runs: &[Run],
    index_offset: u64,
) -> Result<(), FormatError> {
    let mut order: Vec<usize> = vec_for(runs.len() as u64, index_offset)?;
    order.extend(0..runs.len());
    order.sort_unstable_by_key(|&i| (runs[i].region_index, runs[i].first_page));
    let mut stored: Vec<u64> = vec_for(regions.len() as u64, index_offset)?;
    stored.resize(regions.len(), 0);
    for (k, &i) in order.iter().enumerate() {
        let r = &runs[i];
        if let Some(&j) = k.checked_sub(1).map(|p| &order[p]) {
            let prev = &runs[j];
            if prev.region_index == r.region_index
                && prev.first_page + prev.page_count as u64 > r.first_page
            {
                return Err(FormatError::corrupt(
                    index_offset + (i * RUN_ENTRY_LEN) as u64,
                    format!("page {} stored twice", r.first_page),
                ));
            }
        }
        stored[r.region_index as usize] += r.page_count as u64;
    }
    for (r, &n) in regions.iter().zip(&stored) {
        let must_be_whole = header.kind == crate::Kind::Full || r.born == header.version;
        if must_be_whole && n != r.page_count(header.page_size) {
            return Err(FormatError::corrupt(
                header.byte_len() as u64,
                format!(
                    "region {} is new or the version is full, but pages are missing",
                    r.id
                ),
            ));
        }
    }
    Ok(())
}
