//! A job directory of the MPI layer (`ickpt_mpi_init`, docs/mpi.md): `ickpt-job` records the
//! number of ranks, and rank r's store is `rank-NNNNN` in it (`ickpt::job` reads both); `--shared` and `--object` are
//! job directories (URLs) too. `ls`, `verify` and `prune` given one read every rank's store
//! and show the job's global versions and the one a restart takes: the newest every rank
//! holds a record of, which is what `ickpt_mpi_restore_latest` agrees on.

use crate::{human, CmdResult, StoreArgs};
use ickpt::job::{rank_dir, read_ranks, JOB_FILE};
use ickpt::read::catalog::{describe_versions, Catalog};
use ickpt::read::global_records::records;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;

/// The number of ranks the job directory `dir` records, or None when `dir` is not a job
/// directory (no job file, or an ickpt store itself). A job file that is not one is an
/// error naming it.
pub fn ranks(dir: &Path) -> Result<Option<u32>, String> {
    if dir.join(ickpt::store::MARKER).exists() {
        return Ok(None);
    }
    read_ranks(dir).map_err(|e| e.to_string())
}

/// An error for commands that read one store, given a job directory: which store to name.
pub fn one_store_only(s: &StoreArgs) -> Result<(), Box<dyn std::error::Error>> {
    let Some(dir) = s.dir.as_deref() else {
        return Ok(());
    };
    if let Some(n) = ranks(dir)? {
        return Err(format!(
            "{} is an MPI job directory ({JOB_FILE}: {n} rank(s)); this command reads one \
             rank's store: give --dir {}, ... (ls, verify and prune read every rank)",
            dir.display(),
            rank_dir(dir, 0).display()
        )
        .into());
    }
    Ok(())
}

/// Rank `rank`'s store arguments: each tier's rank directory.
fn rank_args(s: &StoreArgs, rank: u32) -> StoreArgs {
    StoreArgs {
        dir: s.dir.as_deref().map(|d| rank_dir(d, rank)),
        shared: s.shared.as_deref().map(|d| rank_dir(d, rank)),
        object: s
            .object
            .as_deref()
            .map(|u| format!("{}/rank-{rank:05}", u.trim_end_matches('/'))),
        json: s.json,
    }
}

/// What one rank holds: for each global version it records, its version and whether that
/// restores (by the check the command makes).
struct RankGlobals {
    rank: u32,
    dir: String,
    globals: BTreeMap<u64, (u64, bool)>,
    /// Why the rank's store could not be read at all.
    error: Option<String>,
}

/// The newest global version every rank holds a record of (None: none is), as the MPI
/// layer's restart agrees on.
fn restart_global(ranks: &[RankGlobals]) -> Option<u64> {
    let mut common: Option<BTreeSet<u64>> = None;
    for r in ranks {
        let mine: BTreeSet<u64> = r.globals.keys().copied().collect();
        common = Some(match common {
            None => mine,
            Some(c) => c.intersection(&mine).copied().collect(),
        });
    }
    common?.into_iter().next_back()
}

