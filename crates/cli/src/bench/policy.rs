//! The cost policy against the fixed 1 full : 9 increments, on a workload whose dirty
//! fraction changes over time (phases such as 2% of pages rewritten per step, then 60%,
//! then 10%). Each repetition runs both policies on the same steps, in an order that
//! alternates; per policy it records the checkpoint time (the `checkpoint()` calls, sync),
//! the bytes written, the full versions taken, and at the end of each phase the time to
//! restore the newest version (its chain read by the reverse scan into fresh memory, warm
//! page cache).

use super::paired::median_f;
use super::restore::fill_random;
use super::util::{
    fill_random as fill_pages, median, ms, paired_ratios, random_pages, restore_newest,
    with_run_header, RunArgs, WorkDir, PAGE,
};
use crate::CmdResult;
use ickpt::format::Kind;
use ickpt::policy::KindPolicy;
use ickpt::{Config, Engine};
use serde_json::{json, Value};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub(super) run: RunArgs,
    /// Protected memory in MiB, filled with random bytes.
    #[arg(long, default_value_t = 128)]
    size_mib: usize,
    /// The workload: PERCENT:STEPS phases, each step rewriting PERCENT of the pages (random
    /// ones) and checkpointing.
    #[arg(long, default_value = "2:15,60:15,10:15")]
    phases: String,
    /// Repetitions; each figure is a median, each ratio the median of per-repetition ratios.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// The cost policy's restore_weight (1.0: a restart's reading weighs as much as the
    /// writing it saves). Other than 1, --out's files are named policy-rhoW.*.
    #[arg(long, default_value_t = 1.0)]
    restore_weight: f64,
}

/// One policy's run of the whole workload.
struct Run {
    checkpoint: Duration,
    bytes: u64,
    fulls: usize,
    /// Each checkpoint's kind, F or I, in order.
    kinds: String,
    /// Per phase: the newest version's restore time and its chain's length.
    restores: Vec<(Duration, usize)>,
}

fn phases(spec: &str) -> Result<Vec<(usize, usize)>, String> {
    spec.split(',')
        .map(|p| {
            let (pct, steps) = p.split_once(':').ok_or(())?;
            let (pct, steps) = (pct.parse().map_err(drop)?, steps.parse().map_err(drop)?);
            (pct <= 100 && steps > 0).then_some((pct, steps)).ok_or(())
        })
        .collect::<Result<_, ()>>()
        .map_err(|_| format!("--phases {spec}: expected PERCENT:STEPS,... (e.g. 2:15,60:15)"))
}

fn run_policy(
    dir: &Path,
    policy: KindPolicy,
    a: &Args,
    plan: &[(usize, usize)],
    seed: u64,
) -> Result<Run, Box<dyn std::error::Error>> {
    let size = a.size_mib << 20;
    let pages = size / PAGE;
    let mut c = Config::new(dir);
    c.policy = policy;
    c.restore_weight = a.restore_weight;
    c.full_every = 10;
    c.keep_chains = 2;
    let e = Engine::open(c)?;
    let m = e.alloc(1, size)?;
    // SAFETY: `m` is `size` bytes from alloc, live until the engine drops.
    unsafe { fill_random(m, size, seed) };
    let mut run = Run {
        checkpoint: Duration::ZERO,
        bytes: 0,
        fulls: 0,
        kinds: String::new(),
        restores: Vec::new(),
    };
    let mut step = 0u64;
    for &(pct, steps) in plan {
        for _ in 0..steps {
            step += 1;
            let written = random_pages(pages, pages * pct / 100, seed * 1000 + step);
            // SAFETY: every page listed is below `pages`, inside the `size` bytes at `m`.
            unsafe { fill_pages(m, &written, seed ^ (step << 32)) };
            let t = Instant::now();
            let info = e.checkpoint()?;
            run.checkpoint += t.elapsed();
            run.bytes += info.bytes;
            run.fulls += usize::from(info.kind == Kind::Full);
            run.kinds
                .push(if info.kind == Kind::Full { 'F' } else { 'I' });
        }
        let store = ickpt::store::DirStore::open_read(dir)?;
        run.restores.push(restore_newest(&store, size)?);
    }
    Ok(run)
}

