//! A region of application memory whose pages are tracked.

use crate::sys::mem::TrackedPages;
use crate::sys::page_size;
use crate::track::acck::AcckState;
use crate::track::memory::bitmap::AtomicBitmap;
use crate::track::memory::own_mem::OwnSlice;
use crate::track::protocol::pages::PageStates;
use crate::track::protocol::Protocol;
use crate::track::{Backend, TrackError};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// One protected region. The fault handler reaches it through the registry and touches
/// only its atomics. What tracking and the page protocol keep per region is theirs alone:
/// the engine reads counts through the methods below and changes page states only through
/// `track::protocol`.
pub struct TrackedRegion {
    pub id: u64,
    /// The application's pointer and length, any alignment.
    pub user_ptr: usize,
    pub user_len: usize,
    /// Covering pages (`mem`'s length over the page size), kept for the fault path.
    pub npages: usize,
    /// The covering pages, whose protection tracking changes; the region's base and span.
    pub(in crate::track) mem: TrackedPages,
    /// Pages written since the last collection, and the count of write faults taken.
    pub(in crate::track) dirty: AtomicBitmap,
    /// Commit protocol state and first-write record of each page.
    pub(in crate::track) pages: PageStates,
    /// The page protocol of the engine this region belongs to.
    pub(in crate::track) protocol: Arc<Protocol>,
    /// Coarse-grained monitoring state (pieces released this epoch).
    pub(in crate::track) acck: AcckState,
    /// Which mechanism tracks it (`Backend` as u8), set when a tracker attaches it: a
    /// neighbour sharing a page needs to know whether page protection is what tracks it.
    pub(in crate::track) mech: AtomicU8,
    /// Attached unarmed and not collected since (uffd-async: its first scan reports every
    /// present page, which were no first writes of an epoch).
    pub(in crate::track) unarmed: AtomicBool,
    /// The instruction of each page's last first write, 0 if none was reported; only when
    /// the protocol records writers (pre-copy's execution context). The SIGSEGV handler
    /// stores it; userfaultfd's messages carry no instruction, so there it stays 0.
    writers: Option<OwnSlice<AtomicU64>>,
    /// Its owner reports which pages it writes (`Engine::protect_reported`), and writes
    /// none while a commit needs them: no backend tracks it (`track::reported`).
    reported: AtomicBool,
}

impl TrackedRegion {
    /// Forget the commit protocol's page states and first-write records: no commit runs in
    /// a restarted process. Their memory is scratch, which a restart maps as zeros; but a
    /// mapping the table of ickpt's own had no room for was stored, and comes back as it was.
    pub(crate) fn forget_commits(&self) {
        self.pages.clear();
    }

    /// Region `id` over the `len` bytes at `ptr`, whose covering pages are `pages` (made,
    /// and checked mapped, before anything sized by `len` is allocated, so a bogus length is
    /// an error rather than an abort; and since mprotect does not roll back, a range with a
    /// hole must never reach it: it would leave the mapped part read-only and untracked).
    pub fn new(
        id: u64,
        ptr: usize,
        len: usize,
        pages: TrackedPages,
        protocol: Arc<Protocol>,
    ) -> Result<Self, TrackError> {
        let npages = pages.len() / page_size();
        Ok(TrackedRegion {
            id,
            user_ptr: ptr,
            user_len: len,
            npages,
            mem: pages,
            dirty: AtomicBitmap::new(npages).map_err(TrackError::OwnAlloc)?,
            pages: PageStates::new(npages).map_err(TrackError::OwnAlloc)?,
            acck: AcckState::new(npages, protocol.acck_n()).map_err(TrackError::OwnAlloc)?,
            mech: AtomicU8::new(0),
            unarmed: AtomicBool::new(false),
            writers: match protocol.records_writers() {
                true => Some(OwnSlice::new(npages).map_err(TrackError::OwnAlloc)?),
                false => None,
            },
            protocol,
            reported: AtomicBool::new(false),
        })
    }

    /// Say that the owner reports this region's writes (before a tracker attaches it).
    pub(crate) fn report_writes(&self) {
        self.reported.store(true, Ordering::SeqCst);
    }

    /// Whether the owner reports this region's writes rather than a backend tracking them.
    pub(crate) fn writes_reported(&self) -> bool {
        self.reported.load(Ordering::SeqCst)
    }

