//! Whole-store verification, each tier alone and the tiers together, by the walk a restore
//! makes. Every page of every version file is read once and checked; then each version is
//! walked as a restore of it would go: its chain (every file's metadata and every link,
//! `Catalog::chain`), then the pages the reverse scan would read from each file of it
//! (`reverse_scan`'s plan), any of them damaged failing the version. So a damaged page that
//! a newer version rewrote fails only the versions that still read it, and is still reported
//! as damage; and through the tiers, a damaged copy is passed over for another tier's as a
//! restore passes it over (`TieredStore::blame`).

use crate::error::ReadError;
use crate::read::catalog::Catalog;
use crate::read::reverse_scan::{reverse_scan, Sink};
use crate::store::{
    parse_version_name, retry_other_copies, version_name, Store, Tier, TieredStore,
};
use ickpt_format::PageDamage;
use std::collections::{HashMap, HashSet};

/// What a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A file's own bytes: its metadata, or pages failing their checksums. Reported whether
    /// or not a restore would read them.
    Damage,
    /// A version a restore would refuse (its file, its chain or a page it reads).
    Unrestorable,
    /// A version no restore can use and none will ever complete: its chain reaches a version
    /// that is not there, and a newer version restores. Garbage, not a failure: `ickpt
    /// prune --orphans` (and the drain, on lower tiers) removes it.
    Orphan,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Damage => "damage",
            Kind::Unrestorable => "unrestorable",
            Kind::Orphan => "orphan",
        }
    }
}

/// One thing wrong with a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The view it was found in: a tier's name, or "together".
    pub tier: String,
    pub version: u64,
    /// The file the problem is in, or the file that is missing.
    pub file: String,
    pub offset: Option<u64>,
    pub what: String,
    pub kind: Kind,
}

impl Problem {
    /// `e` about version `v`, in the file it names (or `file`, the version's own).
    fn of(tier: &str, version: u64, e: &ReadError, file: String, kind: Kind) -> Problem {
        let offset = match e {
            ReadError::Corrupt { source, .. } => source.offset(),
            ReadError::Foreign { .. } => Some(64),
            _ => None,
        };
        Problem {
            tier: tier.to_string(),
            version,
            file: e.file().map_or(file, str::to_string),
            offset,
            what: e.to_string(),
            kind,
        }
    }
}

/// One way of reading the store: a tier alone, or the tiers together as a restore reads them.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// "local", "shared", "object", or "together".
    pub name: String,
    /// Where: the tier's directory or URL ("local+shared" names for the tiers together).
    pub dir: String,
    pub versions: Vec<u64>,
    /// Versions a restore accepts, reading what this view holds.
    pub restorable: Vec<u64>,
    /// Page data checked, in bytes (a tier's; the tiers together check nothing of their own).
    pub bytes_checked: u64,
    /// Damage in this tier's files (empty for the tiers together, whose files are the tiers').
    pub damage: Vec<Problem>,
    /// Versions not restorable from this view, and why (orphans apart).
    pub unrestorable: Vec<Problem>,
    pub orphans: Vec<Problem>,
}

impl View {
    pub fn newest_restorable(&self) -> Option<u64> {
        self.restorable.last().copied()
    }
}

/// What [`verify_tiers`] found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// What a restore accepts, reading through every tier (the tiers together, or the one
    /// tier): the versions, and those that restore.
    pub versions: Vec<u64>,
    pub restorable: Vec<u64>,
    /// Page data checked on every tier, in bytes.
    pub bytes_checked: u64,
    /// Everything that fails the store: damage in any tier's files, then versions a restore
    /// refuses for another reason than damage already named (each once). Orphans are not
    /// problems.
    pub problems: Vec<Problem>,
    pub orphans: Vec<Problem>,
    /// Each tier alone, fastest first; one for a store of a single directory.
    pub tiers: Vec<View>,
    /// With two tiers or more: what a restore through all of them accepts.
    pub together: Option<View>,
}

impl Report {
    fn new(tiers: Vec<View>, together: Option<View>) -> Report {
        let view = together.as_ref().unwrap_or(&tiers[0]);
        let mut problems: Vec<Problem> = tiers.iter().flat_map(|t| t.damage.clone()).collect();
        for p in &view.unrestorable {
            if !problems
                .iter()
                .any(|d| d.version == p.version && d.file == p.file)
            {
                problems.push(p.clone());
            }
        }
        let mut orphans: Vec<Problem> = tiers.iter().flat_map(|t| t.orphans.clone()).collect();
        if let Some(t) = &together {
            orphans.extend(t.orphans.iter().cloned());
        }
        Report {
            versions: view.versions.clone(),
            restorable: view.restorable.clone(),
            bytes_checked: tiers.iter().map(|t| t.bytes_checked).sum(),
            problems,
            orphans,
            tiers,
            together,
        }
    }

    /// The view a restore takes: the tiers together, or the one tier.
    pub fn restore_view(&self) -> &View {
        self.together.as_ref().unwrap_or(&self.tiers[0])
    }

    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }

    pub fn newest_restorable(&self) -> Option<u64> {
        self.restorable.last().copied()
    }
}

