//! Restart by reverse scan (the hybrid full/incremental paper, Fig. 5): from the newest
//! version back to its full version, each page is taken from the newest version that stored
//! it and read exactly once.
//!
//! Each version's file is read once, front to back, in windows: a window is one scattered
//! read ([`ickpt_format::ReadAt::read_pieces_at`], `preadv` on a real file) of at most
//! [`WINDOW`] bytes holding the pages still needed and the short gaps between them (pages a
//! newer version gave, regions not selected), which are read past, since a system call costs
//! more than a few pages copied; a gap longer than [`MAX_GAP`] ends the window. A
//! [`Sink::Memory`] has the pages read straight into the regions' memory, with no staging
//! copy, two threads reading a large version's windows; a [`Sink::Copy`] is handed bytes from
//! a buffer once they are checked.
//!
//! Here: the scan, which picks each version's pages. Beside it: planning a version's windows
//! (`plan.rs`) and reading them (`window.rs`).

mod plan;
mod window;

use crate::error::ReadError;
use crate::read::catalog::{Catalog, OpenVersion};
use crate::store::version_name;
use crate::track::bitmap;
use ickpt_format::{FormatError, PageView, RegionEntry};
use plan::{inside_range, whole_inside, Pages, Plan};
use std::collections::HashMap;
use window::{read_in_parallel, two_cores, Ctx};

/// Most bytes one read covers: large enough that calls cost nothing next to the copy, small
/// enough that the checksum pass finds the bytes still in the cache.
const WINDOW: usize = 2 << 20;
/// Longest gap read past rather than ending the window: a system call costs about as much as
/// copying two pages (measured, 256 MiB full + 9 increments: 1-2 pages best, 4 or more slower).
const MAX_GAP: usize = 8 << 10;
/// A version with less than a window to read into memory is read by one thread: one read,
/// nothing to share. Not larger: 16 MiB left the older increments of a chain on one thread,
/// and 2 MiB cut a full + 9 chain's restore by a median 9% (docs/benchmarks.md).
const PARALLEL_MIN: usize = WINDOW;

