//! The engine: protected regions, their page protocol, and checkpoint / restore against a store.
//! This file holds the engine's state; each operation has a file of its own: opening it over
//! its store stack (`open.rs`), regions (`regions.rs`), checkpoints (`checkpoint.rs`,
//! `schedule.rs`, `commit.rs`), restores (`restore_regions.rs`), what it reports
//! (`observe.rs`) and its end, in the process that opened it or a forked child (`end.rs`).

mod checkpoint;
mod commit;
mod drain;
mod end;
pub(crate) mod gc;
mod global;
mod inject;
mod observe;
mod open;
mod outside_drain;
mod pending;
pub(crate) mod precopy;
mod regions;
mod restart;
mod restore_regions;
mod schedule;
mod section;
mod sink;
mod stats;
mod versions;

pub use inject::InjectInfo;
pub use open::frame_encoder;
pub use outside_drain::OutsideDrain;
pub use precopy::PrecopyInfo;
pub(crate) use regions::region_error;
pub use regions::ReportedWrites;
pub use section::{SectionSave, SectionStart, MAX_NAME as MAX_SECTION_NAME};
pub use stats::{CheckpointInfo, Phases, RestoreInfo, Stats};

use crate::config::Config;
use crate::error::{CheckpointError, ForkedChild};
use crate::policy::Head;
use crate::store::{Store, StoreId, TieredStore};
use crate::sys::mem::Mapping;
use crate::track::{Backend, OwnBytes, Protocol, TrackedRegion, Tracker};
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
    /// The bytes of the chain `head` ends, for the restart bound; None when not known.
    pub chain_bytes: Option<crate::policy::ChainBytes>,
    /// Program sections (CAPE).
    pub sections: section::Sections,
    /// Pre-copy (PRWIP); None when off.
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
    /// aborted the version (`tests/commits/owner_heap.rs`).
    staging: Arc<Mutex<OwnBytes>>,
    /// Encodes each batch into frames (format 6): made once, so a commit allocates nothing.
    encoder: Arc<Mutex<ickpt_format::FrameEncoder>>,
    /// Shared with the pre-copier thread.
    state: Arc<Mutex<State>>,
    /// Writes dirty pages out between checkpoints (PRWIP); None when pre-copy is off.
    precopier: Option<precopy::Precopier>,
    /// Turns ACCK's released spans into huge pages (when both are on).
    huge_worker: Option<std::thread::JoinHandle<()>>,
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
    /// Called by an async checkpoint once its pages are scheduled, before its commit starts
    /// (`Engine::on_scheduled`).
    scheduled: Option<Box<dyn Fn() + Send + Sync>>,
}

impl Engine {
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn store(&self) -> &dyn Store {
        &*self.store
    }

    pub fn backend(&self) -> Backend {
        self.tracker.backend()
    }

    /// Have every async checkpoint call `go` once its pages are scheduled (collected and
    /// fenced: from then on the version is fixed, whatever the program writes), before the
    /// commit starts. `ickpt run` releases the program's stopped threads there, so that they
    /// run on during the commit and the commit's thread starts with them running.
    pub fn on_scheduled(&mut self, go: Box<dyn Fn() + Send + Sync>) {
        self.scheduled = Some(go);
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
}
