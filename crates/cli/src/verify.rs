use crate::{human, open_store, progress, CmdResult, StoreArgs};
use serde_json::json;
use std::process::ExitCode;

pub fn run(s: &StoreArgs) -> CmdResult {
    let store = open_store(s)?;
    let pb = progress::bytes_bar("verifying");
    let report = ickpt::read::verify::verify_store(&store, &mut |done, total| {
        pb.set_length(total);
        pb.set_position(done);
    })?;
    pb.finish_and_clear();
    let ok = report.problems.is_empty();
    if s.json {
        let problems: Vec<_> = report
            .problems
            .iter()
            .map(|p| json!({"version": p.version, "file": p.file, "offset": p.offset, "what": p.what}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "dir": s.dir()?, "ok": ok, "versions": report.versions,
                "restorable": report.restorable,
                "newest_restorable": report.restorable.last(),
                "bytes_checked": report.bytes_checked, "problems": problems,
            }))?
        );
    } else {
        for p in &report.problems {
            // Each problem's message suggests 'ickpt verify', which is what is running.
            let what = p.what.strip_suffix(ickpt::VERIFY_HINT).unwrap_or(&p.what);
            match p.offset {
                Some(o) => println!(
                    "PROBLEM version {}: {} (offset {o}): {what}",
                    p.version, p.file
                ),
                None => println!("PROBLEM version {}: {}: {what}", p.version, p.file),
            }
        }
        println!(
            "{}: {} versions, {} of page data checked, {} problem(s)",
            if ok { "OK" } else { "FAILED" },
            report.versions.len(),
            human::bytes(report.bytes_checked),
            report.problems.len()
        );
        if !ok {
            println!(
                "restorable: {} (newest: {})",
                ickpt::read::catalog::describe_versions(&report.restorable),
                report
                    .restorable
                    .last()
                    .map_or("none".to_string(), |v| v.to_string())
            );
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
