//! `ickpt verify`: every page of every version on every tier, and what a restore accepts
//! from each tier alone and from the tiers together (`ickpt::read::verify`).

use crate::{human, open_tiers, progress, CmdResult, StoreArgs};
use ickpt::read::catalog::describe_versions;
use ickpt::read::verify::{Kind, Problem, Report, View};
use serde_json::{json, Value};
use std::process::ExitCode;

pub fn run(s: &StoreArgs) -> CmdResult {
    if let Some(n) = crate::job::ranks(s.dir()?)? {
        return crate::job::verify(s, n);
    }
    let pb = progress::bytes_bar("verifying");
    let report = report(s, &mut |done, total| {
        pb.set_length(total);
        pb.set_position(done);
    })?;
    pb.finish_and_clear();
    if s.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report_json(s, &report))?
        );
    } else {
        print_text(&report);
    }
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Verify the store `s` names: its one directory, or its tiers.
pub fn report(
    s: &StoreArgs,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Report, Box<dyn std::error::Error>> {
    Ok(if s.shared.is_none() && s.object.is_none() {
        let store = ickpt::store::DirStore::open_read(s.dir()?)?;
        ickpt::read::verify::verify_store(&store, progress)?
    } else {
        ickpt::read::verify::verify_tiers(&open_tiers(s, false)?, progress)?
    })
}

fn problem_json(p: &Problem) -> Value {
    json!({"tier": p.tier, "kind": p.kind.as_str(), "version": p.version, "file": p.file,
           "offset": p.offset, "what": p.what})
}

fn view_json(v: &View) -> Value {
    let list = |ps: &[Problem]| -> Vec<Value> { ps.iter().map(problem_json).collect() };
    json!({
        "name": v.name, "dir": v.dir, "versions": v.versions, "restorable": v.restorable,
        "newest_restorable": v.newest_restorable(), "bytes_checked": v.bytes_checked,
        "damage": list(&v.damage), "unrestorable": list(&v.unrestorable),
        "orphans": list(&v.orphans),
    })
}

/// `verify --json`'s answer.
pub fn report_json(s: &StoreArgs, report: &Report) -> Value {
    let list = |ps: &[Problem]| -> Vec<Value> { ps.iter().map(problem_json).collect() };
    json!({
        "dir": s.dir, "ok": report.ok(),
        // What a restore accepts, through every tier given.
        "versions": report.versions, "restorable": report.restorable,
        "newest_restorable": report.newest_restorable(),
        "bytes_checked": report.bytes_checked, "problems": list(&report.problems),
        "orphans": list(&report.orphans),
        "tiers": report.tiers.iter().map(view_json).collect::<Vec<_>>(),
        "together": report.together.as_ref().map(view_json),
    })
}

/// One problem, as a line: what, which version, which file and where.
pub fn problem_line(tiered: bool, p: &Problem) -> String {
    // Each problem's message suggests 'ickpt verify', which is what is running.
    let what = p.what.strip_suffix(ickpt::VERIFY_HINT).unwrap_or(&p.what);
    let label = match (p.kind, tiered) {
        (Kind::Damage, true) => format!("DAMAGE ({} tier)", p.tier),
        (Kind::Damage, false) => "DAMAGE".into(),
        (_, true) => format!("PROBLEM ({})", p.tier),
        (_, false) => "PROBLEM".into(),
    };
    match p.offset {
        Some(o) => format!(
            "{label} version {}: {} (offset {o}): {what}",
            p.version, p.file
        ),
        None => format!("{label} version {}: {}: {what}", p.version, p.file),
    }
}

fn print_text(report: &Report) {
    let tiered = report.together.is_some();
    for p in &report.problems {
        println!("{}", problem_line(tiered, p));
    }
    if tiered {
        for t in &report.tiers {
            println!(
                "{} tier {}: versions {}; restorable from it alone: {}",
                t.name,
                t.dir,
                describe_versions(&t.versions),
                describe_versions(&t.restorable)
            );
        }
        println!(
            "tiers together (as a restore reads them): restorable {} (newest: {})",
            describe_versions(&report.restorable),
            newest(report.newest_restorable())
        );
    }
    if !report.orphans.is_empty() {
        println!(
            "orphans: no restore can use these files and none will complete them (a version \
             they need is gone; newer versions restore): 'ickpt prune --orphans' removes them"
        );
        for p in &report.orphans {
            println!(
                "  {} ({}): {}",
                p.file,
                p.tier,
                p.what.strip_suffix(ickpt::VERIFY_HINT).unwrap_or(&p.what)
            );
        }
    }
    println!(
        "{}: {}{} versions, {} of page data checked, {} problem(s)",
        if report.ok() { "OK" } else { "FAILED" },
        if tiered {
            format!("{} tiers, ", report.tiers.len())
        } else {
            String::new()
        },
        report.versions.len(),
        human::bytes(report.bytes_checked),
        report.problems.len(),
    );
    if !report.ok() && !tiered {
        println!(
            "restorable: {} (newest: {})",
            describe_versions(&report.restorable),
            newest(report.newest_restorable())
        );
    }
}

fn newest(v: Option<u64>) -> String {
    v.map_or("none".to_string(), |n| n.to_string())
}
