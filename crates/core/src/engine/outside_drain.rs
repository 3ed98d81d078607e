//! A drain run by another process than the store's writer. A program under `ickpt run` may
//! hold no socket (a restart could not bring one back), so the object-store tier's client
//! cannot live in it; `ickpt run`'s supervisor, outside the program, drains the program's
//! first tier to the bucket instead, with the same rounds as the engine's own drain
//! (`drain.rs`). After each round it records in the first tier how far every version is
//! copied (the file [`MARK`]); the writer's collection, told by
//! `Config::drained_elsewhere`, keeps every chain above that mark, as it keeps what its own
//! drain has not copied yet.

use super::drain::{chunk_for, TierDrain};
use crate::error::{DrainError, InitError};
use crate::store::{DirStore, Store, Tier, TieredStore};
use crate::Config;
use std::sync::Arc;

/// The first tier's file that says up to which version the outside drain has copied
/// everything: a decimal number and a newline, replaced whole by each round.
pub const MARK: &str = "ickpt-drained";

/// The largest mark file read; anything longer is not one.
const MARK_MAX: u64 = 32;

/// Versions numbered above this one may not be on every lower tier yet: those `own` (the
/// engine's drain) and, when `elsewhere`, those the outside drain's mark in `first` covers.
/// `u64::MAX` without either.
pub(crate) fn undrained_after(own: Option<&TierDrain>, elsewhere: bool, first: &dyn Store) -> u64 {
    let own = own.map_or(u64::MAX, |d| d.drained());
    if elsewhere {
        own.min(read_mark(first))
    } else {
        own
    }
}

/// How far the outside drain has copied `first` (0: nothing yet, no mark, or a bad one).
fn read_mark(first: &dyn Store) -> u64 {
    let Ok(f) = first.open(MARK) else {
        return 0;
    };
    let len = f.len().min(MARK_MAX) as usize;
    let mut buf = vec![0u8; len];
    if f.read_exact_at(&mut buf, 0).is_err() {
        return 0;
    }
    std::str::from_utf8(&buf)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// The drain of a store another process writes, to tiers that process does not open.
pub struct OutsideDrain {
    first: Arc<dyn Store>,
    drain: TierDrain,
}

impl OutsideDrain {
    /// Start draining the store `cfg.dir` (opened for reading; its writer keeps its lock)
    /// to `lower`, with the retention `cfg` gives for the lower tiers' collection. The store
    /// must have its identity, which its writer records when it opens it.
    pub fn start(cfg: &Config, lower: Vec<Tier>) -> Result<OutsideDrain, InitError> {
        let first: Arc<dyn Store> = Arc::new(DirStore::open_read(&cfg.dir)?);
        let io = |e: std::io::Error| {
            InitError::File(crate::FileError::new(
                first.describe(""),
                "reading the store's identity",
                e,
            ))
        };
        let id = first.identity().map_err(io)?.ok_or_else(|| {
            io(std::io::Error::other(
                "none recorded yet: its writer has not opened it",
            ))
        })?;
        let mut tiers = vec![Tier {
            name: "local",
            store: first.clone(),
        }];
        tiers.extend(lower);
        let tiered = TieredStore::new(tiers);
        let drain = TierDrain::start(&tiered, id, cfg.retention(), chunk_for(cfg.drain_bandwidth))
            .map_err(|e| {
                InitError::File(crate::FileError::new("the drain thread", "starting", e))
            })?;
        Ok(OutsideDrain { first, drain })
    }

    /// Run a round that starts after this call and wait for it, then record how far every
    /// version is copied (also after a failure: what was copied before it counts).
    pub fn round(&self) -> Result<(), DrainError> {
        let result = self.drain.wait();
        let reached = self.drain.drained();
        self.write_mark(reached)
            .map_err(|e| DrainError::file("local", e))?;
        result
    }

    /// Every version up to this one is on every lower tier.
    pub fn drained(&self) -> u64 {
        self.drain.drained()
    }

    /// The store commits no file over another (versions are never replaced), so the old mark
    /// goes first: a reader between the two finds none and keeps everything, which is safe.
    fn write_mark(&self, reached: u64) -> Result<(), crate::FileError> {
        let err = |op, e| crate::FileError::new(self.first.describe(MARK), op, e);
        match self.first.remove(MARK) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(err("remove", e)),
            _ => {}
        }
        let mut w = self.first.create(MARK).map_err(|e| err("create", e))?;
        w.write_all(format!("{reached}\n").as_bytes())
            .map_err(|e| err("write", e))?;
        w.commit().map_err(|e| err("commit", e))
    }
}