    /// The owner wrote the pages covering `offset..offset + len` of the region's span (from
    /// its first covering page). Lock-free.
    pub(crate) fn reported_written(&self, offset: usize, len: usize) {
        if len == 0 {
            return;
        }
        let ps = page_size();
        let last = ((offset + len - 1) / ps).min(self.npages.saturating_sub(1));
        for p in offset / ps..=last {
            self.dirty.set(p);
        }
    }

    /// First byte of the first covering page.
    #[inline]
    pub fn base(&self) -> usize {
        self.mem.base()
    }

    /// Offset of the region's first byte within its first page.
    pub fn page_offset(&self) -> usize {
        self.user_ptr - self.base()
    }

    /// Length of the covering pages in bytes.
    pub fn span_len(&self) -> usize {
        self.mem.len()
    }

    /// One past the last covering byte.
    pub fn span_end(&self) -> usize {
        self.base() + self.span_len()
    }

    /// The covering pages the region shares with memory outside it (an unaligned buffer's
    /// first and last pages: a heap buffer's hold the allocator's headers): page 0 and the
    /// last page, each when the region does not fill it. Allocation-free.
    pub fn shared_edge_pages(&self) -> [Option<usize>; 2] {
        let last = self.npages - 1;
        let tail = (self.page_offset() + self.user_len) % page_size() != 0;
        let first = (self.page_offset() != 0).then_some(0);
        [first, (tail && first != Some(last)).then_some(last)]
    }

    pub fn page_addr(&self, page: usize) -> usize {
        self.base() + page * page_size()
    }

    /// Whether every covering page is still mapped (a region unmapped while protected
    /// is named as such).
    pub fn still_mapped(&self) -> bool {
        self.mem.mapped()
    }

    /// Copy page `page` (of the covering pages) into `dst`, one page long.
    pub fn copy_page_out(&self, page: usize, dst: &mut [u8]) {
        self.mem.copy_out(page * page_size(), dst);
    }

    /// The covering pages, for a restore to write into (`TrackedPages::bytes_mut`, once
    /// `Tracker::disarm` made them writable).
    pub fn covering(&self) -> &TrackedPages {
        &self.mem
    }

    /// Mappings the fault handler writes on this region's behalf; none may be protected.
    pub fn own_spans(&self) -> Vec<(usize, usize)> {
        let mut v = vec![self.dirty.span()];
        v.extend(self.pages.spans());
        v.push(self.acck.span());
        v.extend(self.protocol.spans());
        v.extend(self.writers.as_ref().map(|w| w.span()));
        v
    }

    /// Pages `lo..hi` were first written by the instruction at `ip` (0: not known).
    /// Signal-safe.
    pub(in crate::track) fn set_writer(&self, lo: usize, hi: usize, ip: usize) {
        if let (Some(w), true) = (&self.writers, ip != 0) {
            for slot in &w[lo..hi] {
                slot.store(ip as u64, Ordering::Relaxed);
            }
        }
    }

    /// The instruction that last wrote page `page` first, where the backend reported one.
    pub fn writer(&self, page: usize) -> Option<usize> {
        let ip = self.writers.as_ref()?.get(page)?.load(Ordering::Relaxed);
        (ip != 0).then_some(ip as usize)
    }

    /// Write faults taken since the region was protected.
    pub fn faults(&self) -> u64 {
        self.dirty.faults()
    }

    /// Pages ACCK released from page-by-page monitoring since the region was protected.
    pub fn acck_released_pages(&self) -> u64 {
        self.acck.released_pages()
    }

    /// Monitor every piece again (ACCK), as at the start of an epoch.
    pub fn monitor_every_piece(&self) {
        self.acck.reset();
    }

    pub fn set_mechanism(&self, b: Backend) {
        self.mech.store(b as u8, Ordering::SeqCst);
    }

    /// Whether `b` tracks this region's writes now (see [`Self::set_mechanism`]).
    pub fn tracked_by(&self, b: Backend) -> bool {
        self.mech.load(Ordering::SeqCst) == b as u8
    }

    /// Whether page protection (mprotect) tracks this region's writes.
    pub fn tracked_by_protection(&self) -> bool {
        self.tracked_by(Backend::Mprotect)
    }

    pub fn contains(&self, addr: usize) -> bool {
        addr >= self.base() && addr < self.span_end()
    }
}
