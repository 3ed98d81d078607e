//! The engine: protected regions, their page protocol, and checkpoint / restore against a store.

// Unsafe allowed here (lib.rs fences it): `protect` is an unsafe fn (the caller vouches for the
// range), and the range becomes the region's `TrackedPages` on that promise.
#![allow(unsafe_code)]

mod checkpoint;
mod commit;
mod drain;
pub(crate) mod gc;
mod global;
mod inject;
mod pending;
pub(crate) mod precopy;
mod restore_regions;
mod schedule;
mod section;
mod sink;
mod stats;
mod versions;

pub use inject::InjectInfo;
pub use precopy::PrecopyInfo;
pub use section::{SectionSave, SectionStart, MAX_NAME as MAX_SECTION_NAME};
pub use stats::{CheckpointInfo, Phases, RestoreInfo, Stats};

use crate::config::env::TestSwitches;
use crate::config::Config;
use crate::error::{
    CheckpointError, DrainError, FileError, ForkedChild, InitError, ProtectError, RegionError,
};
use crate::policy::Head;
use crate::read::catalog;
use crate::store::{DirStore, RealFs, Store, StoreId, ThrottledStore, Tier, TieredStore};
use crate::sys::mem::{Mapping, TrackedPages};
use crate::sys::page_size;
use crate::track::RangeProblem;
use crate::track::{self, Backend, Granularity, OwnBytes, Protocol, TrackedRegion, Tracker};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

pub(crate) struct RegionSlot {
    pub tr: Arc<TrackedRegion>,
    /// The version that first stored this incarnation whole; None until one has.
    pub born: Option<u64>,
    /// The mapping ickpt_malloc made for it, to unmap on free.
    pub owned: Option<Mapping>,
}

#[derive(Default)]
pub(crate) struct State {
    pub regions: BTreeMap<u64, RegionSlot>,
    /// What the next checkpoint increments; None when memory matches no stored version.
    pub head: Option<Head>,
    /// The version this engine committed last, whose AFTER count the next version records;
    /// None before the first commit and after a restore or a failed commit.
    pub previous: Option<u64>,
    pub next_version: u64,
    pub stats: Stats,
    /// The commit running in the background (async mode).
    pub pending: Option<std::thread::JoinHandle<commit::Outcome>>,
    /// A background commit's failure not yet returned to the application.
    pub unreported: Option<CheckpointError>,
    /// Sync checkpoints still to fence every region (after one met a write; `Guard`).
    pub fence_next: u32,
    /// A global version whose record and every later one (and what restoring them reads)
    /// stay on every tier, until another is pinned (`Engine::global_pin`); 0: none.
    pub pinned_global: u64,
    /// What the cost policy knows of the chain `head` ends (`policy::cost_kind`).
    pub chain_costs: crate::policy::ChainCosts,
    /// Program sections (paper 003).
    pub sections: section::Sections,
    /// Pre-copy (paper 004); None when off.
    pub precopy: Option<precopy::PreCopy>,
}

pub struct Engine {
    cfg: Config,
    store: Arc<dyn Store>,
    /// The store's identity, written into every version.
    id: StoreId,
    tracker: Arc<dyn Tracker>,
    /// Shared with the fault handler and the committer.
    protocol: Arc<Protocol>,
    /// Pages are copied here before they are checksummed and written, so the stored bytes
    /// and their CRC always agree; used by the one commit in flight. A mapping of ickpt's
    /// own, never the heap: a heap buffer may share a page with protected heap memory, and
    /// the committer copying that very page into it wrote a page it had FLUSHING, which
    /// aborted the version (`tests/owner_heap.rs`).
    staging: Arc<Mutex<OwnBytes>>,
    /// Encodes each batch into frames (format 6): made once, so a commit allocates nothing.
    encoder: Arc<Mutex<ickpt_format::FrameEncoder>>,
    /// Shared with the pre-copier thread.
    state: Arc<Mutex<State>>,
    /// Writes dirty pages out between checkpoints (paper 004); None when pre-copy is off.
    precopier: Option<precopy::Precopier>,
    /// Turns ACCK's released spans into huge pages (when both are on).
    huge_worker: Option<std::thread::JoinHandle<()>>,
    /// Batches commits waited for the store to take (`Stats::commit_stalls`), counted by the
    /// commit as it runs.
    stalls: Arc<std::sync::atomic::AtomicU64>,
    /// The first tier, where commits land: the only one the engine's garbage collection
    /// touches (lower tiers are the drain's). `store` itself without lower tiers.
    local: Arc<dyn Store>,
    /// Copies committed versions down the tiers; None without a lower tier.
    drain: Option<Arc<drain::TierDrain>>,
    /// The engine's store when it has lower tiers, for restores to blame a damaged copy.
    tiered: Option<Arc<TieredStore>>,
    /// The process that opened it: a child forked from it inherits the engine but must not
    /// write into its parent's store, nor wait for threads that did not come along.
    pid: u32,
}

