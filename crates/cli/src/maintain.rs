//! `ickpt prune` and `ickpt rm`: plan with the library (`ickpt::maintain`), show the plan,
//! and carry it out unless `--dry-run`.

use crate::{human, open_tiers, progress, CmdResult, StoreArgs, UsageError};
use ickpt::maintain::{self, Removal, RmOptions};
use ickpt::policy::Retention;
use ickpt::store::Tier;
use serde_json::{json, Value};
use std::process::ExitCode;
use std::time::Duration;

pub fn prune(
    s: &StoreArgs,
    chains: Option<u32>,
    versions: Option<u32>,
    within: Option<Duration>,
    orphans: bool,
    dry_run: bool,
) -> CmdResult {
    let keep = chains.is_some() || versions.is_some() || within.is_some();
    if !keep && !orphans {
        return Err(UsageError(
            "say what to keep: --keep-chains N, --keep-versions N and/or --keep-within DURATION (e.g. 7d); or --orphans to remove only the versions no restore can use",
        )
        .into());
    }
    let retention = keep.then_some(Retention {
        // Without --keep-chains, the other limits alone decide.
        chains: chains.unwrap_or(u32::MAX),
        versions,
        within,
    });
    let prune_one = |s: &StoreArgs| -> Result<Value, Box<dyn std::error::Error>> {
        let tiers = open_tiers(s, !dry_run)?;
        let plan = maintain::plan_prune(&tiers, retention.as_ref())?;
        carry_out(s, &tiers, &plan, dry_run)
    };
    if let Some(n) = crate::job::ranks(s.dir()?)? {
        return crate::job::prune(s, n, prune_one);
    }
    let answer = prune_one(s)?;
    if s.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn rm(s: &StoreArgs, versions: &[u64], options: RmOptions, dry_run: bool) -> CmdResult {
    crate::job::one_store_only(s)?;
    let tiers = open_tiers(s, !dry_run)?;
    let plan = maintain::plan_rm(&tiers, versions, options)?;
    let answer = carry_out(s, &tiers, &plan, dry_run)?;
    if s.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// Carry out the plan (unless `dry_run`), saying what goes as it goes (unless `--json`);
/// returns the JSON answer.
fn carry_out(
    s: &StoreArgs,
    tiers: &[Tier],
    plan: &[Removal],
    dry_run: bool,
) -> Result<Value, Box<dyn std::error::Error>> {
    let total: u64 = plan.iter().map(|r| r.bytes).sum();
    if !dry_run {
        let pb = progress::bytes_bar("removing");
        pb.set_length(total);
        let shown = !s.json;
        maintain::apply(tiers, plan, |r| {
            pb.inc(r.bytes);
            if shown {
                pb.suspend(|| println!("removed {}", line(r)));
            }
        })?;
        pb.finish_and_clear();
    }
    let removed: Vec<_> = plan
        .iter()
        .map(|r| json!({"tier": r.tier, "version": r.version, "bytes": r.bytes}))
        .collect();
    let answer = json!({"dir": s.dir, "dry_run": dry_run, "removed": removed, "bytes": total});
    if s.json {
        return Ok(answer);
    }
    if dry_run {
        for r in plan {
            println!("would remove {}", line(r));
        }
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    match plan.len() {
        0 => println!("nothing to remove"),
        n => println!(
            "{verb} {n} version file(s), {}{}",
            human::bytes(total),
            if dry_run {
                " (dry run: nothing removed)"
            } else {
                ""
            }
        ),
    }
    Ok(answer)
}

fn line(r: &Removal) -> String {
    format!(
        "version {} from the {} tier ({})",
        r.version,
        r.tier,
        human::bytes(r.bytes)
    )
}
