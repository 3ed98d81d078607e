//! Restart by reverse scan (paper 002, Fig. 5): from the newest version back to its full
//! version, each page is taken from the newest version that stored it and read exactly once.

use crate::error::ReadError;
use crate::read::catalog::{Catalog, OpenVersion};
use crate::store::version_name;
use crate::track::bitmap;
use ickpt_format::{FormatError, RegionEntry};
use std::collections::HashMap;

/// Bytes to read per call while scanning.
const READ_CHUNK: usize = 8 << 20;

/// Receives restored bytes: (index into the newest version's region table, byte offset in
/// the region, bytes). Every byte of every selected region is delivered exactly once.
/// Its error (a restore's, or a tool's writing files) ends the scan and is returned.
pub type Sink<'a, E> = &'a mut dyn FnMut(usize, u64, &[u8]) -> Result<(), E>;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanReport {
    /// Pages read, per version of the chain (newest first).
    pub pages_per_version: Vec<(u64, u64)>,
    pub pages: u64,
}

/// Reverse-scan `chain` (newest first, as [`Catalog::chain`] returns it, checked) and
/// deliver the regions of its newest version selected by `want` to `sink`. Each version's
/// file is opened while it is scanned, then closed: a chain of any length needs one
/// descriptor.
pub fn reverse_scan<E: From<ReadError>>(
    catalog: &Catalog<'_>,
    chain: &[OpenVersion],
    want: &dyn Fn(&RegionEntry) -> bool,
    sink: Sink<'_, E>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScanReport, E> {
    let newest = &chain.first().expect("a chain has a newest version").meta;
    let ps = newest.page_size() as usize;
    let live: Vec<Option<&RegionEntry>> = newest
        .regions
        .iter()
        .map(|r| want(r).then_some(r))
        .collect();
    // Region id to its index among the live ones: looked up per region per version, so a
    // table of a million regions costs no more than its size.
    let live_at: HashMap<u64, usize> = live
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((r.as_ref()?.id, i)))
        .collect();
    let mut restored: Vec<Vec<u64>> = live
        .iter()
        .map(|r| {
            vec![
                0u64;
                r.map_or(0, |r| r.page_count(ps as u32) as usize)
                    .div_ceil(64)
            ]
        })
        .collect();
    let total: u64 = live.iter().flatten().map(|r| r.page_count(ps as u32)).sum();
    let mut remaining = total;
    let mut report = ScanReport::default();
    let mut buf = vec![0u8; READ_CHUNK.max(ps)];
    let chunk_pages = buf.len() / ps;

    for ov in chain {
        if remaining == 0 {
            break;
        }
        let meta = &ov.meta;
        let file = catalog.store().describe(&version_name(ov.version));
        let reopened;
        let reader = match ov.file() {
            Some(f) => f,
            None => {
                reopened = catalog.reopen(ov)?;
                &*reopened
            }
        };
        if meta.page_size() as usize != ps {
            return Err(ReadError::format(
                &file,
                FormatError::Corrupt {
                    offset: 12,
                    what: "page size differs from the newer versions of its chain".into(),
                },
            )
            .into());
        }
        // Which live region each of this version's regions is, if it is the same incarnation.
        let mut map = Vec::with_capacity(meta.regions.len());
        for r in &meta.regions {
            let m = live_at
                .get(&r.id)
                .copied()
                .filter(|&li| live[li].is_some_and(|l| l.born <= ov.version));
            if let Some(li) = m {
                let l = live[li].expect("matched");
                if l.length != r.length || l.page_offset != r.page_offset {
                    return Err(ReadError::format(
                        &file,
                        FormatError::Corrupt {
                            offset: 0,
                            what: format!("region {} changes shape within one incarnation", r.id),
                        },
                    )
                    .into());
                }
            }
            map.push(m);
        }
        let mut read_here = 0u64;
        for (run, crcs) in meta.runs_with_crcs() {
            let Some(li) = map[run.region_index as usize] else {
                continue;
            };
            let region = live[li].expect("mapped regions are live");
            let done = &mut restored[li];
            let mut i = 0usize;
            while i < crcs.len() {
                // The next maximal stretch of pages not restored yet, at most one chunk.
                let page = run.first_page as usize + i;
                if done[page / 64] & (1 << (page % 64)) != 0 {
                    i += 1;
                    continue;
                }
                let mut n = 1;
                while i + n < crcs.len() && n < chunk_pages {
                    let p = page + n;
                    if bitmap::is_set(done, p) {
                        break;
                    }
                    n += 1;
                }
                let offset = run.data_offset + (i * ps) as u64;
                let data = &mut buf[..n * ps];
                reader
                    .read_exact_at(data, offset)
                    .map_err(|e| ReadError::io(&file, "read", e))?;
                for (k, page_bytes) in data.chunks_exact(ps).enumerate() {
                    let p = page + k;
                    let computed = ickpt_format::crc(page_bytes);
                    if computed != crcs[i + k] {
                        return Err(ReadError::format(&file, FormatError::Corrupt {
                            offset: offset + (k * ps) as u64,
                            what: format!(
                                "page {p} of region {} fails its checksum (stored {:08x}, computed {computed:08x})",
                                region.id, crcs[i + k]
                            ),
                        }).into());
                    }
                    if let Some((off, b)) = inside(region, ps, p as u64, page_bytes) {
                        sink(li, off, b)?;
                    }
                    bitmap::set(done, p);
                }
                read_here += n as u64;
                remaining -= n as u64;
                progress(total - remaining, total);
                i += n;
            }
        }
        report.pages_per_version.push((ov.version, read_here));
        report.pages += read_here;
    }
    if remaining != 0 {
        let region = live
            .iter()
            .zip(&restored)
            .find_map(|(r, done)| {
                let r = (*r)?;
                let got: u64 = done.iter().map(|w| w.count_ones() as u64).sum();
                (got != r.page_count(ps as u32)).then_some(r)
            })
            .expect("some region is incomplete");
        return Err(ReadError::format(
            catalog
                .store()
                .describe(&version_name(chain[chain.len() - 1].version)),
            FormatError::Corrupt {
                offset: 0,
                what: format!(
                    "region {} has pages stored in no version of the chain",
                    region.id
                ),
            },
        )
        .into());
    }
    Ok(report)
}

/// The part of stored page `page` that lies inside the region: (offset in the region,
/// bytes), or None when none does.
fn inside<'b>(r: &RegionEntry, ps: usize, page: u64, bytes: &'b [u8]) -> Option<(u64, &'b [u8])> {
    let page_start = (page * ps as u64) as i128 - r.page_offset as i128;
    let lo = page_start.max(0);
    let hi = (page_start + ps as i128).min(r.length as i128);
    if lo >= hi {
        return None;
    }
    let from = (lo - page_start) as usize;
    let to = (hi - page_start) as usize;
    Some((lo as u64, &bytes[from..to]))
}