impl Engine {
    /// Open (or create) the store directory and start tracking with the configured backend.
    pub fn open(cfg: Config) -> Result<Engine, InitError> {
        // The environment is checked before the directory is touched.
        let (cfg, test) = Config::from_env(cfg)?;
        let mut store: Box<dyn Store> =
            Box::new(DirStore::open_write_on(&RealFs, &cfg.dir, test.rename)?);
        // 0 means unlimited, as in ickpt_config.
        if let Some(rate) = cfg.bandwidth.filter(|&b| b > 0) {
            store = Box::new(ThrottledStore::new(store, rate));
        }
        #[cfg(feature = "testing")]
        let store = testing_wrappers(store, &cfg, &test);
        let mut lower = Vec::new();
        if let Some(shared) = &cfg.shared_dir {
            lower.push(Tier {
                name: "shared",
                store: Arc::new(DirStore::open_write_on(&RealFs, shared, test.rename)?),
            });
        }
        #[cfg(feature = "s3")]
        if let Some(url) = &cfg.object_url {
            let tier = crate::store::ObjectTier::open(url).map_err(|e| {
                InitError::File(FileError::new(url.clone(), "opening the object store", e))
            })?;
            lower.push(Tier {
                name: "object",
                store: Arc::new(tier),
            });
        }
        Self::start_tiered(cfg, &test, Arc::from(store), lower)
    }

    /// An engine whose commits land in `first` and are drained to each of `lower` in turn
    /// (tests give stores with faults).
    pub fn with_tiers(
        cfg: Config,
        first: Arc<dyn Store>,
        lower: Vec<Tier>,
    ) -> Result<Engine, InitError> {
        let (cfg, test) = Config::from_env(cfg)?;
        Self::start_tiered(cfg, &test, first, lower)
    }

    fn start_tiered(
        cfg: Config,
        test: &TestSwitches,
        first: Arc<dyn Store>,
        lower: Vec<Tier>,
    ) -> Result<Engine, InitError> {
        if lower.is_empty() {
            return Self::start(cfg, test, first);
        }
        // A new node's empty directory takes the identity of the store it continues.
        let io = |s: &dyn Store, op, e| FileError::new(s.describe(""), op, e);
        let mut own = first
            .identity()
            .map_err(|e| io(&*first, "reading the store's identity", e))?;
        for t in &lower {
            // A tier that cannot be listed now would hide names the next version's number
            // must pass (a number is never reused): refused, naming it.
            t.store
                .list()
                .map_err(|e| io(&*t.store, "listing the tier", e))?;
            let theirs = t
                .store
                .identity()
                .map_err(|e| io(&*t.store, "reading the store's identity", e))?;
            match (own, theirs) {
                (None, Some(id)) => {
                    first
                        .set_identity(id)
                        .map_err(|e| io(&*first, "recording the store's identity", e))?;
                    own = Some(id);
                }
                (Some(own), Some(found)) if own != found => {
                    return Err(DrainError::Foreign {
                        tier: t.name,
                        dir: t.store.describe(""),
                        found,
                        own,
                    }
                    .into())
                }
                _ => {}
            }
        }
        // 0 means unlimited, as in ickpt_config.
        let lower: Vec<Tier> = match cfg.drain_bandwidth.filter(|&b| b > 0) {
            Some(rate) => lower
                .into_iter()
                .map(|t| Tier {
                    name: t.name,
                    store: Arc::new(ThrottledStore::new(t.store, rate)),
                })
                .collect(),
            None => lower,
        };
        let mut tiers = vec![Tier {
            name: "local",
            store: first.clone(),
        }];
        tiers.extend(lower.iter().cloned());
        let tiered = Arc::new(TieredStore::new(tiers));
        let mut engine = Self::start(cfg, test, tiered.clone())?;
        engine.local = first;
        let chunk = drain::chunk_for(engine.cfg.drain_bandwidth.filter(|&b| b > 0));
        let drain = drain::TierDrain::start(&tiered, engine.id, engine.cfg.retention(), chunk)
            .map_err(|e| {
                InitError::File(FileError::new(
                    "ickpt-drain",
                    "starting the drain thread",
                    e,
                ))
            })?;
        engine.drain = Some(Arc::new(drain));
        engine.tiered = Some(tiered);
        Ok(engine)
    }

