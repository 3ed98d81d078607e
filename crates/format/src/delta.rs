//! Word-granularity deltas (CAPE, §IV and Table III): what changed in a region,
//! 4-byte word by 4-byte word, each chunk of `page_size` bytes (counted from the region's
//! start) stored the cheapest of four ways, the way in the two low bits of the record's
//! word-aligned offset:
//!
//! ```text
//! head (u64 LE) = byte offset in the region | method      then
//! 00 single data:            value (4 bytes)                               12 bytes
//! 01 several successive:     count s >= 2 (u32 LE), s values              12 + 4s
//! 10 many data (bitmap):     one bit per word of the chunk, then a value
//!                            per set bit, in order (head = chunk start)   8 + ⌈w/8⌉ + 4u
//! 11 entire page:            every byte of the chunk (head = chunk start)  8 + chunk bytes
//! ```
//!
//! A word is the 4 bytes at a multiple of 4 from the region's start; the region's last word
//! may be shorter (a region of 10 bytes has words of 4, 4 and 2 bytes), and its value then
//! carries zeros past the region, never written. Records are in increasing offset order,
//! never overlap, and a run never leaves its chunk. Only changed words are stored (an entire
//! page only when every word of the chunk changed, as in a new chunk), so deltas of
//! different processes merge word by word, later wins, without one undoing another.
//!
//! The paper's offsets are 4-byte addresses; ickpt's are 8-byte region offsets (regions may
//! exceed 4 GiB), so each record costs 4 bytes more than Table III says, and the choice is
//! made on these costs: the cheapest of the four, exactly, per chunk (Table III's rule picks
//! between the single/several combination and the bitmap the same way, and keeps the entire
//! page for new pages; computing all and taking the least is never larger).

use crate::FormatError;

/// Bytes of a word.
pub const WORD: u64 = 4;

const SINGLE: u64 = 0;
const SEVERAL: u64 = 1;
const MANY: u64 = 2;
const ENTIRE: u64 = 3;

/// A region's shape, which every delta of it shares: deltas of different shapes never merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaShape {
    /// Bytes per chunk: a power of two from 4 KiB to 64 KiB, as a version file's pages.
    pub page_size: u32,
    /// The region's length in bytes, at least 1.
    pub region_len: u64,
}

/// One changed word: its byte offset in the region (a multiple of 4) and its new bytes.
pub type Word = (u64, [u8; 4]);

/// How one chunk's changes were stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Single data and several-successive-data records.
    Runs,
    /// One many-data record: a bitmap and the changed words.
    Bitmap,
    /// One entire-page record.
    Entire,
}

impl DeltaShape {
    fn ps(&self) -> u64 {
        self.page_size as u64
    }

    /// Words in the region (the last one possibly short).
    pub fn words(&self) -> u64 {
        self.region_len.div_ceil(WORD)
    }

    /// Bytes of chunk `c` (the last one possibly short).
    pub fn chunk_len(&self, c: u64) -> u64 {
        self.ps().min(self.region_len - c * self.ps())
    }

    /// Words of chunk `c`.
    pub fn chunk_words(&self, c: u64) -> u64 {
        self.chunk_len(c).div_ceil(WORD)
    }

    /// Bytes of the word at `off` that lie in the region.
    pub fn word_len(&self, off: u64) -> usize {
        WORD.min(self.region_len - off) as usize
    }

    fn check(&self) -> Result<(), FormatError> {
        let ps = self.page_size;
        if !ps.is_power_of_two()
            || !(crate::limits::MIN_PAGE_SIZE..=crate::limits::MAX_PAGE_SIZE).contains(&ps)
            || self.region_len == 0
            || self.region_len.div_ceil(self.ps()) > crate::limits::MAX_PAGES
        {
            return Err(FormatError::corrupt(
                0,
                format!(
                    "a delta of chunks of {ps} bytes over {} bytes: no such region",
                    self.region_len
                ),
            ));
        }
        Ok(())
    }
}

/// The words of `new` that differ from `old` (the same bytes of one region as before and
/// now), in order.
pub fn diff(shape: &DeltaShape, old: &[u8], new: &[u8]) -> Vec<Word> {
    assert!(old.len() as u64 == shape.region_len && new.len() == old.len());
    let mut out = Vec::new();
    for (i, (o, n)) in old
        .chunks(WORD as usize)
        .zip(new.chunks(WORD as usize))
        .enumerate()
    {
        if o != n {
            let mut v = [0u8; 4];
            v[..n.len()].copy_from_slice(n);
            out.push((i as u64 * WORD, v));
        }
    }
    out
}