/// Check one store (a single directory): [`verify_tiers`] with it as the only tier.
pub fn verify_store(
    store: &dyn Store,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Report, ReadError> {
    let (view, _) = tier_view("local", store, progress, 0, 0)?;
    Ok(Report::new(vec![view], None))
}

/// Check every tier alone, then, with more than one, the tiers together. `progress(bytes
/// done, bytes total)` is called as page data is checked. A tier that cannot be listed is an
/// error naming it; everything else is reported as a problem.
pub fn verify_tiers(
    tiers: &[Tier],
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Report, ReadError> {
    // The total is known tier by tier: each tier's share is added as it is reached.
    let mut done = 0u64;
    let mut total = 0u64;
    let mut views = Vec::new();
    let mut damage_by_file: HashMap<String, PageDamage> = HashMap::new();
    for t in tiers {
        let (view, damage) = tier_view(t.name, &*t.store, progress, done, total)?;
        done += view.bytes_checked;
        total = total.max(done);
        for (v, d) in damage {
            damage_by_file.insert(t.store.describe(&version_name(v)), d);
        }
        views.push(view);
    }
    let together = (tiers.len() > 1)
        .then(|| together_view(tiers, &damage_by_file))
        .transpose()?;
    Ok(Report::new(views, together))
}

/// One tier alone: every file's pages, then every version's walk.
fn tier_view(
    name: &str,
    store: &dyn Store,
    progress: &mut dyn FnMut(u64, u64),
    done_before: u64,
    total_before: u64,
) -> Result<(View, HashMap<u64, PageDamage>), ReadError> {
    let catalog = Catalog::new(store)?;
    let versions = catalog.versions()?;
    let mut view = View {
        name: name.to_string(),
        dir: store.describe(""),
        ..View::default()
    };
    // Metadata first, to know how much page data there is to read.
    let mut metas = Vec::new();
    for &v in &versions {
        match catalog.open(v) {
            Ok(ov) => metas.push(ov),
            Err(e) if e.is_damage() => view.damage.push(Problem::of(
                name,
                v,
                &e,
                store.describe(&version_name(v)),
                Kind::Damage,
            )),
            Err(e) => return Err(e),
        }
        // One file open at a time: a store of thousands of versions holds no more.
        if let Some(ov) = metas.last_mut() {
            ov.close();
        }
    }
    let total: u64 = metas.iter().map(|ov| ov.meta.data_bytes()).sum();
    let mut damage = HashMap::new();
    let mut before = done_before;
    for ov in &metas {
        let file = catalog.reopen(ov);
        let d = match file {
            Ok(f) => ickpt_format::page_damage(&ov.meta, &*f, &mut |d, _| {
                progress(before + d, total_before + total)
            }),
            Err(e) if e.is_damage() => {
                let file = store.describe(&version_name(ov.version));
                view.damage
                    .push(Problem::of(name, ov.version, &e, file, Kind::Damage));
                continue;
            }
            Err(e) => return Err(e),
        };
        before += ov.meta.data_bytes();
        progress(before, total_before + total);
        view.bytes_checked += ov.meta.data_bytes();
        if let Some((_, e)) = d.first.first() {
            let file = store.describe(&version_name(ov.version));
            let more = d.pages() - 1;
            let what = if more == 0 {
                e.to_string()
            } else {
                format!("{e} (and {more} more damaged page(s))")
            };
            view.damage.push(Problem {
                tier: name.to_string(),
                version: ov.version,
                file,
                offset: e.offset(),
                what,
                kind: Kind::Damage,
            });
        }
        if !d.is_empty() {
            damage.insert(ov.version, d);
        }
    }
    drop(metas);
    view.damage.sort_by_key(|p| p.version);
    let lookup: HashMap<String, &PageDamage> = damage
        .iter()
        .map(|(&v, d)| (store.describe(&version_name(v)), d))
        .collect();
    let clear = clear_without_walk(&catalog, &damage.keys().copied().collect())?;
    let verdicts: Vec<_> = versions
        .iter()
        .map(|&v| match clear.contains(&v) {
            true => (v, Ok(())),
            false => (v, walk(&catalog, v, &|f| lookup.get(f).copied())),
        })
        .collect();
    drop(lookup);
    view.versions = versions;
    let verdicts = still_there(&catalog, &mut view, verdicts, &mut damage);
    settle(&mut view, verdicts, &catalog)?;
    Ok((view, damage))
}

/// A writer's garbage collection may have removed versions since the listing (newest of a
/// chain first, so no kept version loses its parent): a version gone now is no longer part
/// of the store, not damage, and is left out. A store that cannot be listed again keeps
/// what was found.
fn still_there(
    catalog: &Catalog<'_>,
    view: &mut View,
    verdicts: Vec<(u64, Result<(), ReadError>)>,
    damage: &mut HashMap<u64, PageDamage>,
) -> Vec<(u64, Result<(), ReadError>)> {
    let failed = !view.damage.is_empty() || verdicts.iter().any(|(_, r)| r.is_err());
    let Some(now) = failed.then(|| catalog.versions().ok()).flatten() else {
        return verdicts;
    };
    let now: std::collections::HashSet<u64> = now.into_iter().collect();
    view.versions.retain(|v| now.contains(v));
    view.damage.retain(|p| now.contains(&p.version));
    damage.retain(|v, _| now.contains(v));
    verdicts
        .into_iter()
        .filter(|(v, _)| now.contains(v))
        .collect()
}

/// The tiers together: each version walked as a restore through a [`TieredStore`] walks it,
/// from a fresh start (no copy blamed yet), so each verdict is what a restart asking for
/// that version meets.
fn together_view(
    tiers: &[Tier],
    damage_by_file: &HashMap<String, PageDamage>,
) -> Result<View, ReadError> {
    let names: Vec<&str> = tiers.iter().map(|t| t.name).collect();
    let mut view = View {
        name: "together".into(),
        dir: names.join("+"),
        ..View::default()
    };
    let all = TieredStore::new(tiers.to_vec());
    let catalog = Catalog::new(&all)?;
    view.versions = catalog.versions()?;
    let damaged = damage_by_file
        .keys()
        .filter_map(|f| parse_version_name(f.rsplit('/').next()?))
        .collect();
    let clear = clear_without_walk(&catalog, &damaged)?;
    let mut verdicts = Vec::new();
    for &v in &view.versions {
        if clear.contains(&v) {
            verdicts.push((v, Ok(())));
            continue;
        }
        let tiered = TieredStore::new(tiers.to_vec());
        let catalog = Catalog::with_identity(&tiered, catalog.identity());
        let r = retry_other_copies(Some(&tiered), ReadError::damaged_file, || {
            walk(&catalog, v, &|f| damage_by_file.get(f))
        });
        verdicts.push((v, r));
    }
    let verdicts = still_there(&catalog, &mut view, verdicts, &mut HashMap::new());
    settle(&mut view, verdicts, &catalog)?;
    Ok(view)
}

/// The versions whose walk cannot fail: their metadata and links pass (`Catalog::survey`,
/// one ascending pass, which decides as `Catalog::chain` does) and no version of their chain
/// has a damaged page (`damaged`, by number), so every page their reverse scan reads passes
/// (the catalog's rules put every page of every region in the chain). Only the others are
/// walked: a store of one chain of thousands of versions is checked in linear time.
fn clear_without_walk(
    catalog: &Catalog<'_>,
    damaged: &HashSet<u64>,
) -> Result<HashSet<u64>, ReadError> {
    let mut clear = HashSet::new();
    for s in catalog.survey()? {
        let Some(m) = s.summary.as_ref().filter(|_| s.restorable()) else {
            continue;
        };
        let parent = m.header.parent;
        // Parents are older: settled before their children.
        if !damaged.contains(&s.version) && (parent == 0 || clear.contains(&parent)) {
            clear.insert(s.version);
        }
    }
    Ok(clear)
}

/// Walk version `v` as a restore of it would, reading no page: its chain, then the pages its
/// reverse scan would read, failing at the first one `damage_of` (by the file as the store
/// describes it) says is damaged.
fn walk<'d>(
    catalog: &Catalog<'_>,
    v: u64,
    damage_of: &dyn Fn(&str) -> Option<&'d PageDamage>,
) -> Result<(), ReadError> {
    let chain = catalog.chain(v)?;
    let store = catalog.store();
    reverse_scan::<ReadError>(
        catalog,
        &chain,
        &|_| true,
        Sink::Plan(&mut |version, at, pages| {
            let file = store.describe(&version_name(version));
            let Some(d) = damage_of(&file) else {
                return Ok(());
            };
            match d.first_in(at as u64, pages as u64) {
                None => Ok(()),
                Some(i) => Err(ReadError::format(
                    file,
                    d.error_of(i).expect("first_in found it"),
                )),
            }
        }),
        &mut |_, _| {},
    )?;
    Ok(())
}

/// Sort the walks' verdicts into restorable, unrestorable and orphans. An error that is not
/// about what a file holds (the store cannot be read at all) is returned.
fn settle(
    view: &mut View,
    verdicts: Vec<(u64, Result<(), ReadError>)>,
    catalog: &Catalog<'_>,
) -> Result<(), ReadError> {
    let mut failed = Vec::new();
    for (v, r) in verdicts {
        match r {
            Ok(()) => view.restorable.push(v),
            Err(e) if e.is_damage() => failed.push((v, e)),
            Err(e) => return Err(e),
        }
    }
    let newest = view.restorable.last().copied().unwrap_or(0);
    for (v, e) in failed {
        let file = catalog.store().describe(&version_name(v));
        let orphan = matches!(e, ReadError::ChainBroken { .. }) && v < newest;
        let kind = if orphan {
            Kind::Orphan
        } else {
            Kind::Unrestorable
        };
        let p = Problem::of(&view.name, v, &e, file, kind);
        if orphan {
            view.orphans.push(p);
        } else {
            view.unrestorable.push(p);
        }
    }
    Ok(())
}
