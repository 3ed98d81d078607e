//! Garbage collection: what the configured retention (`policy::Retention`) lets go.

use super::Engine;
use crate::error::{FileError, GcError, ReadError};
use crate::policy::{self, Known, Retention};
use crate::read::catalog::{Catalog, Surveyed};
use crate::store::{version_name, Store};

impl Engine {
    /// Delete versions no restore of a kept chain can need. Returns what was deleted.
    pub fn collect_garbage(&self) -> Result<Vec<u64>, GcError> {
        let mut st = self.lock_for_change()?;
        self.settle(&mut st);
        let head = st.head.map(|h| h.version);
        collect(
            &Catalog::with_identity(&*self.local, Some(self.id)),
            &self.cfg.retention(),
            head,
            self.undrained_after(),
        )
    }
}

/// Delete the versions `retention` lets go (`policy::collectable`). Only versions that pass the catalog's checks count or are deleted: a damaged or foreign
/// file (a stray full version with a high number, say) neither pushes the store's own chains
/// out nor is removed; `verify` reports it. The chain of `head` (what the engine's next
/// checkpoint increments) is always kept: after a restore fell back past a newer chain whose
/// pages turned out damaged, that older chain is the engine's own. So is what restoring the
/// version of every global record present reads (the newest two and a pinned one,
/// `global.rs`): a restart of the job may need any. So is what restoring versions numbered
/// above `undrained_after` reads: the drain has not copied them to every lower tier yet
/// (`drain.rs`; `u64::MAX` when there is no lower tier).
pub(super) fn collect(
    catalog: &Catalog<'_>,
    retention: &Retention,
    head: impl IntoIterator<Item = u64>,
    undrained_after: u64,
) -> Result<Vec<u64>, GcError> {
    let surveyed = catalog.survey()?;
    let doomed = plan(catalog, &surveyed, retention, head, |v| v > undrained_after)?;
    let store = catalog.store();
    for &v in &doomed {
        remove(store, &version_name(v))?;
    }
    Ok(doomed)
}

/// Delete the orphans of a lower tier (`catalog::orphans`): versions left without a version
/// their chain needs, which the first tier no longer holds whole either (the drain copies
/// what a tier lacks before it collects), so nothing will complete them. A server that
/// crashed after acknowledging writes and removals leaves such files; they would otherwise
/// stay for ever, since retention counts only versions that restore. Those `kept` says the
/// first tier still holds stay (the drain would copy them again). Newest first.
pub(super) fn collect_orphans(
    catalog: &Catalog<'_>,
    kept: impl Fn(u64) -> bool,
) -> Result<Vec<u64>, GcError> {
    let mut orphans = crate::read::catalog::orphans(&catalog.survey()?);
    orphans.retain(|&v| !kept(v));
    let store = catalog.store();
    for &v in orphans.iter().rev() {
        remove(store, &version_name(v))?;
    }
    Ok(orphans)
}

/// What [`collect`] would delete, deleting nothing (`ickpt prune --dry-run` shows it): of the
/// versions `surveyed` (the catalog's survey), those `retention` lets go, keeping those
/// `pinned` says to and what global records name.
pub fn plan(
    catalog: &Catalog<'_>,
    surveyed: &[Surveyed],
    retention: &Retention,
    head: impl IntoIterator<Item = u64>,
    pinned: impl Fn(u64) -> bool,
) -> Result<Vec<u64>, ReadError> {
    let known: Vec<Known> = surveyed
        .iter()
        .filter_map(|s| {
            let h = &s.summary.as_ref().filter(|_| s.problem.is_none())?.header;
            Some(Known {
                version: s.version,
                parent: h.parent,
                created_unix_ns: h.created_unix_ns,
            })
        })
        .collect();
    let mut keep = crate::read::global_records::kept_versions(catalog)?;
    keep.extend(head);
    keep.extend(known.iter().map(|k| k.version).filter(|&v| pinned(v)));
    Ok(policy::collectable(&known, retention, now_unix_ns(), &keep))
}

fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Remove `name` from `store`, naming it on failure. A file already gone is not one: the
/// drain collects a lower tier while a restart's discard may remove from every tier.
pub(crate) fn remove(store: &dyn Store, name: &str) -> Result<(), FileError> {
    match store.remove(name) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r.map_err(|e| FileError::new(store.describe(name), "remove", e)),
    }
}
