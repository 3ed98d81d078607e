use crate::{human, open_store, CmdResult, StoreArgs};
use ickpt::format::{backend_name, CommitStats, StoredPrecopy, PRECOPY_NAMES};
use ickpt::read::catalog::{Catalog, Surveyed};
use ickpt::store::{Store, TieredStore};
use serde_json::{json, Value};
use std::process::ExitCode;

/// The `stats` object of `ls --json` and `inspect --json`. `after` is this version's AFTER
/// count, which only the next version records (as its `after_previous`).
pub fn stats_json(s: &CommitStats, after: Option<u64>) -> Value {
    json!({
        "mode": s.mode.as_str(), "flush_order": s.flush_order.as_str(),
        "backend": backend_name(s.backend), "commit_ns": s.commit_ns, "wait_ns": s.wait_ns,
        "peak_cow_bytes": s.peak_cow_bytes, "cow_limit_bytes": s.cow_limit_bytes,
        "cow": s.cow_pages, "wait": s.wait_pages, "avoided": s.avoided_pages, "after": after,
        "precopy": precopy_json(&s.precopy),
    })
}

/// What pre-copy did for a version (format 7 on; older files record zeros, shown as off).
pub fn precopy_json(p: &StoredPrecopy) -> Value {
    json!({
        "strategy": PRECOPY_NAMES.get(p.strategy as usize).copied().unwrap_or("unknown"),
        "pages": p.pages, "conflicts": p.conflicts, "copies": p.copies,
        "rewritten_bytes": p.rewritten_bytes,
        "conflict_rate": (p.pages > 0).then(|| p.conflicts as f64 / p.pages as f64),
    })
}

/// This version's AFTER count from the surveyed versions: the next number's, if it says it
/// was committed right after this one.
fn after_in(all: &[Surveyed], i: usize) -> Option<u64> {
    let v = all[i].version;
    let next = all.get(i + 1).filter(|n| n.version == v + 1)?;
    let s = next.summary.as_ref()?.stats?;
    (s.previous_version == v).then_some(s.after_previous)
}

/// The table's columns; STATUS last.
const COLUMNS: [&str; 13] = [
    "VERSION", "KIND", "PARENT", "TAG", "GLOBAL", "REGIONS", "PAGES", "BYTES", "MODE", "WAITS",
    "COMMIT", "CREATED", "STATUS",
];

/// What STATUS says was checked: a version's header, metadata and chain links, never its
/// pages (`ickpt verify` reads those).
pub const CHECKED: &str =
    "headers, metadata and chain links (not pages: 'ickpt verify' reads every page)";

