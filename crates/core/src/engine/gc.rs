//! Garbage collection of chains older than the configured number of full versions.

use super::Engine;
use crate::error::{FileError, GcError};
use crate::policy;
use crate::read::catalog::Catalog;
use crate::store::{version_name, Store};

impl Engine {
    /// Delete versions no restore of a kept chain can need. Returns what was deleted.
    pub fn collect_garbage(&self) -> Result<Vec<u64>, GcError> {
        let mut st = self.lock_for_change()?;
        self.settle(&mut st);
        let head = st.head.map(|h| h.version);
        collect(
            &Catalog::with_identity(&*self.local, Some(self.id)),
            self.cfg.keep_chains,
            head,
            self.undrained_after(),
        )
    }
}

/// Delete the versions that no restore of the `keep_chains` newest restorable chains needs.
/// Only versions that pass the catalog's checks count or are deleted: a damaged or foreign
/// file (a stray full version with a high number, say) neither pushes the store's own chains
/// out nor is removed; `verify` reports it. The chain of `head` (what the engine's next
/// checkpoint increments) is always kept: after a restore fell back past a newer chain whose
/// pages turned out damaged, that older chain is the engine's own. So are the chains of the
/// versions the newest two global records name (`global.rs`): a restart of the job may need
/// either. So are the chains of versions numbered above `undrained_after`: the drain has not
/// copied them to every lower tier yet (`drain.rs`; `u64::MAX` when there is no lower tier).
pub(super) fn collect(
    catalog: &Catalog<'_>,
    keep_chains: u32,
    head: impl IntoIterator<Item = u64>,
    undrained_after: u64,
) -> Result<Vec<u64>, GcError> {
    let known: Vec<_> = catalog
        .survey(None)?
        .into_iter()
        .filter_map(|s| {
            let h = &s.summary.as_ref().filter(|_| s.problem.is_none())?.header;
            Some((s.version, h.kind, h.parent))
        })
        .collect();
    let store = catalog.store();
    let mut keep = crate::read::global_records::kept_versions(catalog)?;
    keep.extend(head);
    keep.extend(known.iter().map(|k| k.0).filter(|&v| v > undrained_after));
    let doomed = policy::collectable(&known, keep_chains, &keep);
    for &v in &doomed {
        remove(store, &version_name(v))?;
    }
    Ok(doomed)
}

/// Remove `name` from `store`, naming it on failure. A file already gone is not one: the
/// drain collects a lower tier while a restart's discard may remove from every tier.
pub(super) fn remove(store: &dyn Store, name: &str) -> Result<(), FileError> {
    match store.remove(name) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r.map_err(|e| FileError::new(store.describe(name), "remove", e)),
    }
}
