//! Pre-copy (PRWIP): between checkpoints a thread of ickpt's writes dirty pages into the
//! next version's file early, so the checkpoint has less left to write.
//!
//! Every `period` (a tenth of the checkpoint interval, 10 ms to 1 s) a pass looks at each
//! stored region's written pages without changing tracking (`Tracker::peek_written`). A page
//! not seen before this epoch is a write to learn from (`policy::prwip`); the strategy says
//! whether to copy it now. A page to copy is first taken from tracking and write-protected
//! again, in runs (`Tracker::collect_pages`), and only then copied, so a write racing the
//! copy, or any write after it, marks it written again: the next pass or the checkpoint finds
//! it (a *conflict*) and copies it again into its slot. A version therefore still holds
//! memory as it was at the checkpoint call: a pre-copied page the checkpoint does not find
//! written was not written since it was copied. A page not copied stays written and open
//! until the checkpoint: one trap an epoch, as without pre-copy.
//!
//! The pre-copier looks only at regions a checkpoint has stored (their writes are tracked),
//! and never while a commit runs or a program section is open (both take the same bits).
//! A checkpoint call counts itself in `Control::waiting` before it waits for the engine
//! lock: a pass then stops before its next run of pages, so it holds the call up for at most
//! one run (`RUN_PAGES` pages) taken, copied and released.

mod file;
mod info;
mod pages;
mod thread;

pub(crate) use file::PreFile;
pub use info::PrecopyInfo;
use pages::{Functions, RegionPages};
pub(crate) use thread::{pass_if_idle, Precopier};

use super::RegionSlot;
use crate::policy::prwip::{Cadence, Predictor, Strategy};
use crate::store::Store;
use crate::track::protocol::committer::{give_back, give_back_page};
use crate::track::{bitmap, TrackedRegion, Tracker};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// The pre-copy state of an engine with pre-copy on.
pub(crate) struct PreCopy {
    predictor: Predictor,
    cadence: Cadence,
    /// The predictor's clock starts here.
    clock: Instant,
    /// The last checkpoint call.
    last_call: Option<Instant>,
    /// What is known of each stored region's pages, by region id.
    pages: HashMap<u64, RegionPages>,
    /// The next version's file, once a page was pre-copied this epoch.
    file: Option<PreFile>,
    /// The kind `Engine::precopy_written` found a version's checkpoint will be, from what was
    /// written before its copy: the checkpoint takes it rather than estimating again in the
    /// stop (a page-table scan where nothing was copied).
    kind_for: Option<(u64, ickpt_format::Kind)>,
    /// This epoch's figures.
    epoch: PrecopyInfo,
    /// A failure stopped pre-copy until the next checkpoint.
    stopped: bool,
    /// Since start: passes, and the sums of the epochs' figures.
    pub totals: Totals,
    /// The function of each writing instruction seen (mprotect), looked up once.
    functions: Functions,
}

/// Most pages a pass takes and copies in one run: a checkpoint call waiting for the engine
/// waits for at most one run (256 KiB of 4 KiB pages), and a run is one protection call.
const RUN_PAGES: usize = 64;

/// What a pass works over.
#[derive(Clone, Copy)]
struct Pass<'a> {
    regions: &'a BTreeMap<u64, RegionSlot>,
    tracker: &'a dyn Tracker,
    store: &'a dyn Store,
    next_version: u64,
    /// A checkpoint call is waiting: stop before the next run of pages.
    urgent: &'a dyn Fn() -> bool,
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Totals {
    pub passes: u64,
    pub pages: u64,
    pub conflicts: u64,
    pub copies: u64,
    pub rewritten_bytes: u64,
}

impl PreCopy {
    pub fn new(strategy: Strategy, interval: Option<Duration>) -> Self {
        PreCopy {
            predictor: Predictor::new(strategy),
            cadence: Cadence::new(interval),
            clock: Instant::now(),
            last_call: None,
            pages: HashMap::new(),
            file: None,
            kind_for: None,
            epoch: PrecopyInfo::default(),
            stopped: false,
            totals: Totals::default(),
            functions: Functions::default(),
        }
    }

    fn now_ms(&self) -> u32 {
        self.clock.elapsed().as_millis() as u32
    }

    /// How long the pre-copier sleeps between passes.
    pub fn period(&self) -> Duration {
        self.cadence
            .interval_ms()
            .map_or(Duration::from_millis(100), |i| {
                Duration::from_millis(u64::from(i / 10))
                    .clamp(Duration::from_millis(10), Duration::from_secs(1))
            })
    }