/// The rank's records, with `restorable` saying whether each version restores.
fn rank_globals(
    rank: u32,
    args: &StoreArgs,
    restorable: impl Fn(&Catalog<'_>, u64) -> bool,
) -> RankGlobals {
    let dir = args
        .dir
        .as_deref()
        .map_or(String::new(), |d| d.display().to_string());
    let read = || -> Result<BTreeMap<u64, (u64, bool)>, Box<dyn std::error::Error>> {
        let store = crate::open_store(args)?;
        let catalog = Catalog::new(&*store)?;
        Ok(records(&catalog)?
            .into_iter()
            .map(|r| (r.global, (r.version, restorable(&catalog, r.version))))
            .collect())
    };
    match read() {
        Ok(globals) => RankGlobals {
            rank,
            dir,
            globals,
            error: None,
        },
        Err(e) => RankGlobals {
            rank,
            dir,
            globals: BTreeMap::new(),
            error: Some(e.to_string()),
        },
    }
}

/// Each rank's version of a global version and whether it restores, None where the rank
/// holds no record of it; in rank order.
type PerRank = Vec<Option<(u64, bool)>>;

/// The job's global versions, newest first, each with its [`PerRank`].
fn global_rows(ranks: &[RankGlobals]) -> Vec<(u64, PerRank)> {
    let all: BTreeSet<u64> = ranks
        .iter()
        .flat_map(|r| r.globals.keys().copied())
        .collect();
    all.into_iter()
        .rev()
        .map(|g| {
            (
                g,
                ranks.iter().map(|r| r.globals.get(&g).copied()).collect(),
            )
        })
        .collect()
}

fn globals_json(ranks: &[RankGlobals], ok_key: &str) -> Vec<Value> {
    global_rows(ranks)
        .into_iter()
        .map(|(g, per)| {
            let held = per.iter().filter(|p| p.is_some()).count();
            json!({
                "global": g,
                "complete": held == ranks.len(),
                ok_key: per.iter().all(|p| p.is_some_and(|(_, ok)| ok)),
                "ranks": per.iter().zip(ranks).map(|(p, r)| match p {
                    Some((v, ok)) => json!({"rank": r.rank, "version": v, ok_key: ok}),
                    None => json!({"rank": r.rank, "version": null}),
                }).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// "12" when every rank holds the same version, else "10-12".
fn versions_shown(per: &[Option<(u64, bool)>]) -> String {
    let v: BTreeSet<u64> = per.iter().flatten().map(|&(v, _)| v).collect();
    match (v.first(), v.last()) {
        (Some(a), Some(b)) if a == b => a.to_string(),
        (Some(a), Some(b)) => format!("{a}-{b}"),
        _ => "-".into(),
    }
}

/// Ranks whose version of a global fails, or that hold none: "1, 3".
fn failing(per: &[Option<(u64, bool)>], ranks: &[RankGlobals]) -> Vec<u64> {
    per.iter()
        .zip(ranks)
        .filter(|(p, _)| !p.is_some_and(|(_, ok)| ok))
        .map(|(_, r)| u64::from(r.rank))
        .collect()
}

fn print_table(ranks: &[RankGlobals], status_ok: &str) {
    let rows: Vec<Vec<String>> = global_rows(ranks)
        .into_iter()
        .map(|(g, per)| {
            let held = per.iter().filter(|p| p.is_some()).count();
            let bad = failing(&per, ranks);
            vec![
                g.to_string(),
                versions_shown(&per),
                format!("{held}/{}", ranks.len()),
                if bad.is_empty() {
                    status_ok.to_string()
                } else {
                    format!("FAILS on rank(s) {}", describe_versions(&bad))
                },
            ]
        })
        .collect();
    if rows.is_empty() {
        println!("no global version recorded yet");
    } else {
        human::table(&["GLOBAL", "VERSIONS", "RANKS", "STATUS"], &rows);
    }
}

fn print_restart(ranks: &[RankGlobals], what: &str) {
    match restart_global(ranks) {
        Some(g) => {
            let per: Vec<_> = ranks.iter().map(|r| r.globals.get(&g).copied()).collect();
            let bad = failing(&per, ranks);
            if bad.is_empty() {
                println!(
                    "a restart of the job takes global version {g} (version {} by rank; {what})",
                    versions_shown(&per)
                );
            } else {
                println!(
                    "a restart of the job takes global version {g} and fails: rank(s) {} cannot \
                     restore theirs ('ickpt verify --dir' on their stores says why)",
                    describe_versions(&bad)
                );
            }
        }
        None if ranks.iter().any(|r| !r.globals.is_empty()) => println!(
            "no global version is held by every rank: a restart is refused (a rank's store \
             was lost, replaced or damaged)"
        ),
        None => println!("a restart of the job starts afresh (no global version recorded)"),
    }
}

fn rank_errors(ranks: &[RankGlobals]) {
    for r in ranks {
        if let Some(e) = &r.error {
            println!("rank {} ({}): {e}", r.rank, r.dir);
        }
    }
}

/// `ickpt ls` on a job directory.
pub fn ls(s: &StoreArgs, n: u32) -> CmdResult {
    let ranks: Vec<RankGlobals> = (0..n)
        .map(|r| rank_globals(r, &rank_args(s, r), |c, v| c.chain(v).is_ok()))
        .collect();
    let restart = restart_global(&ranks);
    if s.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "job": s.dir, "ranks": n, "checked": crate::ls::CHECKED,
                "globals": globals_json(&ranks, "metadata_ok"), "restart_global": restart,
                "rank_errors": ranks.iter().filter_map(|r| r.error.as_ref().map(|e|
                    json!({"rank": r.rank, "dir": r.dir, "error": e}))).collect::<Vec<_>>(),
            }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "MPI job {}: {n} rank(s), each with its store rank-NNNNN in it",
        s.dir()?.display()
    );
    print_table(&ranks, "metadata ok");
    rank_errors(&ranks);
    print_restart(&ranks, "by metadata and chains");
    println!(
        "STATUS checks {}; 'ickpt ls --dir {}' lists one rank's versions",
        crate::ls::CHECKED,
        rank_dir(s.dir()?, 0).display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `ickpt verify` on a job directory: every rank's store verified, then the global versions.
pub fn verify(s: &StoreArgs, n: u32) -> CmdResult {
    let pb = crate::progress::bytes_bar("verifying");
    let mut reports = Vec::new();
    let mut ranks = Vec::new();
    for r in 0..n {
        let args = rank_args(s, r);
        let report = crate::verify::report(&args, &mut |done, total| {
            pb.set_length(total);
            pb.set_position(done);
        });
        let restorable: BTreeSet<u64> = report
            .as_ref()
            .map(|rep| rep.restorable.iter().copied().collect())
            .unwrap_or_default();
        ranks.push(rank_globals(r, &args, |_, v| restorable.contains(&v)));
        reports.push(report);
    }
    pb.finish_and_clear();
    let restart = restart_global(&ranks);
    let restart_restores = restart.is_none_or(|g| {
        ranks
            .iter()
            .all(|r| r.globals.get(&g).is_some_and(|&(_, ok)| ok))
    });
    let stores_ok = reports.iter().all(|r| r.as_ref().is_ok_and(|r| r.ok()));
    let ok = stores_ok && restart_restores && ranks.iter().all(|r| r.error.is_none());
    if s.json {
        let per_rank: Vec<Value> = reports
            .iter()
            .zip(&ranks)
            .map(|(rep, r)| match rep {
                Ok(rep) => {
                    let mut j = crate::verify::report_json(&rank_args(s, r.rank), rep);
                    j["rank"] = json!(r.rank);
                    j
                }
                Err(e) => {
                    json!({"rank": r.rank, "dir": r.dir, "ok": false, "error": e.to_string()})
                }
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "job": s.dir, "ranks": n, "ok": ok, "stores": per_rank,
                "globals": globals_json(&ranks, "restorable"), "restart_global": restart,
                "restart_restores": restart_restores,
            }))?
        );
    } else {
        println!("MPI job {}: {n} rank(s)", s.dir()?.display());
        for (rep, r) in reports.iter().zip(&ranks) {
            match rep {
                Ok(rep) => println!(
                    "rank {} ({}): {}, versions {}, restorable {}, {} problem(s){}",
                    r.rank,
                    r.dir,
                    if rep.ok() { "OK" } else { "FAILED" },
                    describe_versions(&rep.versions),
                    describe_versions(&rep.restorable),
                    rep.problems.len(),
                    if rep.orphans.is_empty() {
                        String::new()
                    } else {
                        format!(", {} orphan(s)", rep.orphans.len())
                    }
                ),
                Err(e) => println!("rank {} ({}): FAILED: {e}", r.rank, r.dir),
            }
            if let Ok(rep) = rep {
                for p in &rep.problems {
                    println!(
                        "  {}",
                        crate::verify::problem_line(rep.together.is_some(), p)
                    );
                }
            }
        }
        print_table(&ranks, "restorable");
        print_restart(&ranks, "every page checked");
        println!("{}", if ok { "OK" } else { "FAILED" });
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `ickpt prune` on a job directory: each rank's store pruned alike (`prune_one` prints its
/// lines and returns its JSON answer).
pub fn prune(
    s: &StoreArgs,
    n: u32,
    prune_one: impl Fn(&StoreArgs) -> Result<Value, Box<dyn std::error::Error>>,
) -> CmdResult {
    let mut answers = Vec::new();
    for r in 0..n {
        let args = rank_args(s, r);
        if !s.json {
            println!("rank {r} ({}):", args.dir()?.display());
        }
        let mut a = prune_one(&args)?;
        a["rank"] = json!(r);
        answers.push(a);
    }
    if s.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"job": s.dir, "ranks": n, "stores": answers}))?
        );
    }
    Ok(ExitCode::SUCCESS)
}
