//! The next version's file while pages are pre-copied into it (PRWIP). The format is
//! unchanged: a version file's page data is a log in which each page appears once, so a
//! pre-copied page gets a fixed *slot* in the log, right after a prefix left as zeros (the
//! header and region table, written last by the commit), and a page written again after its
//! pre-copy is copied again *into its slot* (`StoreWriter::overwrite_at`), never appended. At
//! the checkpoint the commit takes the file over: its slots become the first runs of the
//! version (raw frames), the pages the checkpoint stores that have a slot overwrite it, the
//! others are appended as in any commit.

use crate::store::{version_name, Store, StoreWriter};
use crate::track::{ScratchVec, TrackedRegion};
use ickpt_format::{Codec, Frame, Header, VersionLayout, FORMAT_VERSION};
use std::collections::HashMap;
use std::io;

/// Pages gathered before one append: 64 pages of 4 KiB, as a commit's batches.
const BATCH_PAGES: usize = 64;

/// Most pages one raw frame holds (`MAX_FRAME_BYTES`).
fn frame_pages(ps: usize) -> usize {
    (ickpt_format::limits::MAX_FRAME_BYTES as usize / ps).max(1)
}

pub(crate) struct PreFile {
    /// The version the file is to become.
    pub version: u64,
    writer: Box<dyn StoreWriter>,
    /// Where the file is, for errors.
    pub file: String,
    ps: usize,
    /// Pre-copied pages in slot order. In scratch memory: under `ickpt run` a capture of the
    /// process copies ickpt's heap wherever it changed since the last capture, and this list
    /// (16 bytes a page) changes at every version while only the commit after the stop reads
    /// it. A restart from that capture forgets the file (`PreCopy::after_restart`), and with
    /// it the list, which it brought back as zeros. (The slot map stays on the heap: in
    /// scratch memory, a word per page of each region, it made the stop of a 256 MiB program
    /// 4-8% longer in three paired runs, for reasons not found.)
    order: ScratchVec<Slotted>,
    /// Where each pre-copied page is: what the commit takes over.
    pub slots: Slots,
    /// Slots written to the store; those after are in `batch`.
    flushed: usize,
    batch: Vec<u8>,
    /// A page copied again over a slot already written.
    scratch: Vec<u8>,
}

/// A pre-copied page: its region, its page there, and its CRC as last copied.
#[derive(Clone, Copy)]
struct Slotted {
    id: u64,
    page: u32,
    crc: u32,
}

/// Where each pre-copied page is in the file: per region, its page count when the file was
/// started and each pre-copied page's slot (its position in the version's page order). A map
/// of the pages copied rather than a word per page of the region: under `ickpt run` this
/// lives in ickpt's own heap while the process is captured, and a dense array (4 MB at 4 GiB
/// tracked, made again each version) was a third of the heap pages each capture copied.
pub(crate) struct Slots {
    of: HashMap<u64, RegionSlots>,
    /// Bytes left for header and region table before the first slot: the data offset of a
    /// version with the regions there were when the file was started. The commit takes the
    /// file over only if its version has as many bytes of prefix.
    pub prefix_len: u64,
}

/// One region's slots ([`Slots`]).
pub(crate) struct RegionSlots {
    /// The region's pages when its first page was copied.
    npages: usize,
    slot_of: HashMap<u32, u32>,
}

/// Whether `page` has a slot in `of` (a region's slots, `Slots::of_region`).
pub(crate) fn has_slot(of: &RegionSlots, page: usize) -> bool {
    u32::try_from(page).is_ok_and(|p| of.slot_of.contains_key(&p))
}

impl Slots {
    /// The slots of region `id`'s pages, if any of them was pre-copied.
    pub fn of_region(&self, id: u64) -> Option<&RegionSlots> {
        self.of.get(&id)
    }

    /// The slot of `page` of region `id`.
    pub fn of(&self, id: u64, page: usize) -> Option<usize> {
        let of = self.of_region(id)?;
        of.slot_of
            .get(&u32::try_from(page).ok()?)
            .map(|&s| s as usize)
    }

    /// Where slot `s` starts in the file.
    pub fn offset(&self, s: usize, ps: usize) -> u64 {
        self.prefix_len + (s * ps) as u64
    }

    /// Give every pre-copied page back to its region (`tr_of` by id), for a checkpoint to
    /// store: the file will not become the version, or did not.
    pub fn give_back(&self, tr_of: impl Fn(u64) -> Option<std::sync::Arc<TrackedRegion>>) {
        for (id, of) in &self.of {
            let Some(tr) = tr_of(*id) else { continue };
            for page in of
                .slot_of
                .keys()
                .map(|&p| p as usize)
                .filter(|&p| p < tr.npages)
            {
                crate::track::protocol::committer::give_back_page(&tr, page);
            }
        }
    }
}

/// What writing a page into the file did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Copied {
    /// Into a new slot.
    New,
    /// Over its own slot: the page had been pre-copied before (written twice).
    Again,
}

impl PreFile {
    /// Drop everything but the writer, which is forgotten: neither closed nor cleaned up.
    pub fn forget_writer(self) {
        std::mem::forget(self.writer);
    }