    /// A checkpoint was called: learn the cadence.
    pub fn called(&mut self) {
        let now = Instant::now();
        if let Some(last) = self.last_call {
            self.cadence
                .called(now.duration_since(last).as_millis().min(u32::MAX as u128) as u32);
        }
        self.last_call = Some(now);
    }

    /// Stop pre-copying until the next checkpoint, giving every pre-copied page back to its
    /// region so the checkpoint stores it; `why` is reported with that checkpoint.
    fn fail(&mut self, regions: &BTreeMap<u64, RegionSlot>, why: String) {
        self.abandon(regions);
        self.stopped = true;
        self.epoch.error.get_or_insert(why);
    }

    /// Drop the file, giving its pages back to their regions (the checkpoint stores them).
    pub fn abandon(&mut self, regions: &BTreeMap<u64, RegionSlot>) {
        if let Some(f) = self.file.take() {
            f.slots
                .give_back(|id| regions.get(&id).map(|s| s.tr.clone()));
        }
    }

    /// The execution context a pass would learn page `page` of `tr` under now.
    pub fn context_of(&mut self, tr: &TrackedRegion, page: usize) -> u64 {
        self.functions.context(tr, page)
    }

    /// Regions whose pages are known.
    pub fn known_regions(&self) -> usize {
        self.pages.len()
    }

    /// Forget region `id`'s pages (it leaves tracking): a region protected and freed in a
    /// loop must not grow what pre-copy keeps.
    pub fn forget_region(&mut self, id: u64) {
        self.pages.remove(&id);
    }

    /// In a process restarted from a capture taken while the file was open: forget the
    /// file without closing its descriptor or removing it (the number is not the file's in
    /// this process: the record left it out, and the version it became is committed).
    pub fn after_restart(&mut self) {
        if let Some(f) = self.file.take() {
            f.forget_writer();
        }
        self.discard();
        self.stopped = false;
    }

    /// Drop the file and forget what was learnt of memory that changed behind tracking's
    /// back (a restore).
    pub fn discard(&mut self) {
        self.file = None;
        self.kind_for = None;
        self.pages.values_mut().for_each(RegionPages::clear_epoch);
    }

    /// One pass: look at each stored region's written pages, learn from those not seen
    /// before this epoch, and take and pre-copy the ones the strategy picks into the next
    /// version's file. The others stay as they are (written, and open) for the checkpoint.
    /// Stops early when a checkpoint call is waiting (`urgent`).
    pub fn pass(
        &mut self,
        st_regions: &BTreeMap<u64, RegionSlot>,
        tracker: &dyn Tracker,
        store: &dyn Store,
        next_version: u64,
        urgent: &dyn Fn() -> bool,
    ) {
        if self.stopped || urgent() {
            return;
        }
        let Some(last) = self.last_call else { return };
        let elapsed = last.elapsed().as_millis().min(u32::MAX as u128) as u32;
        let Some(until) = self.cadence.until_next(elapsed) else {
            return;
        };
        let now = self.now_ms();
        let pass = Pass {
            regions: st_regions,
            tracker,
            store,
            next_version,
            urgent,
        };
        self.run_pass(&pass, |me, tr, bits, chosen| {
            me.choose(tr, bits, now, until, chosen)
        });
    }

    /// Copy every page written since the checkpoint into the next version's file now, with
    /// no strategy asked and nothing learnt (`Engine::precopy_written`). Returns how many
    /// pages were copied.
    pub fn copy_written(
        &mut self,
        st_regions: &BTreeMap<u64, RegionSlot>,
        tracker: &dyn Tracker,
        store: &dyn Store,
        next_version: u64,
    ) -> u64 {
        if self.stopped {
            return 0;
        }
        let before = self.epoch.copies;
        let pass = Pass {
            regions: st_regions,
            tracker,
            store,
            next_version,
            urgent: &|| false,
        };
        self.run_pass(&pass, |_, tr, bits, chosen| {
            chosen.clear();
            // As in `choose`: an edge page shared with memory outside is the checkpoint's.
            let edges = tr.shared_edge_pages();
            let mut page = 0;
            while let Some(p) = bitmap::next_set(bits, page, tr.npages) {
                page = p + 1;
                if !edges.contains(&Some(p)) {
                    chosen.push(p);
                }
            }
        });
        self.epoch.copies - before
    }

