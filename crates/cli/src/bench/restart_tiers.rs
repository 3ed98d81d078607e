//! Restart from each tier: the newest version of a store (one full version and 9 increments
//! of 10% of the pages) restored through the tiers as a restart sees them: all of them (the
//! local copy read), the shared tier alone (the node lost), the object store alone (with
//! --object: both faster tiers lost); against a plain read of the full version's file. Cold
//! page cache for every file on both directories before each (the object store's server
//! keeps its own cache); the cases' order rotates per repetition.

use super::restore::write_chain;
use super::util::{
    drop_cached, median, ms, paired_ratios, plain_read, restore_newest, with_run_header, RunArgs,
    WorkDir,
};
use crate::CmdResult;
use ickpt::store::{DirStore, Tier, TieredStore};
use ickpt::{Config, Engine};
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub(super) run: RunArgs,
    /// Protected memory in MiB, filled with random bytes.
    #[arg(long, default_value_t = 128)]
    size_mib: usize,
    /// Repetitions; each figure is a median, each ratio the median of per-repetition ratios.
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// An object-store tier too (s3://bucket/prefix, AWS variables for the endpoint).
    #[arg(long, env = "ICKPT_OBJECT_URL")]
    object: Option<String>,
}

fn dir_tier(name: &'static str, d: &Path) -> Result<Tier, Box<dyn std::error::Error>> {
    Ok(Tier {
        name,
        store: Arc::new(DirStore::open_read(d)?),
    })
}

pub fn run(a: &Args) -> CmdResult {
    let size = a.size_mib << 20;
    let reps = a.reps.max(1);
    let started = std::time::Instant::now();
    let work = WorkDir::create(&a.run.dir, "restart-tiers")?;
    let (local, shared) = (work.sub("local")?, work.sub("shared")?);
    let backend = {
        let mut c = Config::new(&local);
        c.shared_dir = Some(shared.clone());
        c.object_url = a.object.clone();
        c.keep_chains = 1;
        let e = Engine::open(c)?;
        write_chain(&e, size, 9)?;
        e.wait_drained()?;
        e.backend()
    };
    let full_file = local.join(ickpt::store::version_name(1));
    let object = |s: &Option<String>| -> Result<Option<Tier>, Box<dyn std::error::Error>> {
        Ok(match s {
            Some(url) => Some(Tier {
                name: "object",
                store: Arc::new(ickpt::store::ObjectTier::open(url)?),
            }),
            None => None,
        })
    };
    let mut cases: Vec<(&str, Vec<Tier>)> = vec![
        (
            "local",
            vec![dir_tier("local", &local)?, dir_tier("shared", &shared)?],
        ),
        ("shared", vec![dir_tier("shared", &shared)?]),
    ];
    if let Some(t) = object(&a.object)? {
        cases[0].1.push(t.clone());
        cases[1].1.push(t.clone());
        cases.push(("object", vec![t]));
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); cases.len() + 1];
    let mut chain = 0;
    for rep in 0..reps {
        let mut order: Vec<usize> = (0..=cases.len()).collect();
        let n = order.len();
        order.rotate_left(rep % n);
        for i in order {
            drop_cached(&local)?;
            drop_cached(&shared)?;
            if i == cases.len() {
                times[i].push(plain_read(&full_file)?.0);
            } else {
                let store = TieredStore::new(cases[i].1.clone());
                let (d, n) = restore_newest(&store, size)?;
                times[i].push(d);
                chain = n;
            }
        }
    }
    drop(work);
    let plain = &times[cases.len()];
    let ratio = |t: &[Duration]| paired_ratios(t, plain);
    let rows: Vec<_> = cases
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            let (m, lo, hi) = ratio(&times[i]);
            json!({"from": name, "restore_ms": ms(median(times[i].clone())),
                   "over_plain_read": m, "range": [lo, hi],
                   "runs_ms": times[i].iter().map(|d| ms(*d)).collect::<Vec<_>>()})
        })
        .collect();
    let report = with_run_header(json!({
        "backend": backend.as_str(), "size_mib": a.size_mib, "reps": reps,
        "seconds": started.elapsed().as_secs_f64(),
        "chain_versions": chain, "object": a.object.is_some(),
        "plain_read_ms": ms(median(plain.clone())),
        "plain_read_runs_ms": plain.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
        "restores": rows,
    }));
    super::util::save(a.run.out.as_deref(), "restart-tiers", &report, None)?;
    if a.run.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "newest of {chain} versions, {} MiB; plain read of the full version: {:.1} ms (median)",
        a.size_mib,
        report["plain_read_ms"].as_f64().unwrap_or(0.0)
    );
    for r in report["restores"].as_array().into_iter().flatten() {
        println!(
            "restore from {:<6} {:>8.1} ms  ÷ plain read {:.2} (pairs {:.2}-{:.2})",
            r["from"].as_str().unwrap_or(""),
            r["restore_ms"].as_f64().unwrap_or(0.0),
            r["over_plain_read"].as_f64().unwrap_or(0.0),
            r["range"][0].as_f64().unwrap_or(0.0),
            r["range"][1].as_f64().unwrap_or(0.0)
        );
    }
    Ok(ExitCode::SUCCESS)
}