/// The bytes of the records for `changes` of one chunk, per method: (runs, bitmap, entire),
/// entire None unless every word of the chunk is in `changes` (a chunk written whole, or a
/// new one, whose every word its caller gives).
pub fn chunk_costs(shape: &DeltaShape, chunk: u64, changes: &[Word]) -> (u64, u64, Option<u64>) {
    let mut runs = 0;
    let mut i = 0;
    while i < changes.len() {
        let s = run_len(changes, i);
        runs += if s == 1 { 12 } else { 12 + 4 * s as u64 };
        i += s;
    }
    let w = shape.chunk_words(chunk);
    let u = changes.len() as u64;
    let bitmap = 8 + w.div_ceil(8) + 4 * u;
    let entire = (u == w).then(|| 8 + shape.chunk_len(chunk));
    (runs, bitmap, entire)
}

/// Consecutive words from `changes[i]` on.
fn run_len(changes: &[Word], i: usize) -> usize {
    let mut s = 1;
    while i + s < changes.len() && changes[i + s].0 == changes[i + s - 1].0 + WORD {
        s += 1;
    }
    s
}

/// The cheapest method for one chunk's changes (ties go to runs, then the bitmap).
pub fn choose(shape: &DeltaShape, chunk: u64, changes: &[Word]) -> Method {
    let (runs, bitmap, entire) = chunk_costs(shape, chunk, changes);
    match entire {
        Some(e) if e < runs.min(bitmap) => Method::Entire,
        _ if bitmap < runs => Method::Bitmap,
        _ => Method::Runs,
    }
}

/// Append the records of `changes` (in increasing offset order, distinct, word-aligned,
/// inside the region) to `out`. A new chunk (a region born since) is given with all its words
/// and so may be stored whole.
pub fn encode(shape: &DeltaShape, changes: &[Word], out: &mut Vec<u8>) {
    let ps = shape.ps();
    for (chunk, c) in by_chunk(shape, changes) {
        let start = chunk * ps;
        match choose(shape, chunk, c) {
            Method::Entire => {
                out.extend_from_slice(&(start | ENTIRE).to_le_bytes());
                let len = shape.chunk_len(chunk) as usize;
                let at = out.len();
                for (off, v) in c {
                    out.extend_from_slice(&v[..shape.word_len(*off)]);
                }
                debug_assert_eq!(out.len() - at, len);
            }
            Method::Bitmap => {
                out.extend_from_slice(&(start | MANY).to_le_bytes());
                let at = out.len();
                out.resize(at + shape.chunk_words(chunk).div_ceil(8) as usize, 0);
                for (off, _) in c {
                    let k = ((off - start) / WORD) as usize;
                    out[at + k / 8] |= 1 << (k % 8);
                }
                for (_, v) in c {
                    out.extend_from_slice(v);
                }
            }
            Method::Runs => {
                let mut k = 0;
                while k < c.len() {
                    let s = run_len(c, k);
                    if s == 1 {
                        out.extend_from_slice(&(c[k].0 | SINGLE).to_le_bytes());
                    } else {
                        out.extend_from_slice(&(c[k].0 | SEVERAL).to_le_bytes());
                        out.extend_from_slice(&(s as u32).to_le_bytes());
                    }
                    for (_, v) in &c[k..k + s] {
                        out.extend_from_slice(v);
                    }
                    k += s;
                }
            }
        }
    }
}

/// The bytes [`encode`] appends for `changes`.
pub fn encoded_len(shape: &DeltaShape, changes: &[Word]) -> u64 {
    by_chunk(shape, changes)
        .map(|(chunk, c)| {
            let (runs, bitmap, entire) = chunk_costs(shape, chunk, c);
            entire.map_or(runs.min(bitmap), |e| e.min(runs).min(bitmap))
        })
        .sum()
}

/// `changes` (ascending) cut by chunk: (chunk, its changes).
fn by_chunk<'a>(
    shape: &DeltaShape,
    changes: &'a [Word],
) -> impl Iterator<Item = (u64, &'a [Word])> {
    let ps = shape.ps();
    let mut rest = changes;
    std::iter::from_fn(move || {
        let first = rest.first()?;
        let chunk = first.0 / ps;
        let n = rest.iter().take_while(|w| w.0 / ps == chunk).count();
        let (c, r) = rest.split_at(n);
        rest = r;
        Some((chunk, c))
    })
}