    /// A pass over each stored region: `choose` puts the written pages (`bits`) to copy now
    /// into `chosen`, in ascending order; they are taken and copied, and the file flushed.
    fn run_pass(
        &mut self,
        pass: &Pass<'_>,
        mut choose: impl FnMut(&mut Self, &TrackedRegion, &[u64], &mut Vec<usize>),
    ) {
        let started = Instant::now();
        let (mut bits, mut chosen) = (Vec::new(), Vec::new());
        for (&id, slot) in pass.regions {
            if slot.born.is_none() {
                continue;
            }
            if (pass.urgent)() {
                break;
            }
            let tr = &slot.tr;
            if let Err(e) = pass.tracker.peek_written(tr, &mut bits) {
                self.fail(pass.regions, format!("tracking region {id}: {e}"));
                return;
            }
            choose(self, tr, &bits, &mut chosen);
            if let Err(why) = self.take_and_copy(pass, tr, &chosen) {
                self.fail(pass.regions, why);
                return;
            }
        }
        if let Some(f) = &mut self.file {
            if let Err(e) = f.end_pass() {
                let why = format!("{}: writing pre-copied pages: {e}", f.file);
                self.fail(pass.regions, why);
                return;
            }
        }
        self.epoch.passes += 1;
        self.totals.passes += 1;
        self.epoch.pass_time += started.elapsed();
    }

    /// Learn from the pages of `tr` in `written` not seen before this epoch (each is a first
    /// write since the checkpoint, or since its pre-copy: a conflict), and put those to
    /// pre-copy now into `chosen`, in ascending order. A page not chosen stays written and
    /// open until the checkpoint, so it costs no more traps: the paper's page left to the
    /// sequential checkpoint. The pages a region shares with memory outside it are left to the
    /// checkpoint too: re-arming one alone would hide another region's write from it.
    fn choose(
        &mut self,
        tr: &TrackedRegion,
        written: &[u64],
        now: u32,
        until: u32,
        chosen: &mut Vec<usize>,
    ) {
        chosen.clear();
        let rp = self
            .pages
            .entry(tr.id)
            .or_insert_with(|| RegionPages::new(tr.npages));
        if rp.history.len() != tr.npages {
            *rp = RegionPages::new(tr.npages);
        }
        let slots = self.file.as_ref().and_then(|f| f.slots.of_region(tr.id));
        let edges = tr.shared_edge_pages();
        let mut page = 0;
        while let Some(p) = bitmap::next_set(written, page, tr.npages) {
            page = p + 1;
            if bitmap::is_set(&rp.seen, p) {
                continue;
            }
            bitmap::set(&mut rp.seen, p);
            let pre_copied = slots.is_some_and(|s| file::has_slot(s, p));
            if pre_copied && rp.conflict(p) {
                self.epoch.conflicts += 1;
            }
            let h = &mut rp.history[p];
            let ctx = self.functions.context(tr, p);
            self.predictor.written(h, now, ctx, pre_copied);
            if !edges.contains(&Some(p)) && self.predictor.precopy(h, now, ctx, until) {
                chosen.push(p);
            }
        }
    }

    /// Take the `chosen` pages of `tr` from tracking (armed again), run by run (at most
    /// [`RUN_PAGES`] each), and copy each into the file; stop before a run when a checkpoint
    /// call is waiting (the pages not taken are still in the tracker's record). On an error
    /// the pages taken and not copied go back to the region.
    fn take_and_copy(
        &mut self,
        pass: &Pass<'_>,
        tr: &TrackedRegion,
        chosen: &[usize],
    ) -> Result<(), String> {
        let Pass {
            regions,
            tracker,
            store,
            next_version,
            urgent,
        } = *pass;
        if chosen.is_empty() {
            return Ok(());
        }
        if self.file.is_none() {
            let f = PreFile::create(store, next_version, regions.len(), crate::sys::page_size())
                .map_err(|e| {
                    format!(
                        "{}: starting the pre-copy file: {e}",
                        store.describe(&crate::store::version_name(next_version))
                    )
                })?;
            self.file = Some(f);
        }
        let Some(f) = self.file.as_mut() else {
            unreachable!("the file made above")
        };
        f.reserve(chosen.len())
            .map_err(|e| format!("{}: room for the pre-copied pages' list: {e}", f.file))?;
        // Pages whose writes are learnt from (`choose`): a copied page's next write is news.
        let mut rp = self.pages.get_mut(&tr.id);
        let mut taken = Vec::new();
        let mut i = 0;
        while i < chosen.len() && !urgent() {
            let lo = chosen[i];
            let mut hi = lo + 1;
            while hi - lo < RUN_PAGES && i + (hi - lo) < chosen.len() && chosen[i + (hi - lo)] == hi
            {
                hi += 1;
            }
            if let Err(e) = tracker.collect_pages(tr, lo..hi, &mut taken) {
                give_back(tr, &taken);
                return Err(format!("tracking region {}: {e}", tr.id));
            }
            for p in lo..hi {
                if let Some(rp) = rp.as_deref_mut() {
                    bitmap::clear(&mut rp.seen, p);
                }
                match f.copy(tr, p) {
                    Ok(file::Copied::New) => {}
                    Ok(file::Copied::Again) => {
                        self.epoch.rewritten_bytes += crate::sys::page_size() as u64;
                    }
                    Err(e) => {
                        // Taken and not copied. (The chosen pages after this run were not
                        // taken: they are still in the tracker's record.)
                        for q in p..hi {
                            give_back_page(tr, q);
                        }
                        return Err(format!("{}: writing a pre-copied page: {e}", f.file));
                    }
                }
                self.epoch.copies += 1;
            }
            i += hi - lo;
        }
        Ok(())
    }

