//! The drain: a thread that copies committed versions from the first tier (node-local) down
//! to the lower ones (shared storage), in the background, at a bounded bandwidth (the hybrid
//! full/incremental paper: "after local checkpointing, files will be asynchronously copied
//! to shared storage").
//!
//! It works by listing, not by a queue: each round copies every version file, then every
//! global-commit record, that the first tier holds and a lower tier lacks, oldest first.
//! So it needs no state of its own to resume after a restart, and commit order is kept. A
//! copy becomes visible on a tier only whole (the tier's writer commits it atomically).
//! The application never waits for it: a commit only raises a flag. Garbage collection is
//! per tier: the engine's collects the first tier only, keeping every chain not yet on every
//! lower tier (`gc.rs`); the drain collects each lower tier after its copies, keeping every
//! version the first tier still holds. So a chain leaves a lower tier only once its successor
//! is there, and the application's thread never waits on shared storage.

use super::gc;
use crate::error::{CheckpointError, DrainError, FileError};
use crate::policy::Retention;
use crate::read::catalog::Catalog;
use crate::read::global_records::record_numbers;
use crate::store::{looks_whole, parse_version_name, Store, StoreId, Tier, TieredStore};
use ickpt_format::parse_global_name;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// Bytes a copy moves per read and write, at most; a closing engine waits for one chunk.
const CHUNK: usize = 256 << 10;

/// A chunk of about a tenth of a second at `bandwidth` bytes per second (within 4 KiB and
/// [`CHUNK`]), so that closing an engine never waits long for a slow drain.
pub(crate) fn chunk_for(bandwidth: Option<u64>) -> usize {
    bandwidth.map_or(CHUNK, |b| ((b / 10) as usize).clamp(4096, CHUNK))
}

pub(crate) struct TierDrain {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    first: Arc<dyn Store>,
    lower: Vec<Tier>,
    id: StoreId,
    retention: Retention,
    chunk: usize,
    /// Held by `TieredStore::remove` while it removes a file from every tier, and here from
    /// checking that a file copied is still on the first tier to committing the copy: a
    /// version discarded or collected meanwhile never comes back on a lower tier.
    removals: Arc<Mutex<()>>,
    state: Mutex<State>,
    changed: Condvar,
    /// Read between chunks: a closing engine abandons the copy under way (its tier never
    /// sees a partial file) instead of waiting for it at the drain's bandwidth.
    stop: AtomicBool,
}

#[derive(Default)]
struct State {
    /// Every version up to this one that the first tier held when a round began is on every
    /// lower tier.
    drained: u64,
    requested: bool,
    started: u64,
    finished: u64,
    /// The last round's failure, cleared by a round that succeeds.
    error: Option<DrainError>,
    /// The newest global record on every lower tier (what outlives the node), as the last
    /// round that succeeded (or the start) left them, lowered by discards since.
    drained_global: u64,
    /// Discards so far: a round that began before one does not set `drained_global` (it
    /// may have seen records the discard removed).
    discards: u64,
}

