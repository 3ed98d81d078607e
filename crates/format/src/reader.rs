//! Reads and checks the metadata of a version file: every length and offset is checked
//! against the file's size before it is used, so a hostile file cannot make us allocate
//! or read out of bounds.

use crate::layout::{
    stats_len_for, CommitStats, Footer, Header, RegionEntry, Run, FOOTER_LEN, HEADER_LEN,
    REGION_ENTRY_LEN, RUN_ENTRY_LEN,
};
use crate::FormatError;
use std::sync::Arc;

/// Positional reads from a file-like source.
pub trait ReadAt {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
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
    pub footer: Footer,
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

    /// Bytes of page data in this version.
    pub fn data_bytes(&self) -> u64 {
        self.footer.page_count * self.header.page_size as u64
    }

    pub fn region_by_id(&self, id: u64) -> Option<(usize, &RegionEntry)> {
        self.regions.iter().enumerate().find(|(_, r)| r.id == id)
    }
}

fn read(src: &dyn ReadAt, offset: u64, len: u64) -> Result<Vec<u8>, FormatError> {
    let mut buf = vec![0u8; len as usize];
    src.read_exact_at(&mut buf, offset)
        .map_err(|e| FormatError::Io {
            offset,
            source: Arc::new(e),
        })?;
    Ok(buf)
}

/// Read and check header, region table, index, page-CRC table, commit stats and footer.
pub fn read_meta(src: &dyn ReadAt, file_len: u64) -> Result<VersionMeta, FormatError> {
    let min = (HEADER_LEN + FOOTER_LEN) as u64;
    if file_len < min {
        return Err(FormatError::corrupt(
            file_len,
            format!("file is {file_len} bytes, shorter than header and footer ({min})"),
        ));
    }
    let header = Header::decode(&read(src, 0, HEADER_LEN as u64)?)?;
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
    let expect_trailer = footer
        .run_count
        .checked_mul(RUN_ENTRY_LEN as u64)
        .and_then(|r| {
            footer
                .page_count
                .checked_mul(4)
                .and_then(|p| r.checked_add(p))
        })
        .and_then(|t| t.checked_add(stats_len));
    if expect_trailer != Some(trailer_len)
        || footer.page_count.checked_mul(ps) != Some(data_len)
        || footer.run_count > footer.page_count
    {
        return Err(bad_index());
    }

    let prefix = read(src, 0, header.data_offset)?;
    let trailer = read(src, footer.index_offset, file_len - 4 - footer.index_offset)?;
    let computed = crate::crc_append(crate::crc(&prefix), &trailer);
    if computed != footer.meta_crc {
        return Err(FormatError::corrupt(
            footer_at + 60,
            format!(
                "metadata checksum mismatch (stored {:08x}, computed {computed:08x})",
                footer.meta_crc
            ),
        ));
    }

    let mut regions = Vec::with_capacity(header.region_count as usize);
    for i in 0..header.region_count as usize {
        let at = HEADER_LEN + i * REGION_ENTRY_LEN;
        let r = RegionEntry::decode(&prefix[at..at + REGION_ENTRY_LEN], at as u64, &header)?;
        if regions.iter().any(|o: &RegionEntry| o.id == r.id) {
            return Err(FormatError::corrupt(
                at as u64,
                format!("region id {} twice", r.id),
            ));
        }
        regions.push(r);
    }
    if prefix[HEADER_LEN + regions.len() * REGION_ENTRY_LEN..]
        .iter()
        .any(|&b| b != 0)
    {
        return Err(FormatError::corrupt(
            (HEADER_LEN + regions.len() * REGION_ENTRY_LEN) as u64,
            "padding before page data is not zero",
        ));
    }

    let mut runs = Vec::with_capacity(footer.run_count as usize);
    let mut next_data = header.data_offset;
    for i in 0..footer.run_count as usize {
        let at = footer.index_offset + (i * RUN_ENTRY_LEN) as u64;
        let run = Run::decode(&trailer[i * RUN_ENTRY_LEN..(i + 1) * RUN_ENTRY_LEN]);
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
        if next_data > footer.index_offset {
            return Err(FormatError::corrupt(
                at + 16,
                "run data runs into the index",
            ));
        }
        runs.push(run);
    }
    if next_data != footer.index_offset {
        return Err(FormatError::corrupt(
            footer_at + 8,
            "runs do not fill the data section",
        ));
    }
    check_coverage(&header, &regions, &runs, footer.index_offset)?;
    let crc_at = footer.run_count as usize * RUN_ENTRY_LEN;
    let stats_at = crc_at + footer.page_count as usize * 4;
    let page_crcs = trailer[crc_at..stats_at]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    let stats = if stats_len == 0 {
        None
    } else {
        Some(CommitStats::decode(
            &trailer[stats_at..stats_at + stats_len as usize],
            footer.index_offset + stats_at as u64,
        )?)
    };
    Ok(VersionMeta {
        header,
        regions,
        runs,
        page_crcs,
        stats,
        footer,
    })
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
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_unstable_by_key(|&i| (runs[i].region_index, runs[i].first_page));
    let mut stored = vec![0u64; regions.len()];
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
                HEADER_LEN as u64,
                format!(
                    "region {} is new or the version is full, but pages are missing",
                    r.id
                ),
            ));
        }
    }
    Ok(())
}
