//! Several stores seen as one, fastest first (the hybrid full/incremental paper's
//! local-then-shared storage): the node-local directory where commits land, then the tiers
//! the drain thread copies them to (`engine/drain.rs`). Reads see every tier's files; each
//! file is read from the first tier that holds a copy passing a cheap check, so a restart
//! on another node (local copy gone) or after local damage reads the shared copy. Writes go
//! to the first tier only: each lower tier is written by the drain, never by a commit. A
//! removal (garbage collection, a restart discarding versions newer than a job's global
//! version) removes every tier's copy, so no tier keeps a version a later restart must not
//! pick.

use super::{parse_version_name, Store, StoreFile, StoreId, StoreWriter};
use ickpt_format::{parse_global_name, read_meta, GlobalRecord, GLOBAL_RECORD_LEN};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::io;
use std::sync::{Arc, Mutex};

/// One tier: what `ls` calls it ("local", "shared") and its store.
#[derive(Clone)]
pub struct Tier {
    pub name: &'static str,
    pub store: Arc<dyn Store>,
}

pub struct TieredStore {
    tiers: Vec<Tier>,
    state: Mutex<Choices>,
    /// Held while a file is removed from every tier (and by the drain while it commits a
    /// copy: `engine/drain.rs`).
    removals: Arc<Mutex<()>>,
}

#[derive(Default)]
struct Choices {
    /// The tier each file was last read from, so a failure found later (a damaged page) can
    /// be blamed on that copy.
    served: HashMap<String, usize>,
    /// Copies found damaged: never read again by this store.
    bad: HashSet<(usize, String)>,
}

impl TieredStore {
    /// `tiers[0]` takes the writes. At least one tier.
    pub fn new(tiers: Vec<Tier>) -> TieredStore {
        assert!(!tiers.is_empty(), "a tiered store needs a tier");
        TieredStore {
            tiers,
            state: Mutex::default(),
            removals: Arc::default(),
        }
    }

    /// The lock removals hold, for the drain.
    pub(crate) fn removals(&self) -> Arc<Mutex<()>> {
        self.removals.clone()
    }

    pub fn tiers(&self) -> &[Tier] {
        &self.tiers
    }

    fn choices(&self) -> std::sync::MutexGuard<'_, Choices> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A restore found the file `described` (as [`Store::describe`] named it) damaged: read
    /// that file from another tier from now on. False when no other tier holds a copy not
    /// yet found damaged, so that trying again would only meet the same damage.
    pub fn blame(&self, described: &str) -> bool {
        let mut c = self.choices();
        let Some((name, tier)) = c
            .served
            .iter()
            .find(|(name, &t)| self.tiers[t].store.describe(name) == described)
            .map(|(n, &t)| (n.clone(), t))
        else {
            return false;
        };
        c.bad.insert((tier, name.clone()));
        c.served.remove(&name);
        let others = (0..self.tiers.len()).filter(|t| !c.bad.contains(&(*t, name.clone())));
        let others: Vec<usize> = others.collect();
        drop(c);
        others
            .into_iter()
            .any(|t| self.tiers[t].store.list().is_ok_and(|l| l.contains(&name)))
    }
}

/// Make `attempt` until it succeeds or fails for a reason no other tier's copy can mend: each
/// time its error names a damaged file (`damaged`), that copy is blamed and the attempt made
/// again, reading another tier's. The walk of every restore through the tiers (the engine's,
/// `ickpt restore`'s), and of `verify` judging what a restore accepts.
pub fn retry_other_copies<T, E>(
    tiered: Option<&TieredStore>,
    damaged: impl Fn(&E) -> Option<&str>,
    mut attempt: impl FnMut() -> Result<T, E>,
) -> Result<T, E> {
    loop {
        match attempt() {
            Err(e) if tiered.is_some_and(|t| damaged(&e).is_some_and(|f| t.blame(f))) => {}
            r => return r,
        }
    }
}

/// Whether a copy of `name` looks whole: a version's metadata passes its checks, a
/// global-commit record decodes. Page data is checked as a restore reads it ([`blame`]).
///
/// [`blame`]: TieredStore::blame
pub fn looks_whole(name: &str, file: &dyn StoreFile) -> bool {
    if parse_version_name(name).is_some() {
        return read_meta(file, file.len()).is_ok();
    }
    if let Some(g) = parse_global_name(name) {
        let mut b = [0u8; GLOBAL_RECORD_LEN];
        return file.len() == GLOBAL_RECORD_LEN as u64
            && file.read_exact_at(&mut b, 0).is_ok()
            && GlobalRecord::decode(&b, g).is_ok();
    }
    true
}

impl Store for TieredStore {
    fn describe(&self, name: &str) -> String {
        let t = self.choices().served.get(name).copied().unwrap_or(0);
        self.tiers[t].store.describe(name)
    }

    /// Every tier's committed files, each name once. A lower tier that cannot be listed (a
    /// shared file system away) hides its files, as if it held none; the first tier's
    /// failure is the store's.
    fn list(&self) -> io::Result<Vec<String>> {
        let mut names: BTreeSet<String> = self.tiers[0].store.list()?.into_iter().collect();
        for t in &self.tiers[1..] {
            names.extend(t.store.list().unwrap_or_default());
        }
        Ok(names.into_iter().collect())
    }

    fn open(&self, name: &str) -> io::Result<Box<dyn StoreFile>> {
        let mut first: Option<(usize, Box<dyn StoreFile>)> = None;
        let mut first_error = None;
        for (t, tier) in self.tiers.iter().enumerate() {
            if self.choices().bad.contains(&(t, name.to_string())) {
                continue;
            }
            match tier.store.open(name) {
                Ok(f) if looks_whole(name, &*f) => {
                    self.choices().served.insert(name.to_string(), t);
                    return Ok(f);
                }
                // Kept in case no copy looks whole: the reader then names its damage.
                Ok(f) => {
                    first.get_or_insert((t, f));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some((t, f)) = first {
            self.choices().served.insert(name.to_string(), t);
            return Ok(f);
        }
        Err(first_error.unwrap_or_else(|| io::ErrorKind::NotFound.into()))
    }

    fn create(&self, name: &str) -> io::Result<Box<dyn StoreWriter>> {
        self.tiers[0].store.create(name)
    }

    /// From every tier, fastest first; a tier without the file is not an error. The first
    /// failure is returned after every tier was tried.
    fn remove(&self, name: &str) -> io::Result<()> {
        let _held = self.removals.lock().unwrap_or_else(|e| e.into_inner());
        self.choices().served.remove(name);
        let mut first_error = None;
        for t in &self.tiers {
            match t.store.remove(name) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    first_error.get_or_insert(e);
                }
                _ => {}
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn identity(&self) -> io::Result<Option<StoreId>> {
        self.tiers[0].store.identity()
    }

    fn set_identity(&self, id: StoreId) -> io::Result<()> {
        self.tiers[0].store.set_identity(id)
    }
}
