//! Drain throughput: a store of one full version and 9 increments (random bytes) drained by
//! ickpt to a shared directory, and with --object to an S3 bucket, against the same files
//! copied by hand to the same kind of target: `std::fs::copy` plus fsync of each file and
//! of the directory, and an upload with `object_store`'s own multipart writer (the client
//! the object tier uses, driven as its documentation shows). The local files' page cache is
//! dropped before each case; the cases' order rotates per repetition.

use super::restore::write_chain;
use super::util::{drop_cached, median, ms, paired_ratios, with_run_header, RunArgs, WorkDir};
use crate::CmdResult;
use ickpt::{Config, Engine};
use serde_json::json;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub(super) run: RunArgs,
    /// Protected memory in MiB, filled with random bytes.
    #[arg(long, default_value_t = 128)]
    size_mib: usize,
    /// Repetitions; each figure is a median, each ratio the median of per-repetition ratios.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// An object-store target too (s3://bucket/prefix, AWS variables for the endpoint).
    #[arg(long)]
    object: Option<String>,
}

/// ickpt's drain of `local` to the tier `set_tier` adds to its configuration, from opening the engine (which
/// starts the drain of what is there) to `wait_drained` returning.
fn drain(
    local: &Path,
    set_tier: &dyn Fn(&mut Config),
) -> Result<Duration, Box<dyn std::error::Error>> {
    let mut c = Config::new(local);
    c.keep_chains = 100;
    set_tier(&mut c);
    let t = Instant::now();
    let e = Engine::open(c)?;
    e.wait_drained()?;
    let d = t.elapsed();
    drop(e);
    Ok(d)
}

/// Each file copied into `to` and fsynced, then the directory.
fn plain_copy(files: &[PathBuf], to: &Path) -> std::io::Result<Duration> {
    let t = Instant::now();
    for f in files {
        let dst = to.join(f.file_name().expect("a file"));
        std::fs::copy(f, &dst)?;
        File::open(&dst)?.sync_all()?;
    }
    File::open(to)?.sync_all()?;
    Ok(t.elapsed())
}

/// Each file read and uploaded with `object_store`'s `WriteMultipart` under `prefix`.
fn plain_upload(
    files: &[PathBuf],
    url: &str,
    prefix: &str,
) -> Result<Duration, Box<dyn std::error::Error>> {
    use object_store::ObjectStore;
    let (bucket, _) = ickpt::store::parse_object_url(url)
        .map_err(|want| format!("--object {url}: expected {want}"))?;
    let s3 = object_store::aws::AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .build()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let t = Instant::now();
    rt.block_on(async {
        for f in files {
            let bytes = std::fs::read(f)?;
            let name = f.file_name().and_then(|n| n.to_str()).expect("a file name");
            let path = object_store::path::Path::from(format!("{prefix}/{name}"));
            let upload = s3.put_multipart(&path).await?;
            let mut w = object_store::WriteMultipart::new(upload);
            w.write(&bytes);
            w.finish().await?;
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    Ok(t.elapsed())
}

pub fn run(a: &Args) -> CmdResult {
    let size = a.size_mib << 20;
    let reps = a.reps.max(1);
    let started = Instant::now();
    let work = WorkDir::create(&a.run.dir, "drain")?;
    let local = work.sub("local")?;
    let backend = {
        let mut c = Config::new(&local);
        c.keep_chains = 100;
        let e = Engine::open(c)?;
        write_chain(&e, size, 9)?;
        e.backend()
    };
    let files = super::util::version_files(&local)?;
    let bytes: u64 = files
        .iter()
        .map(|f| f.metadata().map(|m| m.len()))
        .sum::<std::io::Result<u64>>()?;
    let names = [
        "drain to shared dir",
        "plain copy",
        "drain to S3",
        "plain upload",
    ];
    let cases = if a.object.is_some() { 4 } else { 2 };
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); cases];
    for rep in 0..reps {
        let mut order: Vec<usize> = (0..cases).collect();
        order.rotate_left(rep % cases);
        for i in order {
            drop_cached(&local)?;
            let target = work.sub(&format!("target-{rep}-{i}"))?;
            let url = a.object.as_ref().map(|u| {
                format!(
                    "{}/drain-{}-{rep}-{i}",
                    u.trim_end_matches('/'),
                    std::process::id()
                )
            });
            let d = match i {
                0 => drain(&local, &|c| c.shared_dir = Some(target.clone()))?,
                1 => plain_copy(&files, &target)?,
                2 => drain(&local, &|c| c.object_url = url.clone())?,
                _ => {
                    let url = url.clone().expect("with --object");
                    let (_, prefix) = ickpt::store::parse_object_url(&url)?;
                    plain_upload(&files, &url, &prefix)?
                }
            };
            times[i].push(d);
            std::fs::remove_dir_all(&target)?;
        }
    }
    drop(work);
    let mbs = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e6;
    let rows: Vec<_> = (0..cases)
        .map(|i| {
            let base = &times[i - i % 2 + 1];
            let (m, lo, hi) = paired_ratios(&times[i], base);
            json!({"case": names[i], "median_ms": ms(median(times[i].clone())),
                   "mb_s": mbs(median(times[i].clone())),
                   "over_plain": m, "range": [lo, hi],
                   "runs_ms": times[i].iter().map(|d| ms(*d)).collect::<Vec<_>>()})
        })
        .collect();
    let report = with_run_header(json!({
        "benchmark": "drain", "backend": backend.as_str(), "reps": reps,
        "size_mib": a.size_mib, "files": files.len(), "bytes": bytes,
        "seconds": started.elapsed().as_secs_f64(), "cases": rows,
    }));
    super::util::save(a.run.out.as_deref(), "drain", &report, None)?;
    if a.run.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} files, {:.1} MiB",
            files.len(),
            bytes as f64 / (1 << 20) as f64
        );
        println!(
            "{:<22} {:>10} {:>8} {:>16}",
            "case", "median ms", "MB/s", "÷ plain (pairs)"
        );
        for r in report["cases"].as_array().into_iter().flatten() {
            println!(
                "{:<22} {:>10.0} {:>8.0} {:>6.2} ({:.2}-{:.2})",
                r["case"].as_str().unwrap_or(""),
                r["median_ms"].as_f64().unwrap_or(0.0),
                r["mb_s"].as_f64().unwrap_or(0.0),
                r["over_plain"].as_f64().unwrap_or(0.0),
                r["range"][0].as_f64().unwrap_or(0.0),
                r["range"][1].as_f64().unwrap_or(0.0),
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
