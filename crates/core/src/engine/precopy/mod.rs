//! Pre-copy (paper 004): between checkpoints a thread of ickpt's writes dirty pages into the
//! next version's file early, so the checkpoint has less left to write.
//!
//! Every `period` the pre-copier takes each region's pages written since it last looked
//! (the tracker's `rearm`, as a program section does: the pages are write-protected again,
//! and their bits handed over). A page it took is either written into the file now, or given
//! back to its region's dirty bits for the checkpoint, as the strategy says
//! (`policy::prwip`). The page is write-protected before it is copied, so a write racing the
//! copy, or any write after it, marks it dirty again: the next pass or the checkpoint finds
//! it (a *conflict*) and copies it again into its slot. A version therefore still holds
//! memory as it was at the checkpoint call: a pre-copied page the checkpoint does not find
//! dirty was not written since it was copied.
//!
//! The pre-copier looks only at regions a checkpoint has stored (their writes are tracked),
//! and never while a commit runs or a program section is open (both take the same bits).
//! The checkpoint call raises `urgent` before it waits for the engine lock: a pass then gives
//! its remaining pages back rather than copy them, so it holds the call up for at most one
//! page copy.
//!
//! Each rearm of a region costs its backend's re-protection (mprotect: the whole region),
//! and a page the application writes all the time costs one more trap per pass; the pass
//! period (a tenth of the checkpoint interval, 10 ms to 1 s) bounds that to ten per epoch.
//! The paper traps each write and decides at the trap; ickpt decides at the next pass.

mod file;

pub(crate) use file::PreFile;