/// Where restored bytes go. Every byte of every selected region is delivered exactly once.
pub enum Sink<'a, E> {
    /// The regions' memory, by index into the newest version's region table (None for a
    /// region not selected), each exactly as long as the region: pages are read straight
    /// into it and then checked, so a page failing its checksum has left its bytes there and
    /// the scan's error says the memory holds no version.
    Memory(Vec<Option<&'a mut [u8]>>),
    /// Called with (index into the newest version's region table, byte offset in the region,
    /// bytes), only with bytes whose checksum was checked. Its error (a tool's writing files)
    /// ends the scan and is returned.
    Copy(Deliver<'a, E>),
    /// Nothing is read: called with (version, first index in its page-CRC table, pages) for
    /// each stretch of pages the scan would read, so that a check of the store (`verify`)
    /// follows exactly the pages a restore reads. Its error ends the scan.
    Plan(Visit<'a, E>),
}

/// Takes the stretches of pages a scan would read: (version, first index in its page-CRC
/// table, pages).
pub type Visit<'a, E> = &'a mut dyn FnMut(u64, usize, usize) -> Result<(), E>;

/// Takes checked bytes: (index into the newest version's region table, byte offset in the
/// region, bytes).
pub type Deliver<'a, E> = &'a mut dyn FnMut(usize, u64, &[u8]) -> Result<(), E>;

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
    mut sink: Sink<'_, E>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScanReport, E> {
    let newest = &chain.first().expect("a chain has a newest version").meta;
    let ps = newest.page_size() as usize;
    let live: Vec<Option<&RegionEntry>> = newest
        .regions
        .iter()
        .map(|r| want(r).then_some(r))
        .collect();
    if let Sink::Memory(memory) = &sink {
        assert_eq!(memory.len(), live.len(), "one memory slot per region");
        for (m, r) in memory.iter().zip(&live) {
            if let Some(r) = r {
                let len = m.as_ref().map(|m| m.len() as u64);
                assert_eq!(
                    len,
                    Some(r.length),
                    "memory for region {} as long as it",
                    r.id
                );
            }
        }
    }
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
    let mut staging = Vec::new();

    for ov in chain {
        if remaining == 0 {
            break;
        }
        let meta = &ov.meta;
        let file = catalog.store().describe(&version_name(ov.version));
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
        let to_memory = matches!(sink, Sink::Memory(_));
        let mut plan = Plan::default();
        let mut crc_at = 0usize;
        for (run, crcs) in meta.runs_with_crcs() {
            let first_crc = crc_at;
            crc_at += crcs.len();
            plan.move_to(run.data_offset);
            let Some(li) = map[run.region_index as usize] else {
                plan.skip(crcs.len() * ps);
                continue;
            };
            let region = live[li].expect("mapped regions are live");
            let done = &mut restored[li];
            let mut i = 0usize;
            while i < crcs.len() {
                let page = run.first_page as usize + i;
                if bitmap::is_set(done, page) {
                    plan.skip(ps);
                    i += 1;
                    continue;
                }
                // The next stretch of pages not restored yet, at most a window, of one kind:
                // into memory pages wholly inside the region go straight there, a page the
                // region only partly covers goes through the buffer alone.
                let direct = to_memory && whole_inside(region, ps, page as u64);
                let mut n = 1;
                if direct || !to_memory {
                    while i + n < crcs.len()
                        && n < (WINDOW / ps).max(1)
                        && !bitmap::is_set(done, page + n)
                        && (!to_memory || whole_inside(region, ps, (page + n) as u64))
                    {
                        n += 1;
                    }
                }
                for p in page..page + n {
                    bitmap::set(done, p);
                }
                // Region bytes from the first page's on (a direct stretch's pages are whole).
                let memory = inside_range(region, ps, page as u64)
                    .filter(|_| to_memory)
                    .map(|(off, from, to)| (li, off, if direct { n * ps } else { to - from }));
                let pages = Pages {
                    li,
                    page: page as u64,
                    crc_at: first_crc + i,
                    direct,
                };
                plan.take(pages, n * ps, memory);
                remaining -= n as u64;
                i += n;
            }
        }
        let read_here = plan.pages(ps);
        if let Sink::Plan(visit) = &mut sink {
            for p in plan.windows.iter().flat_map(|w| &w.parts) {
                if let Some(g) = p.pages {
                    visit(ov.version, g.crc_at, p.len / ps)?;
                }
            }
            report.pages_per_version.push((ov.version, read_here));
            report.pages += read_here;
            continue;
        }
        let reopened;
        let reader = match ov.file() {
            Some(f) => f,
            None => {
                reopened = catalog.reopen(ov)?;
                &*reopened
            }
        };
        // Each file is read once, front to back (a hint: readahead grows).
        reader.advise_sequential();
        // Pages where the run index puts them, whatever the frames store (format 6).
        let view = PageView::new(meta, reader);
        let ctx = Ctx {
            reader: &view,
            file: &file,
            ps,
            live: &live,
            crcs: &meta.page_crcs,
        };
        match &mut sink {
            Sink::Memory(memory) => {
                let mut windows = plan.carve(memory);
                if plan.bytes >= PARALLEL_MIN && windows.len() > 1 && two_cores() {
                    read_in_parallel(&ctx, &mut windows)?;
                } else {
                    for w in &mut windows {
                        w.read::<ReadError>(&ctx, &mut staging, &mut |_, _, _| {
                            unreachable!("a memory sink takes its bytes directly")
                        })?;
                    }
                }
                progress(total - remaining, total);
            }
            Sink::Copy(deliver) => {
                let mut delivered = total - remaining - read_here;
                for w in &mut plan.windows {
                    w.read(&ctx, &mut staging, *deliver)?;
                    delivered += w.pages(ps);
                    progress(delivered, total);
                }
            }
            Sink::Plan(_) => unreachable!("a plan reads nothing"),
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