/// The changed words `bytes` (a delta of a region of `shape`) holds, in order, every record
/// checked first: offsets inside the region and in increasing order, runs inside their chunk,
/// bitmaps with no bit past their chunk, no bytes left over, and a short last word's bytes
/// past the region zero. Nothing is returned unless everything passed.
pub fn decode(shape: &DeltaShape, bytes: &[u8]) -> Result<Vec<Word>, FormatError> {
    shape.check()?;
    let ps = shape.ps();
    let mut out: Vec<Word> = Vec::new();
    let mut at = 0usize;
    let bad = |at: usize, what: String| FormatError::corrupt(at as u64, what);
    let take = |at: &mut usize, n: usize| -> Result<&[u8], FormatError> {
        let end = at
            .checked_add(n)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| bad(*at, format!("record needs {n} more bytes; the delta ends")))?;
        let b = &bytes[*at..end];
        *at = end;
        Ok(b)
    };
    // The offset the next record may start at: records ascend and never overlap.
    let mut next = 0u64;
    while at < bytes.len() {
        let rec = at;
        let head = u64::from_le_bytes(take(&mut at, 8)?.try_into().expect("8 bytes"));
        let (off, method) = (head & !3, head & 3);
        if off >= shape.region_len || off < next {
            return Err(bad(
                rec,
                format!("record at region offset {off} lies outside the region or before the previous one"),
            ));
        }
        let chunk = off / ps;
        let chunk_end = chunk * ps + shape.chunk_len(chunk);
        let push = |out: &mut Vec<Word>, off: u64, b: &[u8]| -> Result<(), FormatError> {
            let n = shape.word_len(off);
            let mut v = [0u8; 4];
            v.copy_from_slice(b);
            if v[n..].iter().any(|&x| x != 0) {
                return Err(bad(
                    rec,
                    format!("bytes past the region's end in the word at {off}"),
                ));
            }
            out.try_reserve(1)
                .map_err(|_| bad(rec, "too many words to hold".into()))?;
            out.push((off, v));
            Ok(())
        };
        match method {
            SINGLE => {
                let v = take(&mut at, 4)?;
                push(&mut out, off, v)?;
                next = off + WORD;
            }
            SEVERAL => {
                let s = u32::from_le_bytes(take(&mut at, 4)?.try_into().expect("4 bytes")) as u64;
                if s < 2 || off + s * WORD > chunk_end.next_multiple_of(WORD) {
                    return Err(bad(
                        rec,
                        format!(
                            "a run of {s} words at {off} is shorter than 2 or leaves its chunk"
                        ),
                    ));
                }
                for k in 0..s {
                    let v = take(&mut at, 4)?;
                    push(&mut out, off + k * WORD, v)?;
                }
                next = off + s * WORD;
            }
            MANY | ENTIRE if off % ps != 0 => {
                return Err(bad(
                    rec,
                    format!("a page record at {off}, not a chunk's start"),
                ));
            }
            MANY => {
                let w = shape.chunk_words(chunk) as usize;
                let map = take(&mut at, w.div_ceil(8))?.to_vec();
                if w % 8 != 0 && map[w / 8] >> (w % 8) != 0 {
                    return Err(bad(
                        rec,
                        format!("bitmap of the chunk at {off} marks words past it"),
                    ));
                }
                let set: usize = map.iter().map(|b| b.count_ones() as usize).sum();
                if set == 0 {
                    return Err(bad(
                        rec,
                        format!("bitmap of the chunk at {off} marks no word"),
                    ));
                }
                for k in (0..w).filter(|k| map[k / 8] >> (k % 8) & 1 == 1) {
                    let v = take(&mut at, 4)?;
                    push(&mut out, off + k as u64 * WORD, v)?;
                }
                next = chunk_end;
            }
            _ => {
                let len = shape.chunk_len(chunk) as usize;
                let page = take(&mut at, len)?;
                for (k, w) in page.chunks(WORD as usize).enumerate() {
                    let mut v = [0u8; 4];
                    v[..w.len()].copy_from_slice(w);
                    push(&mut out, off + k as u64 * WORD, &v)?;
                }
                next = chunk_end;
            }
        }
    }
    Ok(out)
}

/// Write `changes` (decoded, so inside the region) into `mem`, the region's bytes.
pub fn apply(shape: &DeltaShape, changes: &[Word], mem: &mut [u8]) {
    assert_eq!(
        mem.len() as u64,
        shape.region_len,
        "memory as long as the region"
    );
    for (off, v) in changes {
        let n = shape.word_len(*off);
        mem[*off as usize..*off as usize + n].copy_from_slice(&v[..n]);
    }
}

/// `a` then `b`, word by word, later wins: applying the result equals applying `a`, then `b`.
pub fn merge(a: &[Word], b: &[Word]) -> Vec<Word> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.0 == y.0 => {
                out.push(*y);
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x.0 < y.0 => {
                out.push(*x);
                i += 1;
            }
            (Some(x), None) => {
                out.push(*x);
                i += 1;
            }
            (_, Some(y)) => {
                out.push(*y);
                j += 1;
            }
            (None, None) => unreachable!("one side has words left"),
        }
    }
    out
}