pub fn run(a: &Args) -> CmdResult {
    let plan = phases(&a.phases)?;
    let reps = a.reps.max(1);
    let work = WorkDir::create(&a.run.dir, "policy")?;
    let started = Instant::now();
    let (mut fixed, mut cost) = (Vec::new(), Vec::new());
    for rep in 0..reps {
        let seed = 1 + rep as u64;
        let order = if rep % 2 == 0 {
            [KindPolicy::Fixed, KindPolicy::Cost]
        } else {
            [KindPolicy::Cost, KindPolicy::Fixed]
        };
        for policy in order {
            let dir = work.sub(&format!("{policy:?}-{rep}"))?;
            let r = run_policy(&dir, policy, a, &plan, seed)?;
            std::fs::remove_dir_all(&dir)?;
            match policy {
                KindPolicy::Fixed => fixed.push(r),
                KindPolicy::Cost => cost.push(r),
            }
        }
    }
    let backend = Engine::open(Config::new(work.sub("probe")?))?.backend();
    drop(work);
    let report = report(a, &plan, &fixed, &cost, backend.as_str(), started.elapsed());
    let stem = if a.restore_weight == 1.0 {
        "policy".to_string()
    } else {
        format!("policy-rho{}", a.restore_weight)
    };
    super::util::save(a.run.out.as_deref(), &stem, &report, Some(csv(&report)))?;
    if a.run.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn median_of(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    median_f(&v)
}

fn summary(runs: &[Run], phases: usize) -> Value {
    let restore_ms: Vec<f64> = (0..phases)
        .map(|i| ms(median(runs.iter().map(|r| r.restores[i].0).collect())))
        .collect();
    let chain: Vec<usize> = (0..phases)
        .map(|i| runs.iter().map(|r| r.restores[i].1).max().unwrap_or(0))
        .collect();
    json!({
        "checkpoint_s": median(runs.iter().map(|r| r.checkpoint).collect()).as_secs_f64(),
        "bytes": median_of(runs.iter().map(|r| r.bytes as f64).collect()) as u64,
        "fulls": median_of(runs.iter().map(|r| r.fulls as f64).collect()) as u64,
        "restore_ms": restore_ms,
        "chain_versions": chain,
        "runs": runs.iter().map(|r| json!({
            "checkpoint_s": r.checkpoint.as_secs_f64(), "bytes": r.bytes, "fulls": r.fulls,
            "kinds": r.kinds,
            "restore_ms": r.restores.iter().map(|x| ms(x.0)).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

fn report(
    a: &Args,
    plan: &[(usize, usize)],
    fixed: &[Run],
    cost: &[Run],
    backend: &str,
    took: Duration,
) -> Value {
    let times = |runs: &[Run], f: &dyn Fn(&Run) -> Duration| runs.iter().map(f).collect::<Vec<_>>();
    let pairs = |f: &dyn Fn(&Run) -> Duration| paired_ratios(&times(cost, f), &times(fixed, f));
    let checkpoint = pairs(&|r| r.checkpoint);
    let restore = pairs(&|r| r.restores.iter().map(|x| x.0).sum());
    with_run_header(json!({
        "backend": backend, "size_mib": a.size_mib, "reps": fixed.len(),
        "restore_weight": a.restore_weight,
        "phases": plan.iter().map(|&(p, s)| json!({"dirty_percent": p, "steps": s})).collect::<Vec<_>>(),
        "seconds": took.as_secs_f64(),
        "fixed": summary(fixed, plan.len()),
        "cost": summary(cost, plan.len()),
        "cost_over_fixed": {
            "checkpoint_median": checkpoint.0, "checkpoint_range": [checkpoint.1, checkpoint.2],
            "restore_median": restore.0, "restore_range": [restore.1, restore.2],
        },
    }))
}

fn csv(r: &Value) -> String {
    let mut out = String::from("policy,checkpoint_s,bytes,fulls");
    let phases = r["phases"].as_array().map_or(0, Vec::len);
    for i in 0..phases {
        out += &format!(",restore_ms_phase{},chain_phase{}", i + 1, i + 1);
    }
    out.push('\n');
    for name in ["fixed", "cost"] {
        let s = &r[name];
        out += &format!("{name},{},{},{}", s["checkpoint_s"], s["bytes"], s["fulls"]);
        for i in 0..phases {
            out += &format!(",{},{}", s["restore_ms"][i], s["chain_versions"][i]);
        }
        out.push('\n');
    }
    out
}

fn print_table(r: &Value) {
    println!("policy  checkpoint s  written MiB  fulls  restore ms per phase (chain versions)");
    for name in ["fixed", "cost"] {
        let s = &r[name];
        let phases: Vec<String> = (0..s["restore_ms"].as_array().map_or(0, Vec::len))
            .map(|i| {
                format!(
                    "{:.1} ({})",
                    s["restore_ms"][i].as_f64().unwrap_or(0.0),
                    s["chain_versions"][i]
                )
            })
            .collect();
        println!(
            "{name:<7} {:>12.3} {:>12.1} {:>6}  {}",
            s["checkpoint_s"].as_f64().unwrap_or(0.0),
            s["bytes"].as_f64().unwrap_or(0.0) / (1 << 20) as f64,
            s["fulls"],
            phases.join(", ")
        );
    }
    let c = &r["cost_over_fixed"];
    println!(
        "cost / fixed: checkpoint time {:.2} (pairs {} to {}), restore time {:.2} (pairs {} to {})",
        c["checkpoint_median"].as_f64().unwrap_or(0.0),
        c["checkpoint_range"][0],
        c["checkpoint_range"][1],
        c["restore_median"].as_f64().unwrap_or(0.0),
        c["restore_range"][0],
        c["restore_range"][1]
    );
}