    /// Pages pre-copied for the checkpoint of `version`, if pre-copy began its file.
    pub fn pages_for(&self, version: u64) -> Option<usize> {
        self.file
            .as_ref()
            .filter(|f| f.version == version)
            .map(PreFile::pages)
    }

    /// Say that the checkpoint of `version` will be of `kind` ([`PreCopy::kind_for`]).
    pub fn decided(&mut self, version: u64, kind: ickpt_format::Kind) {
        self.kind_for = Some((version, kind));
    }

    /// The kind `Engine::precopy_written` decided for the checkpoint of `version`, if it did.
    pub fn kind_for(&self, version: u64) -> Option<ickpt_format::Kind> {
        self.kind_for.filter(|k| k.0 == version).map(|k| k.1)
    }

    /// The file for the checkpoint about to collect `version`, if it can take it over: the
    /// same version number, an incremental version, a prefix of the same length, and every
    /// pre-copied page's region still there with the same size. Otherwise the file is
    /// dropped and its pages given back, before the collect, so the checkpoint stores them.
    pub fn take_file(
        &mut self,
        regions: &BTreeMap<u64, RegionSlot>,
        version: u64,
        incremental: bool,
        prefix_len: u64,
    ) -> Option<PreFile> {
        let f = self.file.as_ref()?;
        let sizes: Vec<(u64, usize)> = regions
            .iter()
            .filter(|(_, s)| s.born.is_some())
            .map(|(&id, s)| (id, s.tr.npages))
            .collect();
        if f.version == version && incremental && f.slots.prefix_len == prefix_len && f.fits(&sizes)
        {
            let mut f = self.file.take()?;
            match f.flush() {
                Ok(()) => return Some(f),
                Err(e) => {
                    let why = format!("{}: writing pre-copied pages: {e}", f.file);
                    self.file = Some(f);
                    self.fail(regions, why);
                    return None;
                }
            }
        }
        self.abandon(regions);
        None
    }

    /// The checkpoint collected: `written(id, page)` says whether it found a page dirty.
    /// Pre-copied pages it did not find held (PRWIP-opt learns from that); those it found
    /// are conflicts, which it copies again into their slots. Returns the epoch's figures
    /// and starts the next epoch.
    pub fn end_epoch(
        &mut self,
        regions: &BTreeMap<u64, RegionSlot>,
        file: Option<&PreFile>,
        written: impl Fn(u64, usize) -> bool,
    ) -> PrecopyInfo {
        let now = self.now_ms();
        let ps = crate::sys::page_size() as u64;
        if file.is_none() {
            // The version holds no pre-copied page (a full one, or the file was dropped): a
            // rewrite of a page whose copy went with the file conflicts with nothing stored.
            self.epoch.conflicts = 0;
        }
        if let Some(f) = file {
            self.epoch.pages = f.pages() as u64;
            for (id, page) in f.each_slot() {
                // Made by the pass that copied the page, as long as the region was then (and
                // `take_file` found the file fits the regions now).
                let Some(rp) = self.pages.get_mut(&id).filter(|rp| page < rp.history.len()) else {
                    continue;
                };
                if written(id, page) {
                    self.epoch.rewritten_bytes += ps;
                    if rp.conflict(page) {
                        self.epoch.conflicts += 1;
                        let ctx = regions
                            .get(&id)
                            .map_or(id, |s| self.functions.context(&s.tr, page));
                        self.predictor
                            .written(&mut rp.history[page], now, ctx, true);
                    }
                } else {
                    self.predictor.held(&mut rp.history[page]);
                }
            }
        }
        self.pages.values_mut().for_each(RegionPages::clear_epoch);
        self.stopped = false;
        let mut info = std::mem::take(&mut self.epoch);
        info.strategy = Some(self.predictor.strategy);
        let t = &mut self.totals;
        t.pages += info.pages;
        t.conflicts += info.conflicts;
        t.copies += info.copies;
        t.rewritten_bytes += info.rewritten_bytes;
        info
    }
}
