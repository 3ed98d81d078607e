//! Reading one window: one scattered read, every page checked against its CRC, then the
//! bytes that went through the buffer delivered; a large version's windows read by two
//! threads.

use super::plan::{inside, Part, Window};
use super::Deliver;
use crate::error::ReadError;
use ickpt_format::{Piece, ReadAt, RegionEntry};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Whether a second thread can run beside this one.
pub(super) fn two_cores() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
}

/// What a read needs besides its window.
pub(super) struct Ctx<'c> {
    pub(super) reader: &'c (dyn ReadAt + Sync),
    pub(super) file: &'c str,
    pub(super) ps: usize,
    pub(super) live: &'c [Option<&'c RegionEntry>],
    /// The version's page CRC table.
    pub(super) crcs: &'c [u32],
}

impl Window<'_> {
    /// Read the window, check every page's CRC, then deliver what went through the buffer:
    /// into its memory, or to `deliver`.
    pub(super) fn read<E: From<ReadError>>(
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
pub(super) fn read_in_parallel(cx: &Ctx<'_>, windows: &mut [Window<'_>]) -> Result<(), ReadError> {
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
