//! A delta file: the word deltas of one or more regions, as a program section (CAPE) saves
//! them and `ickpt merge` combines them. Small by design (what a section changed), so it is
//! read whole, its every count checked against its real size and its checksum before any
//! record is decoded. Byte diagram in docs/FORMAT.md ("Delta files").

use crate::delta::{self, DeltaShape, Word};
use crate::layout::limits;
use crate::FormatError;

pub const DELTA_MAGIC: [u8; 8] = *b"ICKPTDLT";
pub const DELTA_FORMAT: u16 = 1;
const HEADER: usize = 32;
const ENTRY: usize = 32;
const TRAILER: usize = 8;

/// One region's changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionDelta {
    pub id: u64,
    pub length: u64,
    pub words: Vec<Word>,
}

/// What a delta file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaFile {
    pub page_size: u32,
    /// How many saves went into it (1 for one save; merging adds).
    pub saves: u64,
    /// By id, ascending.
    pub regions: Vec<RegionDelta>,
}

impl DeltaFile {
    fn shape(&self, r: &RegionDelta) -> DeltaShape {
        DeltaShape {
            page_size: self.page_size,
            region_len: r.length,
        }
    }

    /// The file's bytes. The regions must be in ascending id order and `saves` at least 1,
    /// as `decode` requires.
    pub fn encode(&self) -> Vec<u8> {
        debug_assert!(
            self.saves >= 1 && self.regions.windows(2).all(|w| w[0].id < w[1].id),
            "regions in ascending id order, saves >= 1"
        );
        let bodies: Vec<Vec<u8>> = self
            .regions
            .iter()
            .map(|r| {
                let mut b = Vec::new();
                delta::encode(&self.shape(r), &r.words, &mut b);
                b
            })
            .collect();
        let mut f = Vec::with_capacity(
            HEADER + ENTRY * self.regions.len() + bodies.iter().map(Vec::len).sum::<usize>(),
        );
        f.extend_from_slice(&DELTA_MAGIC);
        f.extend_from_slice(&DELTA_FORMAT.to_le_bytes());
        f.extend_from_slice(&[0; 2]);
        f.extend_from_slice(&self.page_size.to_le_bytes());
        f.extend_from_slice(&(self.regions.len() as u32).to_le_bytes());
        f.extend_from_slice(&[0; 4]);
        f.extend_from_slice(&self.saves.to_le_bytes());
        for (r, b) in self.regions.iter().zip(&bodies) {
            f.extend_from_slice(&r.id.to_le_bytes());
            f.extend_from_slice(&r.length.to_le_bytes());
            f.extend_from_slice(&(b.len() as u64).to_le_bytes());
            f.extend_from_slice(&[0; 8]);
        }
        for b in &bodies {
            f.extend_from_slice(b);
        }
        let crc = crate::crc(&f);
        f.extend_from_slice(&crc.to_le_bytes());
        f.extend_from_slice(&[0; 4]);
        f
    }

    /// Bytes [`encode`](Self::encode) gives, without encoding.
    pub fn encoded_len(&self) -> u64 {
        let bodies: u64 = self
            .regions
            .iter()
            .map(|r| delta::encoded_len(&self.shape(r), &r.words))
            .sum();
        (HEADER + ENTRY * self.regions.len() + TRAILER) as u64 + bodies
    }