impl TierDrain {
    /// Start the thread, which at once runs a round: what an earlier run left undrained goes
    /// first.
    pub(crate) fn start(
        tiers: &TieredStore,
        id: StoreId,
        retention: Retention,
        chunk: usize,
    ) -> std::io::Result<TierDrain> {
        // Before the first round: the MPI layer may ask at its first checkpoint.
        let drained_global = newest_common(
            tiers.tiers()[1..]
                .iter()
                .map(|t| record_numbers(&*t.store).unwrap_or_default()),
        );
        let shared = Arc::new(Shared {
            first: tiers.tiers()[0].store.clone(),
            lower: tiers.tiers()[1..].to_vec(),
            id,
            retention,
            chunk,
            removals: tiers.removals(),
            state: Mutex::new(State {
                requested: true,
                drained_global,
                ..State::default()
            }),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("ickpt-drain".into())
            .spawn(move || s.run())?;
        Ok(TierDrain {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// A version was committed on the first tier: drain it (returns at once).
    pub(crate) fn committed(&self) {
        let mut st = self.shared.lock();
        st.requested = true;
        self.shared.changed.notify_all();
    }

    /// Every version up to this one is on every lower tier (as far as the drain knows).
    pub(crate) fn drained(&self) -> u64 {
        self.shared.lock().drained
    }

    /// The newest global record on every lower tier (as far as the drain knows); 0: none.
    pub(crate) fn drained_global(&self) -> u64 {
        self.shared.lock().drained_global
    }

    /// Records are being removed from every tier (a restart's discard); `left` is what will
    /// remain. Called before the removals and after them: a round under way in between does
    /// not count.
    pub(crate) fn discarded(&self, left: &[u64]) {
        let mut st = self.shared.lock();
        let g = st.drained_global;
        st.drained_global = left.iter().copied().filter(|&r| r <= g).max().unwrap_or(0);
        st.discards += 1;
    }

    /// Run a round that starts after this call, and wait for it: Ok when every file the
    /// first tier holds now (versions and global records) is on every lower tier, else why
    /// not.
    pub(crate) fn wait(&self) -> Result<(), DrainError> {
        let s = &self.shared;
        let mut st = s.lock();
        st.requested = true;
        // A round under way may have listed the first tier before the call (before the last
        // commit, or the global record written after it): wait for one that begins after.
        let ticket = st.started + 1;
        s.changed.notify_all();
        let st = s
            .changed
            .wait_while(st, |st| {
                st.finished < ticket && !s.stop.load(Ordering::Relaxed)
            })
            .unwrap_or_else(|e| e.into_inner());
        // The last round to finish began after the call too.
        match (&st.error, st.finished >= ticket) {
            (None, true) => Ok(()),
            (Some(e), true) => Err(e.clone()),
            (_, false) => Err(DrainError::Stopped),
        }
    }

    /// Stop the thread: a copy under way is abandoned, what is left is drained at the next
    /// start.
    pub(crate) fn stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.changed.notify_all();
        let handle = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

impl Drop for TierDrain {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn run(&self) {
        loop {
            let mut st = self
                .changed
                .wait_while(self.lock(), |st| {
                    !st.requested && !self.stop.load(Ordering::Relaxed)
                })
                .unwrap_or_else(|e| e.into_inner());
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            st.requested = false;
            st.started += 1;
            let discards = st.discards;
            drop(st);
            // A panic in a round is reported, not left to stop the thread: `wait` would
            // wait for ever.
            let (reached, common, result) =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.round()))
                    .unwrap_or_else(|p| (0, None, Err(DrainError::Panicked(panic_text(&*p)))));
            let mut st = self.lock();
            st.finished += 1;
            if let Some(g) = common.filter(|_| st.discards == discards) {
                st.drained_global = g;
            }
            // Also after a failure: what was copied before it may be collected on the first
            // tier, so one bad file or a full shared tier does not fill the local one.
            st.drained = st.drained.max(reached);
            st.error = result.err();
            self.changed.notify_all();
        }
    }

    fn list_first(&self) -> Result<Vec<String>, DrainError> {
        self.first.list().map_err(|e| {
            DrainError::file("local", FileError::new(self.first.describe(""), "list", e))
        })
    }

    /// One pass over the lower tiers. Returns the newest version up to which every version
    /// the first tier held when the round began is on every tier; after a round that
    /// succeeded, the newest global record on every lower tier; and how the round ended.
    fn round(&self) -> (u64, Option<u64>, Result<(), DrainError>) {
        let names = match self.list_first() {
            Ok(n) => n,
            Err(e) => return (0, None, Err(e)),
        };
        let mut versions: Vec<(u64, &String)> = names
            .iter()
            .filter_map(|n| parse_version_name(n).map(|v| (v, n)))
            .collect();
        versions.sort_unstable();
        let mut records: Vec<(u64, &String)> = names
            .iter()
            .filter_map(|n| parse_global_name(n).map(|g| (g, n)))
            .collect();
        records.sort_unstable();
        let local: Vec<u64> = versions.iter().map(|v| v.0).collect();
        let mut reached = u64::MAX;
        let mut on_tiers = Vec::new();
        for tier in &self.lower {
            let mut r = 0;
            let result = self.fill(tier, &versions, &records, &local, &mut r);
            reached = reached.min(r);
            match result {
                Ok(held) => on_tiers.push(held),
                Err(e) => return (reached, None, Err(e)),
            }
        }
        let reached = reached.min(local.last().copied().unwrap_or(0));
        (reached, Some(newest_common(on_tiers)), Ok(()))
    }

    /// Copy what `tier` lacks, then collect its superseded chains. `reached` ends at the
    /// newest version up to which every one of `versions` is there, also on failure.
    /// Returns the global records the tier then holds.
    fn fill(
        &self,
        tier: &Tier,
        versions: &[(u64, &String)],
        records: &[(u64, &String)],
        local: &[u64],
        reached: &mut u64,
    ) -> Result<Vec<u64>, DrainError> {
        let store = &*tier.store;
        let io = |op, name: &str, e| {
            DrainError::file(tier.name, FileError::new(store.describe(name), op, e))
        };
        match store
            .identity()
            .map_err(|e| io("reading the store's identity", "", e))?
        {
            None => store
                .set_identity(self.id)
                .map_err(|e| io("recording the store's identity", "", e))?,
            Some(found) if found != self.id => {
                return Err(DrainError::Foreign {
                    tier: tier.name,
                    dir: store.describe(""),
                    found,
                    own: self.id,
                })
            }
            Some(_) => {}
        }
        let held: HashSet<String> = store
            .list()
            .map_err(|e| io("list", "", e))?
            .into_iter()
            .collect();
        for &(v, name) in versions {
            if !held.contains(name.as_str()) {
                self.copy(tier, name)?;
            }
            *reached = v;
        }
        let mut on_tier: Vec<u64> = held.iter().filter_map(|n| parse_global_name(n)).collect();
        for &(g, name) in records {
            if !held.contains(name.as_str()) && self.copy(tier, name)? {
                on_tier.push(g);
            }
        }
        // Whatever the first tier still holds stays here too: a restore there may fall back
        // to it (the engine's head after a restore, a version a global record names).
        let catalog = Catalog::with_identity(store, Some(self.id));
        gc::collect(&catalog, &self.retention, local.iter().copied(), u64::MAX)
            .map_err(|e| DrainError::collect(tier.name, e))?;
        gc::collect_orphans(&catalog, |v| local.binary_search(&v).is_ok())
            .map_err(|e| DrainError::collect(tier.name, e))?;
        // Records the first tier dropped (it keeps the newest two and the pinned one) go
        // too, once older than every record it still holds.
        if let Some(&(oldest_kept, _)) = records.first() {
            for name in &held {
                if parse_global_name(name).is_some_and(|g| g < oldest_kept) {
                    gc::remove(store, name).map_err(|e| DrainError::file(tier.name, e))?;
                }
            }
            on_tier.retain(|&g| g >= oldest_kept);
        }
        Ok(on_tier)
    }

    /// Copy `name` whole from the first tier to `tier`. A file the first tier removed
    /// meanwhile (collected, discarded) is passed over, and so is one whose metadata fails
    /// its checks there: damage is not spread to the tier a restore falls back on. True when
    /// the copy was committed.
    fn copy(&self, tier: &Tier, name: &str) -> Result<bool, DrainError> {
        let from =
            |op, e| DrainError::Source(Arc::new(FileError::new(self.first.describe(name), op, e)));
        let to =
            |op, e| DrainError::file(tier.name, FileError::new(tier.store.describe(name), op, e));
        let file = match self.first.open(name) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(from("open", e)),
        };
        if !looks_whole(name, &*file) {
            return Ok(false);
        }
        file.advise_sequential();
        let mut out = tier.store.create(name).map_err(|e| to("create", e))?;
        let mut buf = vec![0u8; self.chunk.min(file.len() as usize)];
        let mut at = 0u64;
        while at < file.len() {
            if self.stop.load(Ordering::Relaxed) {
                // Dropped uncommitted: the tier never shows it.
                return Err(DrainError::Stopped);
            }
            let n = self.chunk.min((file.len() - at) as usize);
            file.read_exact_at(&mut buf[..n], at)
                .map_err(|e| from("read", e))?;
            out.write_all(&buf[..n]).map_err(|e| to("write", e))?;
            at += n as u64;
        }
        let _held = self.removals.lock().unwrap_or_else(|e| e.into_inner());
        match self.first.open(name) {
            // Dropped uncommitted: removed from every tier while it was being copied.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            _ => out.commit().map(|()| true).map_err(|e| to("commit", e)),
        }
    }
}

/// The newest number in every one of `sets` (0: none, or no set).
fn newest_common(sets: impl IntoIterator<Item = Vec<u64>>) -> u64 {
    let mut sets = sets.into_iter();
    let Some(first) = sets.next() else {
        return 0;
    };
    let rest: Vec<HashSet<u64>> = sets.map(|s| s.into_iter().collect()).collect();
    first
        .into_iter()
        .filter(|g| rest.iter().all(|s| s.contains(g)))
        .max()
        .unwrap_or(0)
}

/// What a panic carried, for the error that reports it.
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

impl super::Engine {
    /// Versions numbered above this one may not be on every lower tier yet, so garbage
    /// collection keeps their chains. `u64::MAX` without lower tiers.
    pub(super) fn undrained_after(&self) -> u64 {
        super::outside_drain::undrained_after(
            self.drain.as_deref(),
            self.cfg.drained_elsewhere,
            &*self.local,
        )
    }

    /// Wait until every version committed so far is on every lower tier (node-local data is
    /// then safe off-node), or say why not: a tier that failed (full, unreachable, another
    /// store's) fails this call, and the drain tries again at the next checkpoint. An async
    /// checkpoint still running is waited for first. Ok at once without lower tiers. Then each
    /// tier's collection catches up with what was waiting to be copied (best effort).
    pub fn wait_drained(&self) -> Result<(), crate::error::Error> {
        let Some(drain) = &self.drain else {
            return Ok(());
        };
        {
            // A commit still running is part of what "so far" means.
            let mut st = self.lock_for_change().map_err(CheckpointError::from)?;
            self.settle(&mut st);
        }
        drain.wait()?;
        // The first tier kept what was not copied yet; now that it is, its collection catches
        // up (best effort, as after a commit), and one more round takes the lower tiers along.
        // Everything is off the node already: that round's failure is the next round's to
        // report, not this call's.
        if self.collect_garbage().is_ok_and(|gone| !gone.is_empty()) {
            let _ = drain.wait();
        }
        Ok(())
    }

    /// The newest version such that it and every version before it that the first tier
    /// held are on every lower tier; None without lower tiers.
    pub fn drained_version(&self) -> Option<u64> {
        self.drain.as_ref().map(|d| d.drained())
    }
}
