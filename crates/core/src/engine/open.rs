//! Opening an engine: the store stack its commits go through (the first tier, throttled,
//! with the tests' wrappers; lower tiers behind a drain), the store's identity, the tracker,
//! and the threads an engine runs beside the application.

use super::{drain, precopy, sink, Engine, State, Stats};
use crate::config::env::TestSwitches;
use crate::config::Config;
use crate::error::{DrainError, FileError, InitError};
use crate::read::catalog;
use crate::store::{DirStore, RealFs, Store, StoreId, ThrottledStore, Tier, TieredStore};
use crate::sys::page_size;
use crate::track::{self, Granularity, OwnBytes, Protocol};
use ickpt_format::CommitMode;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

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
        let tracker: Arc<dyn track::Tracker> = Arc::new(track::WithReported {
            inner: track::select(cfg.backend, test.uffd_spin, test.hide)?,
        });
        let id = settle_identity(&*store)?;
        // Past every name in the store, readable or not: a name is never reused.
        let next_version = catalog::versions(&*store)?.last().map_or(1, |v| v + 1);
        let protocol = Arc::new(
            Protocol::new(
                cfg.cow_bytes,
                // Only a call whose other threads run on, on a tracker whose first writes
                // never reach ickpt, copies pages ahead (`schedule::copy_ahead`).
                match cfg.mode == CommitMode::Async
                    && !cfg.others_stopped
                    && !tracker.sees_every_write()
                {
                    true => track::protocol::schedule::ahead_bytes(cfg.cow_bytes),
                    false => 0,
                },
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
        let staging = OwnBytes::scratch(sink::batch_bytes(page_size()))
            .map_err(track::TrackError::OwnAlloc)?;
        let encoder = frame_encoder(cfg.compression.level(cfg.mode), page_size())
            .map_err(track::TrackError::OwnAlloc)?;
        let precopy = (cfg.precopy != crate::policy::prwip::Strategy::Off)
            .then(|| precopy::PreCopy::new(cfg.precopy, cfg.checkpoint_interval));
        let mut engine = Engine {
            precopier: None,
            local: store.clone(),
            drain: None,
            tiered: None,
            huge_worker,
            pid: std::process::id(),
            scheduled: None,
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
                chain_bytes: None,
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
/// commit path), batches of the engine's size for pages of `ps` bytes, compressed into
/// scratch memory: every async commit rewrites that buffer, and under `ickpt run` a buffer
/// on ickpt's heap was up to 64 pages the next capture of ickpt's state compared and copied.
pub fn frame_encoder(level: Option<i32>, ps: usize) -> std::io::Result<ickpt_format::FrameEncoder> {
    let batch = sink::batch_bytes(ps);
    let zstd = level
        .map(|l| crate::sys::zstd::StaticZstd::new(l, batch))
        .transpose()?
        .map(|z| Box::new(z) as Box<dyn ickpt_format::Compress>);
    let scratch = EncoderScratch(OwnBytes::scratch(batch)?);
    Ok(ickpt_format::FrameEncoder::with_scratch(
        zstd,
        Box::new(scratch),
    ))
}

/// The encoder's buffer in scratch memory (`frame_encoder`).
struct EncoderScratch(OwnBytes);

impl ickpt_format::Scratch for EncoderScratch {
    fn bytes(&mut self) -> &mut [u8] {
        self.0.as_mut_slice()
    }
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

#[cfg(test)]
mod tests {
    use ickpt_format::Scratch;

    /// The encoder's buffer lies in scratch memory, which a whole-process checkpoint does
    /// not store.
    #[test]
    fn the_encoders_buffer_is_scratch() {
        let mut b = super::EncoderScratch(super::OwnBytes::scratch(1 << 18).unwrap());
        assert!(crate::sys::own_spans::in_scratch(
            b.bytes().as_ptr() as usize
        ));
    }
}
