//! A version's windows, planned in file order before any is read: which stretches of pages
//! each read takes, which bytes it reads past, and where in memory each stretch's region
//! bytes go; and where a stored page meets its region.

use super::{MAX_GAP, WINDOW};
use ickpt_format::RegionEntry;

/// The part of stored page `page` that lies inside the region: (offset in the region,
/// bytes), or None when none does.
pub(super) fn inside<'b>(
    r: &RegionEntry,
    ps: usize,
    page: u64,
    bytes: &'b [u8],
) -> Option<(u64, &'b [u8])> {
    let (off, from, to) = inside_range(r, ps, page)?;
    Some((off, &bytes[from..to]))
}

/// Where stored page `page` meets the region: (offset in the region, the page's bytes
/// from..to inside it), or None when they do not meet.
pub(super) fn inside_range(r: &RegionEntry, ps: usize, page: u64) -> Option<(u64, usize, usize)> {
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
pub(super) fn whole_inside(r: &RegionEntry, ps: usize, page: u64) -> bool {
    inside_range(r, ps, page).is_some_and(|(_, from, to)| from == 0 && to == ps)
}

/// Pages of live region `li` from `page`, stored back to back, their CRCs from `crc_at` in
/// the version's table.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pages {
    pub(super) li: usize,
    pub(super) page: u64,
    pub(super) crc_at: usize,
    /// Read straight into memory (whole pages inside the region); otherwise into the buffer,
    /// and delivered from there once checked.
    pub(super) direct: bool,
}

/// One stretch of a window: pages, or (None) bytes read past.
pub(super) struct Part<'m> {
    pub(super) pages: Option<Pages>,
    pub(super) len: usize,
    /// Where in memory the pages' region bytes go (a memory sink).
    pub(super) dst: Option<&'m mut [u8]>,
}

/// One read: `len` bytes from `offset`.
pub(super) struct Window<'m> {
    pub(super) offset: u64,
    pub(super) len: usize,
    pub(super) parts: Vec<Part<'m>>,
}

/// A version's windows, planned in file order before any is read.
#[derive(Default)]
pub(super) struct Plan {
    pub(super) windows: Vec<Window<'static>>,
    /// File offset the next part starts at, and bytes read past since the last pages taken.
    pos: u64,
    gap: usize,
    /// Bytes of pages to read.
    pub(super) bytes: usize,
    /// Memory each part needs: (live region, offset in it, length, window, part).
    memory: Vec<(usize, u64, usize, usize, usize)>,
}

impl Plan {
    /// The next run starts at `offset`: a gap (runs tile the data section, so never in a
    /// well-formed file) ends the window.
    pub(super) fn move_to(&mut self, offset: u64) {
        if offset != self.pos {
            self.pos = offset;
            self.gap = MAX_GAP + 1;
        }
    }

    pub(super) fn skip(&mut self, len: usize) {
        self.pos += len as u64;
        self.gap = self.gap.saturating_add(len);
    }

    /// Read `len` bytes of `pages` next, whose region bytes go to memory at `memory` (live
    /// region, offset, length) for a memory sink.
    pub(super) fn take(&mut self, pages: Pages, len: usize, memory: Option<(usize, u64, usize)>) {
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

    pub(super) fn pages(&self, ps: usize) -> u64 {
        self.windows.iter().map(|w| w.pages(ps)).sum()
    }

    /// The windows, each part given its piece of `memory`. Parts never overlap (each page is
    /// taken once), so the pieces are disjoint slices cut from each region's.
    pub(super) fn carve<'m>(&mut self, memory: &'m mut [Option<&mut [u8]>]) -> Vec<Window<'m>> {
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
    pub(super) fn pages(&self, ps: usize) -> u64 {
        self.parts
            .iter()
            .filter(|p| p.pages.is_some())
            .map(|p| (p.len / ps) as u64)
            .sum()
    }
}
