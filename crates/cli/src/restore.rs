use crate::{human, open_store, pick_version, progress, CmdResult, StoreArgs};
use ickpt::catalog;
use ickpt::restore::reverse_scan;
use ickpt::store::{version_name, Store};
use serde_json::json;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

pub fn run(s: &StoreArgs, version: Option<u64>, region: u64, out: &Path) -> CmdResult {
    let store = open_store(s)?;
    let v = pick_version(&store, version)?;
    let started = Instant::now();
    let chain = catalog::chain(&store, v)?;
    let Some((_, entry)) = chain[0].meta.region_by_id(region) else {
        let ids: Vec<String> = chain[0]
            .meta
            .regions
            .iter()
            .map(|r| r.id.to_string())
            .collect();
        return Err(format!(
            "version {v} has no region {region} (it has: {})",
            if ids.is_empty() {
                "none".into()
            } else {
                ids.join(", ")
            }
        )
        .into());
    };
    let length = entry.length;
    let file = File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
    file.set_len(length)
        .map_err(|e| format!("{}: {e}", out.display()))?;
    let pb = progress::bytes_bar("restoring");
    let describe = |v: u64| store.describe(&version_name(v));
    let mut sink = |_: usize, off: u64, bytes: &[u8]| -> ickpt::Result<()> {
        file.write_all_at(bytes, off)
            .map_err(|e| ickpt::Error::io(out.display().to_string(), "write", e))
    };
    let ps = chain[0].meta.page_size() as u64;
    let report = reverse_scan(
        &chain,
        &describe,
        &|r| r.id == region,
        &mut sink,
        &mut |d, t| {
            pb.set_length(t * ps);
            pb.set_position(d * ps);
        },
    )?;
    pb.finish_and_clear();
    file.sync_all()
        .map_err(|e| format!("{}: {e}", out.display()))?;
    let elapsed = started.elapsed();
    if s.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "version": v, "region": region, "out": out, "bytes": length,
                "pages_read": report.pages,
                "pages_per_version": report.pages_per_version,
                "seconds": elapsed.as_secs_f64(),
            }))?
        );
    } else {
        println!(
            "restored region {region} of version {v} ({}) to {} in {}: {} pages read from {} versions",
            human::bytes(length),
            out.display(),
            human::duration(elapsed),
            report.pages,
            report.pages_per_version.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}