    /// Start `version`'s file in `store`, with room for the prefix of `regions` regions.
    pub fn create(store: &dyn Store, version: u64, regions: usize, ps: usize) -> io::Result<Self> {
        let name = version_name(version);
        let mut writer = store.create(&name)?;
        if !writer.can_overwrite() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this store cannot overwrite a file being written, which pre-copy needs",
            ));
        }
        let prefix_len = Header::data_offset_for(
            FORMAT_VERSION,
            regions.try_into().unwrap_or(u32::MAX),
            ps as u32,
        );
        writer.write_all(&vec![0; prefix_len as usize])?;
        Ok(PreFile {
            version,
            writer,
            file: store.describe(&name),
            ps,
            order: ScratchVec::default(),
            slots: Slots {
                of: HashMap::new(),
                prefix_len,
            },
            flushed: 0,
            batch: Vec::with_capacity(BATCH_PAGES * ps),
            scratch: vec![0; ps],
        })
    }

    /// Room for `more` pages' places in the list: one mapping made for a pass's pages rather
    /// than one at each doubling.
    pub fn reserve(&mut self, more: usize) -> io::Result<()> {
        self.order.reserve(more)
    }

    /// Pages pre-copied into the file.
    pub fn pages(&self) -> usize {
        self.order.len()
    }

    /// Copy `page` of `tr` into the file: into its slot if it has one, else a new slot.
    /// The caller write-protected the page first, so a write that races the copy is seen
    /// as a write after it.
    pub fn copy(&mut self, tr: &TrackedRegion, page: usize) -> io::Result<Copied> {
        let ps = self.ps;
        let (s, dst, copied) = match self.slots.of(tr.id, page) {
            // Written already: over its place in the file.
            Some(s) if s < self.flushed => {
                tr.copy_page_out(page, &mut self.scratch);
                self.writer
                    .overwrite_at(self.slots.offset(s, ps), &self.scratch)?;
                (s, &self.scratch[..], Copied::Again)
            }
            // Still gathered: over its place in the batch.
            Some(s) => {
                let at = (s - self.flushed) * ps;
                let dst = &mut self.batch[at..at + ps];
                tr.copy_page_out(page, dst);
                (s, &*dst, Copied::Again)
            }
            None => {
                if self.batch.len() == BATCH_PAGES * ps {
                    self.flush()?;
                }
                let s = self.order.len();
                self.order.push(Slotted {
                    id: tr.id,
                    page: page as u32,
                    crc: 0,
                })?;
                self.slots
                    .of
                    .entry(tr.id)
                    .or_insert_with(|| RegionSlots {
                        npages: tr.npages,
                        slot_of: HashMap::new(),
                    })
                    .slot_of
                    .insert(page as u32, s as u32);
                let at = self.batch.len();
                self.batch.reserve_exact(BATCH_PAGES * ps - at);
                self.batch.resize(at + ps, 0);
                let dst = &mut self.batch[at..];
                tr.copy_page_out(page, dst);
                (s, &*dst, Copied::New)
            }
        };
        self.order.as_mut_slice()[s].crc = ickpt_format::crc(dst);
        Ok(copied)
    }

    /// Write the gathered pages.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        self.writer.write_all(&self.batch)?;
        self.flushed += self.batch.len() / self.ps;
        self.batch.clear();
        Ok(())
    }

    /// Write the gathered pages, and let the batch's memory go until the next pass: between
    /// passes the batch holds nothing, and a whole-process checkpoint stops the program
    /// between two passes, where a batch kept would be 64 pages of ickpt's own heap
    /// rewritten since the last capture, for it to compare and store (a freed block this
    /// large gives its pages back under `ickpt run`).
    pub fn end_pass(&mut self) -> io::Result<()> {
        self.flush()?;
        self.batch = Vec::new();
        Ok(())
    }

    /// Every pre-copied page, as (region id, page).
    pub fn each_slot(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        self.order
            .as_slice()
            .iter()
            .map(|s| (s.id, s.page as usize))
    }

    /// Whether every pre-copied page belongs to a region of `regions` of the same size (a
    /// region unprotected since, or protected again under its id, leaves slots the version
    /// could not index).
    pub fn fits(&self, regions: &[(u64, usize)]) -> bool {
        self.slots.of.iter().all(|(id, of)| {
            regions
                .iter()
                .any(|&(rid, npages)| rid == *id && npages == of.npages)
        })
    }

    /// The writer, the pre-copied pages pushed into `layout` as its first pages (raw
    /// frames), the bytes written, and where each page is. `index_of`: the layout's region
    /// index for a region id. Flushed before (`PreCopy::take_file`).
    pub fn into_commit(
        self,
        layout: &mut VersionLayout,
        index_of: impl Fn(u64) -> u32,
    ) -> (Box<dyn StoreWriter>, u64, Slots) {
        debug_assert!(self.batch.is_empty(), "flushed before the commit takes it");
        for s in self.order.as_slice() {
            layout.push_page(index_of(s.id), s.page as u64, s.crc);
        }
        let per = frame_pages(self.ps);
        let mut left = self.order.len();
        while left > 0 {
            let n = left.min(per);
            layout.push_frame(Frame {
                page_count: n as u32,
                codec: Codec::Raw,
                stored_len: (n * self.ps) as u32,
                crc: 0,
            });
            left -= n;
        }
        let end = self.slots.offset(self.order.len(), self.ps);
        (self.writer, end, self.slots)
    }
}
