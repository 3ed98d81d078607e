use crate::{human, progress, CmdResult, StoreArgs};
use ickpt::read::catalog::{Catalog, OpenVersion};
use ickpt::read::reverse_scan::{reverse_scan, ScanReport, Sink};
use ickpt::store::retry_other_copies;
use serde_json::json;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

pub fn run(s: &StoreArgs, version: Option<u64>, region: u64, out: &Path) -> CmdResult {
    crate::job::one_store_only(s)?;
    let read = crate::ReadStore::open(s)?;
    let (store, tiered) = (read.store(), read.tiered.as_ref());
    let catalog = Catalog::new(store)?;
    let started = Instant::now();
    // A named version is restored or refused; without one, the newest that restores
    // completely, passing over (and reporting) versions that fail on the way.
    let candidates = match version {
        Some(v) => vec![v],
        None => catalog.versions()?.into_iter().rev().collect(),
    };
    if candidates.is_empty() {
        return Err(ickpt::ReadError::NoCheckpoint {
            dir: store.describe(""),
        }
        .into());
    }
    let mut newest_error = None;
    for &v in &candidates {
        let attempt = retry_other_copies(tiered, damaged_file, || {
            catalog
                .chain(v)
                .map_err(Box::<dyn std::error::Error>::from)
                .and_then(|chain| restore_region(&catalog, &chain, region, out))
        });
        match attempt {
            Ok((length, report)) => {
                return report_done(s, v, region, out, length, &report, started);
            }
            Err(e) if version.is_some() || !is_damage(&*e) => return Err(e),
            Err(e) => {
                eprintln!("ickpt: passing over version {v}: {e}");
                newest_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    Err(ickpt::ReadError::NoRestorable {
        dir: store.describe(""),
        tried: candidates.len(),
        newest: newest_error.unwrap_or_default(),
    }
    .into())
}

/// The file a restore found damaged, for another tier's copy to be read instead.
// The error type the attempts return is the Box: `retry_other_copies` hands that.
#[allow(clippy::borrowed_box)]
fn damaged_file(e: &Box<dyn std::error::Error>) -> Option<&str> {
    e.downcast_ref::<ickpt::ReadError>()
        .and_then(|e| e.damaged_file())
}

fn is_damage(e: &(dyn std::error::Error + 'static)) -> bool {
    e.downcast_ref::<ickpt::ReadError>()
        .is_some_and(|e| e.is_damage())
}

/// Write `region` of the chain's newest version to `out`; returns its length.
fn restore_region(
    catalog: &Catalog<'_>,
    chain: &[OpenVersion],
    region: u64,
    out: &Path,
) -> Result<(u64, ScanReport), Box<dyn std::error::Error>> {
    let v = chain[0].version;
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
    // The application's memory: owner-only, never through a link or into another user's
    // file, and the file given is replaced only once every byte is in (a failed restore
    // leaves it as it was).
    let output = ickpt::private_file::PrivateFile::create(out)?;
    let file = output.file();
    file.set_len(length)
        .map_err(|e| format!("{}: {e}", out.display()))?;
    let pb = progress::bytes_bar("restoring");
    // Not a ReadError: the output failing is no reason to pass over to an older version.
    let mut sink = |_: usize, off: u64, bytes: &[u8]| -> Result<(), Box<dyn std::error::Error>> {
        file.write_all_at(bytes, off)
            .map_err(|e| ickpt::FileError::new(out.display().to_string(), "write", e).into())
    };
    let ps = chain[0].meta.page_size() as u64;
    let report = reverse_scan(
        catalog,
        chain,
        &|r| r.id == region,
        Sink::Copy(&mut sink),
        &mut |d, t| {
            pb.set_length(t * ps);
            pb.set_position(d * ps);
        },
    )?;
    pb.finish_and_clear();
    output.commit()?;
    Ok((length, report))
}

fn report_done(
    s: &StoreArgs,
    v: u64,
    region: u64,
    out: &Path,
    length: u64,
    report: &ScanReport,
    started: Instant,
) -> CmdResult {
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
