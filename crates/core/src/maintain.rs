//! Removing versions by hand: `ickpt prune` (a retention policy applied to a store at rest)
//! and `ickpt rm` (named versions). Both plan first and change nothing until asked, so
//! `--dry-run` shows exactly what would go; neither ever removes a version a kept version's
//! restore reads, nor one an MPI restart may need, unless told to.

use crate::engine::gc;
use crate::error::MaintainError;
use crate::policy::{self, Retention};
use crate::read::catalog::{describe_versions, orphans, Catalog, Surveyed};
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

/// One tier as surveyed: each version's parent (None when its file failed its checks) and
/// size, and the survey itself.
struct Held<'a> {
    tier: &'a Tier,
    surveyed: Vec<Surveyed>,
}

impl<'a> Held<'a> {
    fn of(tier: &'a Tier) -> Result<Held<'a>, MaintainError> {
        let surveyed = Catalog::new(&*tier.store)?.survey()?;
        Ok(Held { tier, surveyed })
    }

    fn catalog(&self) -> Result<Catalog<'a>, MaintainError> {
        Ok(Catalog::new(&*self.tier.store)?)
    }

    fn versions(&self) -> impl Iterator<Item = u64> + '_ {
        self.surveyed.iter().map(|s| s.version)
    }

    fn bytes(&self, v: u64) -> u64 {
        self.surveyed
            .iter()
            .find(|s| s.version == v)
            .map_or(0, |s| s.bytes)
    }

    fn removal(&self, version: u64) -> Removal {
        Removal {
            tier: self.tier.name,
            version,
            bytes: self.bytes(version),
        }
    }
}

/// What `retention` lets go from each tier, fastest first, and each tier's orphans
/// (`catalog::orphans`: versions left without a version their chain needs, which no restore
/// from that tier can use). A version stays on a tier while a faster one keeps it (as the
/// drain's own collection does), and while it is newer than anything a slower tier holds
/// (not drained there yet; the drain copies oldest first, so a version missing below a
/// slower tier's newest was collected there, not left behind): what a restore falls back on
/// is never removed first. Without a retention, only orphans go.
pub fn plan_prune(
    tiers: &[Tier],
    retention: Option<&Retention>,
) -> Result<Vec<Removal>, MaintainError> {
    let held: Vec<Held> = tiers.iter().map(Held::of).collect::<Result<_, _>>()?;
    let newest: Vec<u64> = held
        .iter()
        .map(|h| h.versions().max().unwrap_or(0))
        .collect();
    let mut kept: Vec<BTreeSet<u64>> = held.iter().map(|h| h.versions().collect()).collect();
    let mut out = Vec::new();
    for (i, h) in held.iter().enumerate() {
        let (faster, slower) = (&kept[..i], &newest[i + 1..]);
        let pinned =
            |v: u64| faster.iter().any(|k| k.contains(&v)) || slower.iter().any(|&n| v > n);
        let mut doomed = match retention {
            Some(r) => gc::plan(&h.catalog()?, &h.surveyed, r, None, pinned)?,
            None => Vec::new(),
        };
        for v in orphans(&h.surveyed).into_iter().rev() {
            if !doomed.contains(&v) {
                doomed.push(v);
            }
        }
        for &v in &doomed {
            kept[i].remove(&v);
        }
        out.extend(doomed.into_iter().map(|v| h.removal(v)));
    }
    Ok(out)
}

/// The removal of `versions` from every tier that holds them, refused (naming the tier and
/// what stands in the way) when a version another one's restore reads, or one a global
/// record names, would go without `options` saying so. What reads what is taken from every
/// tier together, as a restore through the tiers reads them.
pub fn plan_rm(
    tiers: &[Tier],
    versions: &[u64],
    options: RmOptions,
) -> Result<Vec<Removal>, MaintainError> {
    let held: Vec<Held> = tiers.iter().map(Held::of).collect::<Result<_, _>>()?;
    let parent: HashMap<u64, u64> = held
        .iter()
        .flat_map(|h| &h.surveyed)
        .filter_map(|s| Some((s.version, s.summary.as_ref()?.header.parent)))
        .collect();
    // Every version whose restore reads `v` (not `v` itself).
    let dependents = |v: u64| -> BTreeSet<u64> {
        parent
            .keys()
            .copied()
            .filter(|&w| w != v && policy::restore_set(&parent, w).is_some_and(|r| r.contains(&v)))
            .collect()
    };
    let mut doomed: BTreeSet<u64> = BTreeSet::new();
    for &v in versions {
        if !held.iter().any(|h| h.versions().any(|x| x == v)) {
            let names: Vec<String> = tiers.iter().map(|t| t.store.describe("")).collect();
            return Err(MaintainError::NotFound {
                version: v,
                tiers: names.join(", "),
            });
        }
        doomed.insert(v);
        let others: Vec<u64> = dependents(v)
            .into_iter()
            .filter(|d| !versions.contains(d))
            .collect();
        if !others.is_empty() && !options.with_dependents {
            let store = held
                .iter()
                .find(|h| h.versions().any(|x| others.contains(&x)))
                .map_or_else(String::new, |h| h.tier.store.describe(""));
            return Err(MaintainError::HasDependents {
                version: v,
                store,
                dependents: describe_versions(&others),
            });
        }
        doomed.extend(others);
    }
    let mut out = Vec::new();
    for h in &held {
        let global = kept_versions(&h.catalog()?)?;
        if let Some(&v) = doomed.iter().find(|v| global.contains(v)) {
            if !options.force {
                return Err(MaintainError::Global {
                    version: v,
                    store: h.tier.store.describe(""),
                });
            }
        }
        // Newest first: stopped midway, no increment is left without its parent.
        let here: BTreeSet<u64> = h.versions().collect();
        out.extend(
            doomed
                .iter()
                .rev()
                .filter(|v| here.contains(v))
                .map(|&v| h.removal(v)),
        );
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