    /// Parse and check `f`, a whole delta file: sizes first, then the checksum, then every
    /// record; nothing is returned unless everything passed.
    pub fn decode(f: &[u8]) -> Result<DeltaFile, FormatError> {
        let bad = |at: usize, what: String| FormatError::corrupt(at as u64, what);
        if f.len() < HEADER + TRAILER {
            return Err(bad(
                0,
                format!("{} bytes: shorter than a delta file's header", f.len()),
            ));
        }
        if f[0..8] != DELTA_MAGIC {
            return Err(bad(0, "not a delta file (magic ICKPTDLT missing)".into()));
        }
        let u16_at = |at: usize| u16::from_le_bytes([f[at], f[at + 1]]);
        let u32_at = |at: usize| u32::from_le_bytes(f[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(f[at..at + 8].try_into().expect("8 bytes"));
        let end = f.len() - TRAILER;
        let crc = crate::crc(&f[..end]);
        if f[end + 4..].iter().any(|&b| b != 0) {
            return Err(bad(end + 4, "reserved trailer bytes are not zero".into()));
        }
        if crc != u32_at(end) {
            return Err(bad(
                end,
                format!(
                    "checksum mismatch (stored {:08x}, computed {crc:08x})",
                    u32_at(end)
                ),
            ));
        }
        let format = u16_at(8);
        if format != DELTA_FORMAT {
            return Err(FormatError::UnsupportedVersion {
                found: format,
                supported: DELTA_FORMAT,
            });
        }
        if f[10..12] != [0; 2] || f[20..24] != [0; 4] {
            return Err(bad(10, "reserved header bytes are not zero".into()));
        }
        let page_size = u32_at(12);
        if !page_size.is_power_of_two()
            || !(limits::MIN_PAGE_SIZE..=limits::MAX_PAGE_SIZE).contains(&page_size)
        {
            return Err(bad(12, format!("page size {page_size}")));
        }
        let count = u32_at(16);
        let saves = u64_at(24);
        if count > limits::MAX_REGIONS || saves == 0 {
            return Err(bad(16, format!("{count} regions, {saves} saves")));
        }
        let table_end = HEADER + count as usize * ENTRY;
        if table_end > end {
            return Err(bad(
                16,
                format!("{count} regions: the table runs past the file's end"),
            ));
        }
        let mut at = table_end;
        let mut out = DeltaFile {
            page_size,
            saves,
            regions: Vec::with_capacity(count as usize),
        };
        for i in 0..count as usize {
            let e = HEADER + i * ENTRY;
            let (id, length, len) = (u64_at(e), u64_at(e + 8), u64_at(e + 16));
            if f[e + 24..e + 32].iter().any(|&b| b != 0) {
                return Err(bad(
                    e + 24,
                    "reserved region-entry bytes are not zero".into(),
                ));
            }
            if out.regions.last().is_some_and(|p| p.id >= id) {
                return Err(bad(e, format!("region {id} out of order or twice")));
            }
            if length == 0 || length.div_ceil(page_size as u64) > limits::MAX_PAGES {
                return Err(bad(
                    e + 8,
                    format!("region {id}: implausible length {length}"),
                ));
            }
            let body_end = (at as u64)
                .checked_add(len)
                .filter(|&b| b <= end as u64)
                .ok_or_else(|| {
                    bad(
                        e + 16,
                        format!("region {id}: {len} bytes of records run past the file's end"),
                    )
                })? as usize;
            let shape = DeltaShape {
                page_size,
                region_len: length,
            };
            let words = delta::decode(&shape, &f[at..body_end]).map_err(|e| match e {
                FormatError::Corrupt { offset, what } => {
                    bad(at + offset as usize, format!("region {id}: {what}"))
                }
                other => other,
            })?;
            out.regions.push(RegionDelta { id, length, words });
            at = body_end;
        }
        if at != end {
            return Err(bad(
                at,
                format!("{} bytes after the last region's records", end - at),
            ));
        }
        Ok(out)
    }

    /// `self` then `later`, word by word, later wins. Refused unless both describe the same
    /// regions (ids and lengths) with the same page size: a delta of another layout would put
    /// words where they do not belong.
    pub fn merge(&self, later: &DeltaFile) -> Result<DeltaFile, MergeError> {
        let layout = |d: &DeltaFile| {
            d.regions
                .iter()
                .map(|r| (r.id, r.length))
                .collect::<Vec<_>>()
        };
        if self.page_size != later.page_size || layout(self) != layout(later) {
            return Err(MergeError {
                first: (self.page_size, layout(self)),
                second: (later.page_size, layout(later)),
            });
        }
        Ok(DeltaFile {
            page_size: self.page_size,
            saves: self.saves.saturating_add(later.saves),
            regions: self
                .regions
                .iter()
                .zip(&later.regions)
                .map(|(a, b)| RegionDelta {
                    id: a.id,
                    length: a.length,
                    words: delta::merge(&a.words, &b.words),
                })
                .collect(),
        })
    }
}

/// Two deltas of different region layouts: (page size, [(region id, length)]) of each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the deltas describe different regions (page size {}: {}; page size {}: {}): only deltas of the same regions merge", .first.0, describe(&.first.1), .second.0, describe(&.second.1))]
pub struct MergeError {
    pub first: (u32, Vec<(u64, u64)>),
    pub second: (u32, Vec<(u64, u64)>),
}

fn describe(l: &[(u64, u64)]) -> String {
    let parts: Vec<String> = l
        .iter()
        .map(|(id, len)| format!("region {id} of {len} bytes"))
        .collect();
    if parts.is_empty() {
        "no region".into()
    } else {
        parts.join(", ")
    }
}