pub fn run(s: &StoreArgs) -> CmdResult {
    if let Some(n) = crate::job::ranks(s.dir()?)? {
        return crate::job::ls(s, n);
    }
    // With --shared or --object: the tiers, opened once, read as one and listed each, with
    // each tier's copies' metadata checked.
    let (store, tiers): (Box<dyn Store>, _) = if s.shared.is_some() || s.object.is_some() {
        let tiers = crate::open_tiers(s, false)?;
        let copies = crate::tier_copies(&tiers)?;
        (Box::new(TieredStore::new(tiers)), Some(copies))
    } else {
        (open_store(s)?, None)
    };
    let catalog = Catalog::new(&store)?;
    let all = catalog.survey()?;
    // Global versions of a coordinated (MPI) job this store holds a part of, by version. A
    // record that cannot be read is reported, not allowed to hide the versions.
    let (globals, records_error) = match ickpt::read::global_records::records(&catalog) {
        Ok(r) => (r, None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let global_of = |v: u64| {
        globals
            .iter()
            .rev()
            .find(|r| r.version == v)
            .map(|r| r.global)
    };
    let newest = all.iter().rev().find(|v| v.restorable()).map(|v| v.version);
    // With tiers: where each version's file is, fastest tier first, and which copies' own
    // metadata fails.
    let held_by = |v: u64| -> Option<Vec<&'static str>> {
        tiers
            .as_ref()
            .map(|t| t.holding(v).map(|(tier, _)| tier).collect())
    };
    let damaged_on = |v: u64| -> Option<Vec<&'static str>> {
        tiers.as_ref().map(|t| {
            t.holding(v)
                .filter(|&(_, whole)| !whole)
                .map(|(tier, _)| tier)
                .collect()
        })
    };
    let tiers_shown = |v: u64| -> String {
        tiers.as_ref().map_or_else(String::new, |t| {
            t.holding(v)
                .map(|(tier, whole)| {
                    if whole {
                        tier.to_string()
                    } else {
                        format!("{tier}(DAMAGED)")
                    }
                })
                .collect::<Vec<_>>()
                .join("+")
        })
    };
    let mut rows = Vec::new();
    let mut items = Vec::new();
    for (i, sv) in all.iter().enumerate() {
        let v = sv.version;
        let problem = sv
            .problem
            .as_ref()
            .map(|p| json!({"file": p.file, "offset": p.offset, "what": p.what}));
        let status = match (&sv.summary, &sv.problem) {
            (_, None) => "metadata ok",
            (Some(_), Some(_)) => "broken chain",
            (None, Some(_)) => "damaged",
        };
        let Some(m) = &sv.summary else {
            items.push(json!({"version": v, "metadata_ok": false, "status": status,
                              "problem": problem, "tiers": held_by(v),
                              "damaged_on": damaged_on(v)}));
            let what = sv
                .problem
                .as_ref()
                .map_or(String::new(), |p| p.what.clone());
            // Every column but STATUS blank, so the reason does not widen the table.
            let mut row = vec![v.to_string(), "DAMAGED".into()];
            row.resize(COLUMNS.len() - 1, String::new());
            row.push(format!("DAMAGED: {what}"));
            rows.push(row);
            continue;
        };
        let h = &m.header;
        let st = m.stats;
        let after = after_in(&all, i);
        items.push(json!({
            "version": v, "kind": h.kind.as_str(), "parent": h.parent, "tag": h.tag,
            "global": global_of(v),
            "chain_depth": h.chain_depth, "regions": h.region_count,
            "pages": m.footer.page_count, "bytes": sv.bytes,
            "created_unix_ns": h.created_unix_ns, "format_version": h.format_version,
            "stats": st.map(|s| stats_json(&s, after)),
            "metadata_ok": sv.restorable(), "status": status,
            "problem": problem, "tiers": held_by(v), "damaged_on": damaged_on(v),
        }));
        let dash = || "-".to_string();
        rows.push(vec![
            v.to_string(),
            h.kind.as_str().into(),
            if h.parent == 0 {
                "-".into()
            } else {
                h.parent.to_string()
            },
            // 0 is what a checkpoint without a tag records.
            if h.tag == 0 {
                "-".into()
            } else {
                h.tag.to_string()
            },
            global_of(v).map_or_else(dash, |g| g.to_string()),
            h.region_count.to_string(),
            m.footer.page_count.to_string(),
            human::bytes(sv.bytes),
            st.map_or_else(dash, |s| s.mode.as_str().into()),
            st.map_or_else(dash, |s| s.wait_pages.to_string()),
            st.map_or_else(dash, |s| human::nanos(s.commit_ns)),
            human::utc(h.created_unix_ns),
            match &sv.problem {
                None => "metadata ok".into(),
                Some(p) => format!("BROKEN: {}", p.what),
            },
        ]);
    }
    if s.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "dir": s.dir()?, "shared": s.shared, "object": s.object, "checked": CHECKED,
                "newest_by_metadata": newest,
                "versions": items,
                "newest_global": globals.last().map(|r| json!({"global": r.global, "version": r.version})),
                "global_records_error": records_error,
            }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("no versions in {}", s.dir()?.display());
        return Ok(ExitCode::SUCCESS);
    }
    // TIERS goes before STATUS, whose text may be long.
    let mut columns = COLUMNS.to_vec();
    if tiers.is_some() {
        columns.insert(COLUMNS.len() - 1, "TIERS");
        for (row, sv) in rows.iter_mut().zip(&all) {
            row.insert(COLUMNS.len() - 1, tiers_shown(sv.version));
        }
    }
    human::table(&columns, &rows);
    let bad = all.iter().filter(|v| !v.restorable()).count();
    println!("STATUS checks {CHECKED}");
    match newest {
        Some(n) => println!("newest version whose metadata and chain pass: {n}"),
        None => println!("no version's metadata and chain pass: none can be restored"),
    }
    if let Some(e) = &records_error {
        println!("global-commit records could not be read: {e}");
    }
    if let Some(r) = globals.last() {
        println!(
            "newest global version: {} (version {}; a restart of the job restores it, or the one before, on every rank)",
            r.global, r.version
        );
    }
    if bad > 0 {
        println!("{bad} version(s) cannot be restored; 'ickpt verify' says why, page by page");
    }
    if let Some(t) = &tiers {
        let damaged: usize = all
            .iter()
            .map(|sv| t.holding(sv.version).filter(|&(_, whole)| !whole).count())
            .sum();
        if damaged > 0 {
            println!(
                "{damaged} copy(ies) on a tier fail their metadata checks (DAMAGED in TIERS): \
                 'ickpt verify' says which versions each tier alone restores"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