    /// An engine over any store (tests use this to inject faults).
    pub fn with_store(cfg: Config, store: Arc<dyn Store>) -> Result<Engine, InitError> {
        let (cfg, test) = Config::from_env(cfg)?;
        Self::start(cfg, &test, store)
    }

    /// Start tracking over `store` with `cfg`, the environment applied.
    fn start(cfg: Config, test: &TestSwitches, store: Arc<dyn Store>) -> Result<Engine, InitError> {
        let tracker = track::select(cfg.backend, test.uffd_spin, test.hide)?;
        let id = settle_identity(&*store)?;
        // Past every name in the store, readable or not: a name is never reused.
        let next_version = catalog::versions(&*store)?.last().map_or(1, |v| v + 1);
        let protocol = Arc::new(
            Protocol::new(
                cfg.cow_bytes,
                cfg.fault_around,
                (cfg.granularity == Granularity::Adaptive)
                    .then_some((cfg.acck_pieces_log2, cfg.huge_pages)),
            )
            .map_err(track::TrackError::OwnAlloc)?,
        );
        if cfg.precopy != crate::policy::prwip::Strategy::Off
            && cfg.precopy_context == crate::policy::prwip::Context::Function
            && tracker.backend() == track::Backend::Mprotect
        {
            // Before any region exists: each keeps its writers from its first fault.
            protocol.record_writers();
        }
        let huge_worker = match protocol.huge_queue() {
            Some(_) => {
                let e = protocol.clone();
                Some(
                    std::thread::Builder::new()
                        .name("ickpt-huge".into())
                        .spawn(move || {
                            if let Some(q) = e.huge_queue() {
                                q.run();
                            }
                        })
                        .map_err(track::TrackError::OwnAlloc)?,
                )
            }
            None => None,
        };
        let staging =
            OwnBytes::new(sink::batch_bytes(page_size())).map_err(track::TrackError::OwnAlloc)?;
        let encoder = frame_encoder(cfg.compression.level(cfg.mode), page_size())
            .map_err(track::TrackError::OwnAlloc)?;
        let precopy = (cfg.precopy != crate::policy::prwip::Strategy::Off)
            .then(|| precopy::PreCopy::new(cfg.precopy, cfg.checkpoint_interval));
        let mut engine = Engine {
            precopier: None,
            local: store.clone(),
            drain: None,
            tiered: None,
            stalls: Arc::default(),
            huge_worker,
            pid: std::process::id(),
            cfg,
            store,
            id,
            tracker,
            protocol,
            staging: Arc::new(Mutex::new(staging)),
            encoder: Arc::new(Mutex::new(encoder)),
            state: Arc::new(Mutex::new(State {
                regions: BTreeMap::new(),
                head: None,
                previous: None,
                next_version,
                stats: Stats::default(),
                pending: None,
                unreported: None,
                fence_next: 0,
                pinned_global: 0,
                chain_costs: Default::default(),
                sections: Default::default(),
                precopy,
            })),
        };
        if engine.lock().precopy.is_some() && engine.cfg.precopy_thread {
            engine.precopier = Some(
                precopy::Precopier::start(
                    engine.state.clone(),
                    engine.tracker.clone(),
                    engine.store.clone(),
                )
                .map_err(track::TrackError::OwnAlloc)?,
            );
        }
        Ok(engine)
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn store(&self) -> &dyn Store {
        &*self.store
    }

    pub fn backend(&self) -> Backend {
        self.tracker.backend()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state, for an operation that writes to the store or changes tracking: refused in a
    /// forked child (the parent's store and its threads are not the child's).
    fn lock_for_change(&self) -> Result<MutexGuard<'_, State>, ForkedChild> {
        if self.forked() {
            return Err(ForkedChild);
        }
        Ok(self.lock())
    }

    /// Whether this is a child forked from the process that opened the engine.
    fn forked(&self) -> bool {
        std::process::id() != self.pid
    }

    /// Track `len` bytes at `ptr` under `id`. The covering pages are write-protected; bytes
    /// of those pages outside the range are never restored.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be readable and writable memory of this process that stays mapped
    /// until it is unprotected (or the engine dropped).
    pub unsafe fn protect(&self, id: u64, ptr: *mut u8, len: usize) -> Result<(), ProtectError> {
        if ptr.is_null() || len == 0 {
            return Err(ProtectError::BadRange {
                id,
                start: ptr as usize,
                len,
                problem: RangeProblem::Empty,
            });
        }
        self.insert(id, ptr as usize, len, None)
    }

    /// Track `len` bytes at `ptr` as region `id`; `owned`: the mapping `alloc` made for it
    /// (unmapped if the region is refused). Callers vouch for the range: `protect`'s caller
    /// by its contract, `alloc` by having mapped it.
    fn insert(
        &self,
        id: u64,
        ptr: usize,
        len: usize,
        owned: Option<Mapping>,
    ) -> Result<(), ProtectError> {
        let mut st = self.lock_for_change()?;
        if st.regions.contains_key(&id) {
            return Err(ProtectError::RegionExists(id));
        }
        let bad = |problem| ProtectError::BadRange {
            id,
            start: ptr,
            len,
            problem,
        };
        let refused = |e| match e {
            track::TrackError::Refused(problem) => bad(problem),
            source => RegionError::Tracking { id, source }.into(),
        };
        // SAFETY: read-write memory of this process, mapped until it is unprotected (the
        // callers vouch, see above); tracking lets its writes through, and the registry
        // refuses a range over ickpt's own memory.
        let pages = unsafe { TrackedPages::covering(ptr, len) }
            .map_err(|_| bad(RangeProblem::NotMapped))?;
        let tr = Arc::new(
            TrackedRegion::new(id, ptr, len, pages, self.protocol.clone()).map_err(refused)?,
        );
        within_format_limits(&st, &tr)?;
        if owned.is_none() {
            track::before_protect((tr.base(), tr.span_end())).map_err(refused)?;
        }
        // A new region is stored whole by the next checkpoint: no need to trap its writes
        // until that checkpoint arms it.
        self.tracker.attach(&tr, false).map_err(refused)?;
        st.regions.insert(
            id,
            RegionSlot {
                tr,
                born: None,
                owned,
            },
        );
        Ok(())
    }

    /// Stop tracking region `id`. Its pages are absent from later versions, so a restore of
    /// a later version does not bring them back.
    pub fn unprotect(&self, id: u64) -> Result<(), ProtectError> {
        let mut st = self.lock_for_change()?;
        self.settle(&mut st);
        region_leaves_precopy(&mut st, id);
        let slot = st
            .regions
            .remove(&id)
            .ok_or(ProtectError::UnknownRegion(id))?;
        st.stats.keep_counts_of(&slot.tr);
        match self.tracker.detach(&slot.tr) {
            // Unmapped while protected (a checkpoint said so): it has left tracking all the
            // same, and nothing is left to make writable.
            Err(_) if !slot.tr.still_mapped() => Ok(()),
            r => r.map_err(|e| region_error(&slot.tr, e).into()),
        }
    }

    /// Allocate `size` bytes of zeroed, page-aligned memory tracked as region `id`
    /// (paper 000's malloc_protected).
    pub fn alloc(&self, id: u64, size: usize) -> Result<*mut u8, ProtectError> {
        let refused = |why| ProtectError::AllocSize { id, size, why };
        if size == 0 {
            return Err(refused("a size of 0 cannot be protected"));
        }
        let len = size
            .checked_next_multiple_of(page_size())
            .ok_or_else(|| refused("larger than the address space"))?;
        let m = Mapping::new(len).map_err(|source| ProtectError::Map { id, len, source })?;
        let p = m.ptr();
        // A refused region drops the mapping, unmapping it.
        self.insert(id, p as usize, size, Some(m))?;
        Ok(p)
    }

    /// Release memory from [`Engine::alloc`] (paper 000's free_protected).
    pub fn free(&self, ptr: *mut u8) -> Result<(), ProtectError> {
        let mut st = self.lock_for_change()?;
        self.settle(&mut st);
        let id = st
            .regions
            .iter()
            .find(|(_, s)| s.owned.as_ref().is_some_and(|m| m.ptr() == ptr))
            .map(|(id, _)| *id)
            .ok_or(ProtectError::NotAllocated { ptr: ptr as usize })?;
        region_leaves_precopy(&mut st, id);
        let slot = st.regions.remove(&id).expect("found above");
        st.stats.keep_counts_of(&slot.tr);
        self.tracker
            .detach(&slot.tr)
            .map_err(|e| region_error(&slot.tr, e))?;
        // The caller hands the memory back for good.
        slot.owned
            .expect("owned")
            .unmap()
            .map_err(|source| ProtectError::Unmap {
                id,
                ptr: ptr as usize,
                source,
            })
    }

    pub fn stats(&self) -> Stats {
        let mut st = self.lock();
        self.poll(&mut st);
        let mut s = st.stats.clone();
        s.regions = st.regions.len() as u64;
        s.protected_bytes = st.regions.values().map(|r| r.tr.user_len as u64).sum();
        let sum = |f: fn(&TrackedRegion) -> u64| st.regions.values().map(|r| f(&r.tr)).sum::<u64>();
        s.faults = sum(|r| r.faults()) + st.stats.faults_of_removed;
        s.backend = self.backend().as_str();
        s.monitor_time = std::time::Duration::from_nanos(self.protocol.monitor_ns());
        s.acck_released_pages =
            sum(|r| r.acck_released_pages()) + st.stats.acck_released_of_removed;
        s.acck_huge_spans = self.protocol.huge_queue().map_or(0, |q| q.collapsed());
        s.regions_by_protection = sum(|r| r.tracked_by_protection() as u64);
        s.commit_stalls = self.stalls.load(std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = st.precopy.as_ref().map(|p| p.totals) {
            s.precopy_passes = t.passes;
            s.precopy_pages = t.pages;
            s.precopy_conflicts = t.conflicts;
            s.precopy_copies = t.copies;
            s.precopy_rewritten_bytes = t.rewritten_bytes;
        }
        s
    }

    /// Block until the spans adaptive granularity released so far are huge pages (or the
    /// kernel refused). Collapsing runs on a thread of ickpt's; this is for callers (and
    /// tests) that want it done now.
    pub fn wait_huge_pages(&self) {
        if self.forked() {
            return; // the worker stayed with the parent
        }
        if let Some(q) = self.protocol.huge_queue() {
            q.wait_idle();
        }
    }

    /// Whether application threads are blocked right now waiting for the committer to take
    /// a page (diagnostics, and a condition tests can wait for).
    pub fn writers_waiting(&self) -> bool {
        self.protocol.has_waiters()
    }

    /// Run one pre-copy pass now, on this thread, as the pre-copier's thread does every
    /// period (tests that count what a pass did turn the thread off). False when pre-copy is
    /// off, or a commit or a section would have kept the thread from passing.
    #[doc(hidden)]
    pub fn precopy_pass(&self) -> bool {
        let mut st = self.lock();
        self.poll(&mut st);
        precopy::pass_if_idle(&mut st, &*self.tracker, &*self.store, None)
    }

    /// The execution context pre-copy would learn page `page` of region `id` under now:
    /// the writing function's address where the backend reports the writer, the region's
    /// id otherwise (tests). None when pre-copy is off or the region unknown.
    #[doc(hidden)]
    pub fn precopy_context(&self, id: u64, page: usize) -> Option<u64> {
        let mut st = self.lock();
        let tr = st.regions.get(&id)?.tr.clone();
        Some(st.precopy.as_mut()?.context_of(&tr, page))
    }

    /// How many regions pre-copy keeps page histories for (tests: a freed region's go with it).
    #[doc(hidden)]
    pub fn precopy_known_regions(&self) -> usize {
        self.lock()
            .precopy
            .as_ref()
            .map_or(0, |p| p.known_regions())
    }

    /// Pointer and length of a protected region.
    pub fn region(&self, id: u64) -> Option<(*mut u8, usize)> {
        let st = self.lock();
        st.regions
            .get(&id)
            .map(|r| (r.tr.user_ptr as *mut u8, r.tr.user_len))
    }
}

/// Region `id` is about to leave tracking: the pre-copy file could no longer index its pages,
/// so it is dropped and every page it held goes back to its region for the next checkpoint;
/// what pre-copy knew of the region's pages is forgotten.
fn region_leaves_precopy(st: &mut State, id: u64) {
    if let Some(p) = &mut st.precopy {
        p.abandon(&st.regions);
        p.forget_region(id);
    }
}

/// A tracking failure on `tr`, named for what it is when its memory is gone: unmapped while
/// protected (otherwise mprotect says only "Cannot allocate memory"). Allocates nothing (the
/// gate may be closed).
pub(crate) fn region_error(tr: &TrackedRegion, e: track::TrackError) -> RegionError {
    if !tr.still_mapped() {
        return RegionError::Unmapped {
            id: tr.id,
            start: tr.user_ptr,
            end: tr.user_ptr + tr.user_len,
        };
    }
    RegionError::Tracking {
        id: tr.id,
        source: e,
    }
}

impl Engine {
    /// In a child forked from the process that made this engine: stop tracking the parent's
    /// regions here (their memory stays mapped and becomes writable) and let go of the engine
    /// without touching the parent's store or unmapping memory the child may still use.
    /// (Dropping it in a child does the same.)
    pub fn abandon_after_fork(self) {
        drop(self);
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if self.forked() {
            // The committer and the huge page worker stayed with the parent (joining them
            // would wait for ever); `alloc`'s mappings are the child's to keep using; the
            // store's descriptors were closed at fork (sys/fs.rs), and closing them again
            // could close files the child opened since, so the store is never dropped here.
            if let Some(p) = &mut self.precopier {
                p.forget();
            }
            std::mem::forget(self.huge_worker.take());
            std::mem::forget(self.drain.take());
            std::mem::forget(self.tiered.take());
            std::mem::forget(self.local.clone());
            std::mem::forget(self.store.clone());
            // The state is the child's alone (the threads sharing it stayed with the parent),
            // but one of them may have held its lock at the fork: reached without the lock
            // when nothing else holds the Arc (no pre-copier), else only if the lock is free.
            // If neither, the pre-copier's clone, never dropped, keeps the state, and the
            // memory `alloc` mapped, alive: left tracked, never unmapped.
            if let Some(m) = Arc::get_mut(&mut self.state) {
                let st = m.get_mut().unwrap_or_else(|e| e.into_inner());
                forget_in_child(st, &*self.tracker);
            } else if let Ok(mut st) = self.state.try_lock() {
                forget_in_child(&mut st, &*self.tracker);
            }
            return;
        }
        if let Some(p) = &mut self.precopier {
            p.stop();
        }
        if let (Some(q), Some(h)) = (self.protocol.huge_queue(), self.huge_worker.take()) {
            q.stop();
            let _ = h.join();
        }
        let mut st = std::mem::take(&mut *self.lock());
        self.settle(&mut st);
        // What is left undrained is copied at the next start (`ickpt_finalize` waits for it).
        if let Some(d) = self.drain.take() {
            d.stop();
        }
        for (_, slot) in std::mem::take(&mut st.regions) {
            let _ = self.tracker.detach(&slot.tr);
            // Mappings from `alloc` are released with the engine (documented in
            // ickpt_finalize): `slot.owned` unmaps as it drops here.
            drop(slot);
        }
        // The protocol is freed with the engine: not under a handler still leaving it.
        self.protocol.wait_for_handlers();
    }
}

/// A forked child's engine lets go of the parent's regions: tracking stops, the memory stays
/// mapped (the child keeps using it), the commit in flight is not waited for.
fn forget_in_child(st: &mut State, tracker: &dyn Tracker) {
    std::mem::forget(st.pending.take());
    for slot in st.regions.values_mut() {
        let _ = tracker.detach(&slot.tr);
        // Not unmapped when the slot drops: the child keeps using it.
        std::mem::forget(slot.owned.take());
    }
}

/// The wrappers tests and measurements put around the first tier: one that keeps nothing
/// (`ICKPT_DISCARD_WRITES`), one that injects a fault (`Config::fault`, `ICKPT_FAULT`).
#[cfg(feature = "testing")]
fn testing_wrappers(
    mut store: Box<dyn Store>,
    cfg: &Config,
    test: &TestSwitches,
) -> Box<dyn Store> {
    use crate::store::{DiscardStore, FaultPlan, FaultTarget, FaultyStore};
    if test.discard_writes {
        store = Box::new(DiscardStore::new(store));
    }
    if let Some((f, target)) = cfg.fault.map(|f| (f, FaultTarget::Any)).or(test.fault) {
        let plan = FaultPlan::new();
        plan.arm_for(f, target);
        store = Box::new(FaultyStore::new(store, plan));
    }
    store
}

/// The encoder a commit uses: zstd at `level` in a workspace of its own (never malloc on the
/// commit path), batches of the engine's size for pages of `ps` bytes.
pub fn frame_encoder(level: Option<i32>, ps: usize) -> std::io::Result<ickpt_format::FrameEncoder> {
    let batch = sink::batch_bytes(ps);
    let zstd = level
        .map(|l| crate::sys::zstd::StaticZstd::new(l, batch))
        .transpose()?
        .map(|z| Box::new(z) as Box<dyn ickpt_format::Compress>);
    Ok(ickpt_format::FrameEncoder::with(zstd, batch))
}

/// The identity this engine writes into its versions: the one the store records; else the
/// one its files carry (a marker lost or written before format 3), recorded now; else a new
/// one for a new store.
fn settle_identity(store: &dyn Store) -> Result<StoreId, InitError> {
    let io = |op, e| FileError::new(store.describe(""), op, e);
    if let Some(id) = store
        .identity()
        .map_err(|e| io("reading the store's identity", e))?
    {
        return Ok(id);
    }
    let id = match catalog::infer_identity(store)? {
        Some(id) => id,
        None => StoreId::generate().map_err(|e| io("making the store's identity", e))?,
    };
    store
        .set_identity(id)
        .map_err(|e| io("recording the store's identity", e))?;
    Ok(id)
}

/// A version must stay readable: the reader refuses more regions or pages than the format's
/// limits (docs/FORMAT.md), so protecting more is refused here, before any version exists.
fn within_format_limits(st: &State, new: &TrackedRegion) -> Result<(), ProtectError> {
    use ickpt_format::limits::{MAX_PAGES, MAX_REGIONS};
    let bad = |problem| ProtectError::BadRange {
        id: new.id,
        start: new.user_ptr,
        len: new.user_len,
        problem,
    };
    if st.regions.len() as u64 >= MAX_REGIONS as u64 {
        return Err(bad(RangeProblem::TooManyRegions {
            max: MAX_REGIONS as u64,
        }));
    }
    let pages: u64 =
        st.regions.values().map(|s| s.tr.npages as u64).sum::<u64>() + new.npages as u64;
    if pages > MAX_PAGES {
        return Err(bad(RangeProblem::TooManyPages {
            pages,
            max: MAX_PAGES,
            gib: (MAX_PAGES * page_size() as u64) >> 30,
            page_size: page_size(),
        }));
    }
    Ok(())
}
