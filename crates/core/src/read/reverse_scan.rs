//! Restart by reverse scan (paper 002, Fig. 5): from the newest version back to its full
//! version, each page is taken from the newest version that stored it and read exactly once.
//!
//! Each version's file is read once, front to back, in windows: a window is one scattered
//! read ([`ickpt_format::ReadAt::read_pieces_at`], `preadv` on a real file) of at most [`WINDOW`] bytes
//! holding the pages still needed and the short gaps between them (pages a newer version gave,
//! regions not selected), which are read past, since a system call costs more than a few pages
//! copied; a gap longer than [`MAX_GAP`] ends the window. A [`Sink::Memory`] has the pages
//! read straight into the regions' memory, with no staging copy, two threads reading a large
//! version's windows; a [`Sink::Copy`] is handed bytes from a buffer once they are checked.

use crate::error::ReadError;
use crate::read::catalog::{Catalog, OpenVersion};
use crate::store::version_name;
use crate::track::bitmap;
use ickpt_format::{FormatError, PageView, Piece, ReadAt, RegionEntry};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Most bytes one read covers: large enough that calls cost nothing next to the copy, small
/// enough that the checksum pass finds the bytes still in the cache.
const WINDOW: usize = 2 << 20;
/// Longest gap read past rather than ending the window: a system call costs about as much as
/// copying two pages (measured, 256 MiB full + 9 increments: 1-2 pages best, 4 or more slower).
const MAX_GAP: usize = 8 << 10;
/// A version with less than a window to read into memory is read by one thread: one read,
/// nothing to share. Was 16 MiB, which left the older increments of a chain on one thread:
/// 2 MiB cut a full + 9 chain's restore by a median 9% (issue 11, docs/benchmarks.md).
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

/// The part of stored page `page` that lies inside the region: (offset in the region,
/// bytes), or None when none does.
fn inside<'b>(r: &RegionEntry, ps: usize, page: u64, bytes: &'b [u8]) -> Option<(u64, &'b [u8])> {
    let (off, from, to) = inside_range(r, ps, page)?;
    Some((off, &bytes[from..to]))
}

/// Where stored page `page` meets the region: (offset in the region, the page's bytes
/// from..to inside it), or None when they do not meet.
fn inside_range(r: &RegionEntry, ps: usize, page: u64) -> Option<(u64, usize, usize)> {
    let page_start = (page * ps as u64) as i128 - r.page_offset as i128;
    let lo = page_start.max(0);
    let hi = (page_start + ps as i128).min(r.length as i128);
    if lo >= hi {
        return None;
    }
    Some((
        lo as u64,
        (lo - page_start) as usize,
        (hi - page_start) as usize,
    ))
}

/// Whether stored page `page` lies wholly inside the region.
fn whole_inside(r: &RegionEntry, ps: usize, page: u64) -> bool {
    inside_range(r, ps, page).is_some_and(|(_, from, to)| from == 0 && to == ps)
}

/// Whether a second thread can run beside this one.
fn two_cores() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
}

/// What a read needs besides its window.
struct Ctx<'c> {
    reader: &'c (dyn ReadAt + Sync),
    file: &'c str,
    ps: usize,
    live: &'c [Option<&'c RegionEntry>],
    /// The version's page CRC table.
    crcs: &'c [u32],
}

/// Pages of live region `li` from `page`, stored back to back, their CRCs from `crc_at` in
/// the version's table.
#[derive(Debug, Clone, Copy)]
struct Pages {
    li: usize,
    page: u64,
    crc_at: usize,
    /// Read straight into memory (whole pages inside the region); otherwise into the buffer,
    /// and delivered from there once checked.
    direct: bool,
}

/// One stretch of a window: pages, or (None) bytes read past.
struct Part<'m> {
    pages: Option<Pages>,
    len: usize,
    /// Where in memory the pages' region bytes go (a memory sink).
    dst: Option<&'m mut [u8]>,
}

