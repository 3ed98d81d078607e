//! The next version's file while pages are pre-copied into it (paper 004). The format is
//! unchanged: a version file's page data is a log in which each page appears once, so a
//! pre-copied page gets a fixed *slot* in the log, right after a prefix left as zeros (the
//! header and region table, written last by the commit), and a page written again after its
//! pre-copy is copied again *into its slot* (`StoreWriter::overwrite_at`), never appended. At
//! the checkpoint the commit takes the file over: its slots become the first runs of the
//! version (raw frames), the pages the checkpoint stores that have a slot overwrite it, the
//! others are appended as in any commit.

use crate::store::{version_name, Store, StoreWriter};
use crate::track::TrackedRegion;
use ickpt_format::{Codec, Frame, Header, VersionLayout, FORMAT_VERSION};
use std::collections::HashMap;
use std::io;

/// A page with no slot.
const NONE: u32 = u32::MAX;

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
    /// Bytes left for header and region table: the data offset of a version of
    /// `regions` regions. The commit takes the file over only if its version has as many
    /// bytes of prefix.
    pub prefix_len: u64,
    ps: usize,
    /// Pre-copied pages in slot order, as (region id, page).
    slots: Vec<(u64, u32)>,
    /// Their CRCs as last copied.
    crcs: Vec<u32>,
    /// Per region, each page's slot (NONE: not pre-copied). 4 bytes a page.
    slot_of: HashMap<u64, Vec<u32>>,
    /// Slots written to the store; those after are in `batch`.
    flushed: usize,
    batch: Vec<u8>,
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
            prefix_len,
            ps,
            slots: Vec::new(),
            crcs: Vec::new(),
            slot_of: HashMap::new(),
            flushed: 0,
            batch: Vec::with_capacity(BATCH_PAGES * ps),
        })
    }

    /// Pages pre-copied into the file.
    pub fn pages(&self) -> usize {
        self.slots.len()
    }

    /// The slot of `page` of region `id`, if it was pre-copied.
    pub fn slot(&self, id: u64, page: usize) -> Option<usize> {
        let s = *self.slot_of.get(&id)?.get(page)?;
        (s != NONE).then_some(s as usize)
    }

    /// Copy `page` of `tr` into the file: into its slot if it has one, else a new slot.
    /// The caller write-protected the page first, so a write that races the copy is seen
    /// as a write after it.
    pub fn copy(&mut self, tr: &TrackedRegion, page: usize) -> io::Result<Copied> {
        let ps = self.ps;
        let slot = self.slot(tr.id, page);
        let (at, copied) = match slot {
            Some(s) if s >= self.flushed => ((s - self.flushed) * ps, Copied::Again),
            Some(s) => {
                let mut buf = std::mem::take(&mut self.batch);
                let start = buf.len();
                buf.resize(start + ps, 0);
                tr.copy_page_out(page, &mut buf[start..]);
                let crc = ickpt_format::crc(&buf[start..]);
                let r = self
                    .writer
                    .overwrite_at(self.prefix_len + (s * ps) as u64, &buf[start..]);
                buf.truncate(start);
                self.batch = buf;
                r?;
                self.crcs[s] = crc;
                return Ok(Copied::Again);
            }
            None => {
                if self.batch.len() == BATCH_PAGES * ps {
                    self.flush()?;
                }
                let at = self.batch.len();
                self.batch.resize(at + ps, 0);
                let s = self.slots.len();
                self.slots.push((tr.id, page as u32));
                self.crcs.push(0);
                let of = self
                    .slot_of
                    .entry(tr.id)
                    .or_insert_with(|| vec![NONE; tr.npages]);
                of[page] = s as u32;
                (at, Copied::New)
            }
        };
        let dst = &mut self.batch[at..at + ps];
        tr.copy_page_out(page, dst);
        let crc = ickpt_format::crc(dst);
        let s = slot.unwrap_or(self.slots.len() - 1);
        self.crcs[s] = crc;
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

    /// Every pre-copied page, as (region id, page).
    pub fn each_slot(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        self.slots.iter().map(|&(id, p)| (id, p as usize))
    }

    /// Whether every pre-copied page belongs to a region of `regions` of the same size (a
    /// region unprotected since, or protected again under its id, leaves slots the version
    /// could not index).
    pub fn fits(&self, regions: &[(u64, usize)]) -> bool {
        self.slot_of.iter().all(|(id, of)| {
            regions
                .iter()
                .any(|&(rid, npages)| rid == *id && npages == of.len())
        })
    }

    /// The writer, the pre-copied pages pushed into `layout` as its first pages (raw
    /// frames), the bytes written, and each page's slot (its position in the layout's page
    /// order). `index_of`: the layout's region index for a region id. Flushed first.
    pub fn into_commit(
        self,
        layout: &mut VersionLayout,
        index_of: impl Fn(u64) -> u32,
    ) -> (Box<dyn StoreWriter>, u64, Slots) {
        debug_assert!(self.batch.is_empty(), "flushed before the commit takes it");
        for (&(id, page), &crc) in self.slots.iter().zip(&self.crcs) {
            layout.push_page(index_of(id), page as u64, crc);
        }
        let per = frame_pages(self.ps);
        let mut left = self.slots.len();
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
        let end = self.prefix_len + (self.slots.len() * self.ps) as u64;
        (
            self.writer,
            end,
            Slots {
                of: self.slot_of,
                prefix_len: self.prefix_len,
            },
        )
    }

    /// Give every pre-copied page back to its region (`regions` by id), for a checkpoint to
    /// store: the file will not become the version.
    pub fn give_back(&self, tr_of: impl Fn(u64) -> Option<std::sync::Arc<TrackedRegion>>) {
        for (id, page) in self.each_slot() {
            if let Some(tr) = tr_of(id) {
                if page < tr.npages {
                    crate::track::protocol::committer::give_back_page(&tr, page);
                }
            }
        }
    }
}

/// Where a commit that took a pre-copy file over finds each pre-copied page.
pub(crate) struct Slots {
    of: HashMap<u64, Vec<u32>>,
    pub prefix_len: u64,
}

impl Slots {
    /// The slot (the page's index in the version's page order) of `page` of region `id`.
    pub fn of(&self, id: u64, page: usize) -> Option<usize> {
        let s = *self.of.get(&id)?.get(page)?;
        (s != NONE).then_some(s as usize)
    }

    /// Give every pre-copied page back to its region (a commit that failed).
    pub fn give_back(&self, tr_of: impl Fn(u64) -> Option<std::sync::Arc<TrackedRegion>>) {
        for (id, of) in &self.of {
            if let Some(tr) = tr_of(*id) {
                for (page, &s) in of.iter().enumerate() {
                    if s != NONE && page < tr.npages {
                        crate::track::protocol::committer::give_back_page(&tr, page);
                    }
                }
            }
        }
    }
}