use super::{RegionSlot, State};
use crate::policy::prwip::{Cadence, PageHistory, Predictor, Strategy};
use crate::store::Store;
use crate::track::protocol::committer::{give_back, give_back_page};
use crate::track::{bitmap, TrackedRegion, Tracker};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What pre-copy did for one checkpoint (`CheckpointInfo::precopy`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrecopyInfo {
    pub strategy: Option<Strategy>,
    /// Pages the version holds from pre-copy (copied before the checkpoint call).
    pub pages: u64,
    /// Pre-copied pages written again before the checkpoint: each was copied again, in a
    /// later pass or by the checkpoint itself.
    pub conflicts: u64,
    /// Bytes written more than once into the version's file (pages copied again).
    pub rewritten_bytes: u64,
    /// Page copies the pre-copier wrote before the checkpoint call, first and again.
    pub copies: u64,
    /// Passes since the checkpoint before, and the time they held the engine.
    pub passes: u64,
    pub pass_time: Duration,
    /// Why pre-copy stopped before this checkpoint, if it did (a store or tracking error);
    /// its pages went into the checkpoint.
    pub error: Option<String>,
}

/// The pre-copy state of an engine with pre-copy on.
pub(crate) struct PreCopy {
    predictor: Predictor,
    cadence: Cadence,
    /// The predictor's clock starts here.
    clock: Instant,
    /// The last checkpoint call.
    last_call: Option<Instant>,
    /// Per region id, each page's history: 16 bytes a page.
    history: HashMap<u64, Vec<PageHistory>>,
    /// The next version's file, once a page was pre-copied this epoch.
    file: Option<PreFile>,
    /// Pre-copied pages found written again this epoch, per region (one bit a page), so a
    /// page counts once.
    conflicted: HashMap<u64, Vec<u64>>,
    /// Written pages a pass has looked at and left written this epoch, per region (one bit a
    /// page): they are reported again by every pass until the checkpoint takes them.
    seen: HashMap<u64, Vec<u64>>,
    /// This epoch's figures.
    epoch: PrecopyInfo,
    /// A failure stopped pre-copy until the next checkpoint.
    stopped: bool,
    /// Since start: passes, and the sums of the epochs' figures.
    pub totals: Totals,
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
            history: HashMap::new(),
            file: None,
            conflicted: HashMap::new(),
            seen: HashMap::new(),
            epoch: PrecopyInfo::default(),
            stopped: false,
            totals: Totals::default(),
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

    /// Record a conflict on `page` of region `id`; whether it is the page's first this epoch.
    fn conflict(&mut self, id: u64, npages: usize, page: usize) -> bool {
        let c = self
            .conflicted
            .entry(id)
            .or_insert_with(|| vec![0; npages.div_ceil(64)]);
        if bitmap::is_set(c, page) {
            return false;
        }
        bitmap::set(c, page);
        self.epoch.conflicts += 1;
        true
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
            f.give_back(|id| regions.get(&id).map(|s| s.tr.clone()));
        }
    }

    /// Drop the file and forget what was learnt of memory that changed behind tracking's
    /// back (a restore).
    pub fn discard(&mut self) {
        self.file = None;
        self.conflicted.clear();
        self.seen.clear();
    }

    /// One pass: look at each stored region's written pages, learn from those not seen
    /// before this epoch, and take and pre-copy the ones the strategy picks into the next
    /// version's file. The others stay as they are (written, and open) for the checkpoint.
    pub fn pass(
        &mut self,
        st_regions: &BTreeMap<u64, RegionSlot>,
        tracker: &dyn Tracker,
        store: &dyn Store,
        next_version: u64,
        urgent: &AtomicBool,
    ) {
        if self.stopped || urgent.load(Ordering::Relaxed) {
            return;
        }
        let Some(last) = self.last_call else { return };
        let elapsed = last.elapsed().as_millis().min(u32::MAX as u128) as u32;
        let Some(until) = self.cadence.until_next(elapsed) else {
            return;
        };
        let started = Instant::now();
        let now = self.now_ms();
        let (mut bits, mut chosen) = (Vec::new(), Vec::new());
        for (&id, slot) in st_regions {
            if slot.born.is_none() {
                continue;
            }
            let tr = &slot.tr;
            if let Err(e) = tracker.peek_written(tr, &mut bits) {
                self.fail(st_regions, format!("tracking region {id}: {e}"));
                return;
            }
            self.choose(tr, &bits, now, until, urgent, &mut chosen);
            if let Err(why) =
                self.take_and_copy(st_regions, tracker, tr, &chosen, store, next_version)
            {
                self.fail(st_regions, why);
                return;
            }
        }
        if let Some(f) = &mut self.file {
            if let Err(e) = f.flush() {
                let why = format!("{}: writing pre-copied pages: {e}", f.file);
                self.fail(st_regions, why);
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
        urgent: &AtomicBool,
        chosen: &mut Vec<usize>,
    ) {
        chosen.clear();
        let words = tr.npages.div_ceil(64);
        let seen = self.seen.entry(tr.id).or_default();
        if seen.len() != words {
            *seen = vec![0; words];
        }
        let h = self.history.entry(tr.id).or_default();
        if h.len() != tr.npages {
            *h = vec![PageHistory::default(); tr.npages];
        }
        let edges = tr.shared_edge_pages();
        let mut page = 0;
        while let Some(p) = bitmap::next_set(written, page, tr.npages) {
            page = p + 1;
            let seen = self.seen.get_mut(&tr.id).expect("made above");
            if bitmap::is_set(seen, p) {
                continue;
            }
            bitmap::set(seen, p);
            let pre_copied = self
                .file
                .as_ref()
                .is_some_and(|f| f.slot(tr.id, p).is_some());
            if pre_copied {
                self.conflict(tr.id, tr.npages, p);
            }
            let h = &mut self.history.get_mut(&tr.id).expect("made above")[p];
            self.predictor.written(h, now, tr.id, pre_copied);
            if !urgent.load(Ordering::Relaxed)
                && !edges.contains(&Some(p))
                && self.predictor.precopy(h, now, tr.id, until)
            {
                chosen.push(p);
            }
        }
    }

    /// Take the `chosen` pages of `tr` from tracking (armed again), run by run, and copy each
    /// into the file. On an error the pages taken and not copied go back to the region.
    fn take_and_copy(
        &mut self,
        regions: &BTreeMap<u64, RegionSlot>,
        tracker: &dyn Tracker,
        tr: &TrackedRegion,
        chosen: &[usize],
        store: &dyn Store,
        next_version: u64,
    ) -> Result<(), String> {
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
        let mut taken = Vec::new();
        let mut i = 0;
        while i < chosen.len() {
            let lo = chosen[i];
            let mut hi = lo + 1;
            while i + (hi - lo) < chosen.len() && chosen[i + (hi - lo)] == hi {
                hi += 1;
            }
            if let Err(e) = tracker.collect_pages(tr, lo..hi, &mut taken) {
                give_back(tr, &taken);
                return Err(format!("tracking region {}: {e}", tr.id));
            }
            let seen = self.seen.get_mut(&tr.id).expect("made by choose");
            for p in lo..hi {
                // Armed again: its next write is news.
                bitmap::clear(seen, p);
                let f = self.file.as_mut().expect("made above");
                match f.copy(tr, p) {
                    Ok(file::Copied::New) => {}
                    Ok(file::Copied::Again) => {
                        self.epoch.rewritten_bytes += crate::sys::page_size() as u64;
                    }
                    Err(e) => {
                        let why = format!("{}: writing a pre-copied page: {e}", f.file);
                        // Taken and not copied. (The chosen pages after this run were not
                        // taken: they are still in the tracker's record.)
                        for q in p..hi {
                            give_back_page(tr, q);
                        }
                        return Err(why);
                    }
                }
                self.epoch.copies += 1;
            }
            i += hi - lo;
        }
        Ok(())
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
        if f.version == version && incremental && f.prefix_len == prefix_len && f.fits(&sizes) {
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
        file: Option<&PreFile>,
        npages: impl Fn(u64) -> usize,
        written: impl Fn(u64, usize) -> bool,
    ) -> PrecopyInfo {
        let now = self.now_ms();
        let ps = crate::sys::page_size() as u64;
        if let Some(f) = file {
            self.epoch.pages = f.pages() as u64;
            for (id, page) in f.each_slot() {
                let n = npages(id);
                if written(id, page) {
                    let first = self.conflict(id, n, page);
                    self.epoch.rewritten_bytes += ps;
                    if let Some(h) = self.history.get_mut(&id).and_then(|h| h.get_mut(page)) {
                        if first {
                            self.predictor.written(h, now, id, true);
                        }
                    }
                } else if let Some(h) = self.history.get_mut(&id).and_then(|h| h.get_mut(page)) {
                    self.predictor.held(h);
                }
            }
        }
        self.conflicted.clear();
        self.seen.clear();
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

/// The pre-copier thread and how to reach it.
pub(crate) struct Precopier {
    pub ctl: Arc<Control>,
    handle: Option<std::thread::JoinHandle<()>>,
}

/// Shared with the pre-copier thread.
#[derive(Default)]
pub(crate) struct Control {
    stop: Mutex<bool>,
    wake: Condvar,
    /// A checkpoint call waits for the engine: a pass gives its pages back rather than copy.
    pub urgent: AtomicBool,
}

impl Precopier {
    /// Start the thread over the engine's state.
    pub fn start(
        state: Arc<Mutex<State>>,
        tracker: Arc<dyn Tracker>,
        store: Arc<dyn Store>,
    ) -> std::io::Result<Precopier> {
        let ctl = Arc::new(Control::default());
        let c = ctl.clone();
        let handle = std::thread::Builder::new()
            .name("ickpt-precopy".into())
            .spawn(move || run(&state, &*tracker, &*store, &c))?;
        Ok(Precopier {
            ctl,
            handle: Some(handle),
        })
    }

    /// Stop the thread and wait for it.
    pub fn stop(&mut self) {
        *self.ctl.stop.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.ctl.wake.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }

    /// Forget the thread without joining it (a forked child: it stayed with the parent).
    pub fn forget(&mut self) {
        std::mem::forget(self.handle.take());
    }
}

fn run(state: &Mutex<State>, tracker: &dyn Tracker, store: &dyn Store, ctl: &Control) {
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let period = lock()
            .precopy
            .as_ref()
            .map_or(Duration::from_millis(100), |p| p.period());
        let stop = ctl.stop.lock().unwrap_or_else(|e| e.into_inner());
        let (stop, _) = ctl
            .wake
            .wait_timeout_while(stop, period, |s| !*s)
            .unwrap_or_else(|e| e.into_inner());
        if *stop {
            return;
        }
        drop(stop);
        let mut st = lock();
        let st = &mut *st;
        // A commit running needs the pages it collected as they are; a section open takes
        // the same bits for its own diff.
        let busy = st.pending.as_ref().is_some_and(|h| !h.is_finished()) || st.sections.is_open();
        if busy {
            continue;
        }
        if let Some(p) = &mut st.precopy {
            p.pass(&st.regions, tracker, store, st.next_version, &ctl.urgent);
        }
    }
}