/// One read: `len` bytes from `offset`.
struct Window<'m> {
    offset: u64,
    len: usize,
    parts: Vec<Part<'m>>,
}

/// A version's windows, planned in file order before any is read.
#[derive(Default)]
struct Plan {
    windows: Vec<Window<'static>>,
    /// File offset the next part starts at, and bytes read past since the last pages taken.
    pos: u64,
    gap: usize,
    /// Bytes of pages to read.
    bytes: usize,
    /// Memory each part needs: (live region, offset in it, length, window, part).
    memory: Vec<(usize, u64, usize, usize, usize)>,
}

impl Plan {
    /// The next run starts at `offset`: a gap (runs tile the data section, so never in a
    /// well-formed file) ends the window.
    fn move_to(&mut self, offset: u64) {
        if offset != self.pos {
            self.pos = offset;
            self.gap = MAX_GAP + 1;
        }
    }

    fn skip(&mut self, len: usize) {
        self.pos += len as u64;
        self.gap = self.gap.saturating_add(len);
    }

    /// Read `len` bytes of `pages` next, whose region bytes go to memory at `memory` (live
    /// region, offset, length) for a memory sink.
    fn take(&mut self, pages: Pages, len: usize, memory: Option<(usize, u64, usize)>) {
        let joins = self
            .windows
            .last()
            .is_some_and(|w| self.gap <= MAX_GAP && w.len + self.gap + len <= WINDOW);
        if !joins {
            self.windows.push(Window {
                offset: self.pos,
                len: 0,
                parts: Vec::new(),
            });
        }
        let wi = self.windows.len() - 1;
        let w = &mut self.windows[wi];
        if joins && self.gap > 0 {
            w.parts.push(Part {
                pages: None,
                len: self.gap,
                dst: None,
            });
            w.len += self.gap;
        }
        if let Some((li, off, n)) = memory {
            self.memory.push((li, off, n, wi, w.parts.len()));
        }
        w.parts.push(Part {
            pages: Some(pages),
            len,
            dst: None,
        });
        w.len += len;
        self.pos += len as u64;
        self.gap = 0;
        self.bytes += len;
    }

    fn pages(&self, ps: usize) -> u64 {
        self.windows.iter().map(|w| w.pages(ps)).sum()
    }

    /// The windows, each part given its piece of `memory`. Parts never overlap (each page is
    /// taken once), so the pieces are disjoint slices cut from each region's.
    fn carve<'m>(&mut self, memory: &'m mut [Option<&mut [u8]>]) -> Vec<Window<'m>> {
        let mut windows: Vec<Window<'m>> = std::mem::take(&mut self.windows)
            .into_iter()
            .map(|w| Window {
                offset: w.offset,
                len: w.len,
                parts: w
                    .parts
                    .into_iter()
                    .map(|p| Part {
                        pages: p.pages,
                        len: p.len,
                        dst: None,
                    })
                    .collect(),
            })
            .collect();
        self.memory.sort_unstable_by_key(|&(li, off, ..)| (li, off));
        let mut rest: Vec<(u64, &'m mut [u8])> = memory
            .iter_mut()
            .map(|m| (0, m.as_deref_mut().unwrap_or_default()))
            .collect();
        for &(li, off, len, wi, pi) in &self.memory {
            let (at, left) = &mut rest[li];
            let (_, tail) = std::mem::take(left).split_at_mut((off - *at) as usize);
            let (piece, tail) = tail.split_at_mut(len);
            (*at, *left) = (off + len as u64, tail);
            windows[wi].parts[pi].dst = Some(piece);
        }
        windows
    }
}

