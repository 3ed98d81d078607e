//! Removing versions by hand: `ickpt prune` (a retention policy applied to a store at rest)
//! and `ickpt rm` (named versions). Both plan first and change nothing until asked, so
//! `--dry-run` shows exactly what would go; neither ever removes a version a kept version's
//! restore reads, nor one an MPI restart may need, unless told to.

use crate::engine::gc;
use crate::error::MaintainError;
use crate::policy::Retention;
use crate::read::catalog::{describe_versions, Catalog};
use crate::read::global_records::kept_versions;
use crate::store::{version_name, Tier};
use std::collections::{BTreeSet, HashMap};

/// One version to remove from one tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    pub tier: &'static str,
    pub version: u64,
    /// Its file's size (0 when it could not be opened: a damaged version is removable).
    pub bytes: u64,
}

/// What `ickpt rm` may break when told to.
#[derive(Debug, Clone, Copy, Default)]
pub struct RmOptions {
    /// Also remove every version whose restore reads a removed one.
    pub with_dependents: bool,
    /// Remove versions the newest global records name (an MPI job's restart point).
    pub force: bool,
}

/// What a tier holds: each version's parent (None when its file failed its checks) and size.
struct Held {
    parents: HashMap<u64, (Option<u64>, u64)>,
}

impl Held {
    fn of(catalog: &Catalog<'_>) -> Result<Held, MaintainError> {
        let parents = catalog
            .survey(None)?
            .into_iter()
            .map(|s| {
                let parent = s.summary.as_ref().map(|m| m.header.parent);
                (s.version, (parent, s.bytes))
            })
            .collect();
        Ok(Held { parents })
    }

    fn bytes(&self, v: u64) -> u64 {
        self.parents.get(&v).map_or(0, |p| p.1)
    }

    /// Every version held whose restore reads `v` (not `v` itself).
    fn dependents(&self, v: u64) -> BTreeSet<u64> {
        let reads = |mut w: u64| {
            // A crafted loop of parents ends after as many steps as there are versions.
            for _ in 0..=self.parents.len() {
                match self.parents.get(&w) {
                    Some((Some(p), _)) if *p == v => return true,
                    Some((Some(p), _)) if *p != 0 => w = *p,
                    _ => return false,
                }
            }
            false
        };
        self.parents.keys().copied().filter(|&w| reads(w)).collect()
    }
}

/// What `retention` lets go from each tier, fastest first. A version stays on a tier while
/// a faster one keeps it (as the drain's own collection does) or a slower one lacks it (not
/// drained there yet): what a restore falls back on is never removed first.
pub fn plan_prune(tiers: &[Tier], retention: &Retention) -> Result<Vec<Removal>, MaintainError> {
    let mut catalogs = Vec::new();
    for t in tiers {
        let catalog = Catalog::new(&*t.store)?;
        let versions: BTreeSet<u64> = catalog.versions()?.into_iter().collect();
        catalogs.push((t, catalog, versions));
    }
    let mut out = Vec::new();
    for i in 0..catalogs.len() {
        let (tier, catalog, _) = &catalogs[i];
        let faster = &catalogs[..i];
        let slower = &catalogs[i + 1..];
        let pinned = |v: u64| {
            faster.iter().any(|(_, _, held)| held.contains(&v))
                || slower.iter().any(|(_, _, held)| !held.contains(&v))
        };
        let doomed = gc::plan(catalog, retention, None, pinned)?;
        let held = Held::of(catalog)?;
        out.extend(doomed.iter().map(|&v| Removal {
            tier: tier.name,
            version: v,
            bytes: held.bytes(v),
        }));
        let kept = &mut catalogs[i].2;
        for v in doomed {
            kept.remove(&v);
        }
    }
    Ok(out)
}

/// The removal of `versions` from every tier that holds them, refused (naming the tier and
/// what stands in the way) when a version another one's restore reads, or one the newest
/// global records name, would go without `options` saying so.
pub fn plan_rm(
    tiers: &[Tier],
    versions: &[u64],
    options: RmOptions,
) -> Result<Vec<Removal>, MaintainError> {
    let mut out = Vec::new();
    let mut found: BTreeSet<u64> = BTreeSet::new();
    for t in tiers {
        let catalog = Catalog::new(&*t.store)?;
        let held = Held::of(&catalog)?;
        let global = kept_versions(&catalog)?;
        let mut doomed: BTreeSet<u64> = BTreeSet::new();
        for &v in versions.iter().filter(|v| held.parents.contains_key(v)) {
            found.insert(v);
            doomed.insert(v);
            let dependents: BTreeSet<u64> = held
                .dependents(v)
                .into_iter()
                .filter(|d| !versions.contains(d))
                .collect();
            if !dependents.is_empty() && !options.with_dependents {
                return Err(MaintainError::HasDependents {
                    version: v,
                    store: t.store.describe(""),
                    dependents: describe_versions(&dependents.into_iter().collect::<Vec<_>>()),
                });
            }
            doomed.extend(dependents);
        }
        if let Some(&v) = doomed.iter().find(|v| global.contains(v)) {
            if !options.force {
                return Err(MaintainError::Global {
                    version: v,
                    store: t.store.describe(""),
                });
            }
        }
        // Newest first: stopped midway, no increment is left without its parent.
        out.extend(doomed.iter().rev().map(|&v| Removal {
            tier: t.name,
            version: v,
            bytes: held.bytes(v),
        }));
    }
    if let Some(&v) = versions.iter().find(|v| !found.contains(v)) {
        let names: Vec<String> = tiers.iter().map(|t| t.store.describe("")).collect();
        return Err(MaintainError::NotFound {
            version: v,
            tiers: names.join(", "),
        });
    }
    Ok(out)
}

/// Carry out a plan, in its order, telling `done` of each removal as it lands.
pub fn apply(
    tiers: &[Tier],
    plan: &[Removal],
    mut done: impl FnMut(&Removal),
) -> Result<(), MaintainError> {
    for r in plan {
        if let Some(t) = tiers.iter().find(|t| t.name == r.tier) {
            gc::remove(&*t.store, &version_name(r.version))?;
            done(r);
        }
    }
    Ok(())
}