impl Window<'_> {
    fn pages(&self, ps: usize) -> u64 {
        self.parts
            .iter()
            .filter(|p| p.pages.is_some())
            .map(|p| (p.len / ps) as u64)
            .sum()
    }

    /// Read the window, check every page's CRC, then deliver what went through the buffer:
    /// into its memory, or to `deliver`.
    fn read<E: From<ReadError>>(
        &mut self,
        cx: &Ctx<'_>,
        staging: &mut Vec<u8>,
        deliver: Deliver<'_, E>,
    ) -> Result<(), E> {
        let buffered = |p: &Part| p.pages.is_some_and(|g| !g.direct);
        let staged: usize = self
            .parts
            .iter()
            .filter(|p| buffered(p))
            .map(|p| p.len)
            .sum();
        if staging.len() < staged {
            staging.resize(staged, 0);
        }
        let mut rest = &mut staging[..staged];
        let mut pieces: Vec<Piece> = Vec::with_capacity(self.parts.len());
        for p in &mut self.parts {
            pieces.push(match p.pages {
                None => Piece::Skip(p.len),
                Some(g) if g.direct => Piece::Keep(p.dst.as_deref_mut().expect("carved")),
                Some(_) => {
                    let (piece, tail) = std::mem::take(&mut rest).split_at_mut(p.len);
                    rest = tail;
                    Piece::Keep(piece)
                }
            });
        }
        cx.reader
            .read_pieces_at(&mut pieces, self.offset)
            .map_err(|e| match ickpt_format::format_error_in(&e) {
                Some(damage) => ReadError::format(cx.file, damage),
                None => ReadError::io(cx.file, "read", e),
            })?;
        drop(pieces);
        let (mut at, mut from) = (self.offset, 0usize);
        for p in &mut self.parts {
            let offset = at;
            at += p.len as u64;
            let Some(g) = p.pages else { continue };
            let staged = from..from + p.len;
            let bytes: &[u8] = if g.direct {
                p.dst.as_deref().expect("carved")
            } else {
                from += p.len;
                &staging[staged.clone()]
            };
            let region = cx.live[g.li].expect("pages of live regions only");
            let npages = bytes.len() / cx.ps;
            let crcs = &cx.crcs[g.crc_at..g.crc_at + npages];
            ickpt_format::check_pages(bytes, cx.ps, crcs, offset, g.page, region.id)
                .map_err(|e| ReadError::format(cx.file, e))?;
            if g.direct {
                continue;
            }
            for (k, page_bytes) in staging[staged].chunks_exact(cx.ps).enumerate() {
                if let Some((off, b)) = inside(region, cx.ps, g.page + k as u64, page_bytes) {
                    match p.dst.as_deref_mut() {
                        Some(d) => d.copy_from_slice(b),
                        None => deliver(g.li, off, b)?,
                    }
                }
            }
        }
        Ok(())
    }
}

/// Read `windows` (into memory) on this thread and one more, each taking the next window in
/// file order. The error is the one a single thread would have met first: every window before
/// a failing one was taken before it, and a thread finishes the window it took.
fn read_in_parallel(cx: &Ctx<'_>, windows: &mut [Window<'_>]) -> Result<(), ReadError> {
    let next = Mutex::new(windows.iter_mut().enumerate());
    let failed = AtomicBool::new(false);
    let work = || -> Option<(usize, ReadError)> {
        let mut staging = Vec::new();
        loop {
            if failed.load(Ordering::Relaxed) {
                return None;
            }
            let (i, w) = next.lock().unwrap_or_else(|e| e.into_inner()).next()?;
            let read = w.read::<ReadError>(cx, &mut staging, &mut |_, _, _| {
                unreachable!("a memory sink takes its bytes directly")
            });
            if let Err(e) = read {
                failed.store(true, Ordering::Relaxed);
                return Some((i, e));
            }
        }
    };
    let (mine, theirs) = std::thread::scope(|s| {
        // Without a second thread (none to be had), this one reads every window.
        let helper = std::thread::Builder::new().spawn_scoped(s, work).ok();
        let mine = work();
        let theirs = helper.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        (mine, theirs.flatten())
    });
    match [mine, theirs].into_iter().flatten().min_by_key(|(i, _)| *i) {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}
