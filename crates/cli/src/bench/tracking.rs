//! `ickpt bench tracking`: what a first write to tracked memory costs with each backend,
//! against an unprotected write loop and against the bare kernel mechanism, both measured
//! in the same process; and ACCK's coarse-grained monitoring against page-grained
//! monitoring on workloads shaped like the ACCK paper's observation.
//!
//! Every case runs in a child process of its own (`--case`), with its backend forced through
//! the environment, so backends never share a process (the raw SIGSEGV handler replaces
//! ickpt's, and each userfaultfd has its own handler thread).

use super::tracking_acck::{self, Workload};
use super::tracking_raw;
use super::util::{machine, median, random_pages, touch_pages, WorkDir, PAGE};
use crate::CmdResult;
use ickpt::{Config, Engine};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// Tracked memory in MiB.
    #[arg(long, default_value_t = 256)]
    size_mib: usize,
    /// Repetitions per first-write case (the median is reported); ACCK runs this many epochs
    /// times 3.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Where to work: each run makes its own directory in it and removes only that.
    #[arg(long, default_value = "build/bench/tracking")]
    dir: PathBuf,
    /// Only the first-write costs, or only ACCK.
    #[arg(long, value_parser = ["first-write", "acck"])]
    only: Option<String>,
    /// Write tracking-*.json and tracking-*.csv here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Set from the global `--json`.
    #[arg(skip)]
    pub(super) json: bool,
    /// Run one case in this process and print its result as JSON (used by the parent run).
    #[arg(long, hide = true)]
    case: Option<String>,
}

/// One first-write case: what tracks, and in which page order.
struct FirstWrite {
    /// ickpt backend (`mprotect`, `uffd`, `uffd-async`), or a bare mechanism (`raw-…`).
    tracker: &'static str,
    /// For uffd: the handler's ICKPT_UFFD_SPIN mode (raw: `sleep` or `spin`).
    spin: Option<&'static str>,
    random: bool,
}

impl FirstWrite {
    fn label(&self) -> String {
        match self.spin {
            Some(s) => format!("{} ({s})", self.tracker),
            None => self.tracker.to_string(),
        }
    }
}

fn first_write_cases(available: &[&str]) -> Vec<FirstWrite> {
    let mut trackers: Vec<(&'static str, Option<&'static str>)> =
        vec![("mprotect", None), ("raw-mprotect", None)];
    if available.contains(&"uffd") {
        trackers.extend([
            ("uffd", Some("never")),
            ("uffd", Some("burst")),
            ("uffd", Some("always")),
            ("raw-uffd", Some("sleep")),
            ("raw-uffd", Some("spin")),
        ]);
    }
    if available.contains(&"uffd-async") {
        trackers.extend([("uffd-async", None), ("raw-uffd-async", None)]);
    }
    let mut v = Vec::new();
    for random in [false, true] {
        for &(tracker, spin) in &trackers {
            v.push(FirstWrite {
                tracker,
                spin,
                random,
            });
        }
    }
    v
}

/// Run `--case spec` in a child with `env`, and parse its JSON line.
fn child(spec: &str, env: &[(&str, &str)], a: &Args) -> Result<Value, Box<dyn std::error::Error>> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["bench", "tracking", "--case", spec])
        .args(["--size-mib", &a.size_mib.to_string()])
        .args(["--reps", &a.reps.to_string()])
        .arg("--dir")
        .arg(&a.dir)
        .env_remove("ICKPT_BACKEND")
        .env_remove("ICKPT_GRANULARITY")
        .env_remove("ICKPT_UFFD_SPIN");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(format!(
            "case {spec} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

pub fn run(a: &Args) -> CmdResult {
    if let Some(spec) = &a.case {
        let v = run_case(spec, a)?;
        println!("{v}");
        return Ok(ExitCode::SUCCESS);
    }
    let available_owned: Vec<String> = ickpt::probe::available()?
        .iter()
        .map(|b| b.as_str().to_string())
        .collect();
    let available: Vec<&str> = available_owned.iter().map(|s| s.as_str()).collect();
    let mut first = Vec::new();
    if a.only.as_deref() != Some("acck") {
        for c in first_write_cases(&available) {
            let order = if c.random { "random" } else { "sequential" };
            eprintln!("first writes: {} {order} ...", c.label());
            let mut env = vec![];
            if !c.tracker.starts_with("raw-") {
                env.push(("ICKPT_BACKEND", c.tracker));
                if let Some(s) = c.spin {
                    env.push(("ICKPT_UFFD_SPIN", s));
                }
            }
            let spec = format!(
                "first-write:{}:{}:{order}",
                c.tracker,
                c.spin.unwrap_or("-")
            );
            let mut r = child(&spec, &env, a)?;
            r["label"] = json!(c.label());
            r["order"] = json!(order);
            first.push(r);
        }
    }
    let mut acck = Vec::new();
    if a.only.as_deref() != Some("first-write") {
        for w in Workload::ALL {
            for backend in ["mprotect", "uffd", "uffd-async"] {
                if !available.contains(&backend) {
                    continue;
                }
                let grains: &[&str] = if backend == "uffd-async" {
                    &["page"]
                } else {
                    &["page", "adaptive"]
                };
                for g in grains {
                    eprintln!("ACCK: {} {backend} {g} ...", w.name());
                    let env = [("ICKPT_BACKEND", backend), ("ICKPT_GRANULARITY", *g)];
                    let mut r = child(&format!("acck:{}", w.name()), &env, a)?;
                    r["backend"] = json!(backend);
                    r["granularity"] = json!(g);
                    acck.push(r);
                }
            }
        }
    }
    let report = json!({
        "machine": machine(),
        "size_mib": a.size_mib,
        "reps": a.reps,
        "first_write": first,
        "acck": acck,
    });
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).map_err(|e| super::util::named(dir, e))?;
        std::fs::write(
            dir.join("tracking.json"),
            serde_json::to_string_pretty(&report)?,
        )?;
        write_csv(dir, &report)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_tables(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// The first-write table's columns: JSON key, heading.
const FIRST_WRITE_COLS: [(&str, &str); 6] = [
    ("label", "tracker"),
    ("order", "order"),
    ("tracked_ns_per_page", "tracked ns"),
    ("plain_ns_per_page", "plain ns"),
    ("added_ns_per_page", "added ns"),
    ("rearm_ms", "re-arm ms"),
];

/// The ACCK table's columns.
const ACCK_COLS: [(&str, &str); 10] = [
    ("workload", "workload"),
    ("backend", "backend"),
    ("granularity", "grain"),
    ("monitor_ms", "monitor ms"),
    ("faults", "faults"),
    ("written_pages", "written"),
    ("stored_pages", "stored"),
    ("checkpoint_ms", "ckpt ms"),
    ("total_ms", "total ms"),
    ("huge_spans", "huge"),
];

/// A row's cells: strings as they are, integers whole, other numbers to 2 decimals.
fn cells(row: &Value, cols: &[(&str, &str)]) -> Vec<String> {
    cols.iter()
        .map(|(k, _)| match &row[*k] {
            Value::String(s) => s.clone(),
            Value::Number(n) if n.is_u64() || n.is_i64() => n.to_string(),
            Value::Number(n) => format!("{:.2}", n.as_f64().unwrap_or(0.0)),
            other => other.to_string(),
        })
        .collect()
}

fn rows<'a>(r: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    r[key].as_array().into_iter().flatten()
}

fn write_csv(dir: &std::path::Path, r: &Value) -> std::io::Result<()> {
    for (key, cols, file) in [
        (
            "first_write",
            &FIRST_WRITE_COLS[..],
            "tracking-first-write.csv",
        ),
        ("acck", &ACCK_COLS[..], "tracking-acck.csv"),
    ] {
        let mut s: String = cols.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(",") + "\n";
        for row in rows(r, key) {
            s += &(cells(row, cols).join(",") + "\n");
        }
        std::fs::write(dir.join(file), s)?;
    }
    Ok(())
}

fn print_tables(r: &Value) {
    println!(
        "# {} — {} MiB, median of {} reps",
        r["machine"].as_str().unwrap_or(""),
        r["size_mib"],
        r["reps"]
    );
    for (key, cols, title) in [
        ("first_write", &FIRST_WRITE_COLS[..], "First write per page: tracked, the same loop unprotected, added; re-arming after the checkpoint"),
        ("acck", &ACCK_COLS[..], "ACCK against page granularity, summed over the epochs"),
    ] {
        println!("\n{title}");
        let head: Vec<String> = cols.iter().map(|(_, h)| h.to_string()).collect();
        let body: Vec<Vec<String>> = rows(r, key).map(|row| cells(row, cols)).collect();
        let widths: Vec<usize> = (0..cols.len())
            .map(|i| body.iter().chain([&head]).map(|c| c[i].len()).max().unwrap_or(0))
            .collect();
        for line in [&head].into_iter().chain(&body) {
            let padded: Vec<String> = line
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:>w$}"))
                .collect();
            println!("{}", padded.join("  "));
        }
    }
}

fn run_case(spec: &str, a: &Args) -> Result<Value, Box<dyn std::error::Error>> {
    let parts: Vec<&str> = spec.split(':').collect();
    match parts.as_slice() {
        ["first-write", tracker, spin, order] => first_write(tracker, spin, *order == "random", a),
        ["acck", workload] => {
            let w = Workload::parse(workload).ok_or("unknown workload")?;
            tracking_acck::run(w, a.size_mib << 20, a.reps, &a.dir)
        }
        _ => Err(format!("bad case {spec:?}").into()),
    }
}

/// First writes to every page of `size_mib`, in address or random order: the tracked loop
/// and the same loop on unprotected memory, alternately, `reps` times.
fn first_write(
    tracker: &str,
    spin: &str,
    random: bool,
    a: &Args,
) -> Result<Value, Box<dyn std::error::Error>> {
    let size = a.size_mib << 20;
    let pages = size / PAGE;
    let plain = ickpt::sys::mem::map_anonymous(size)?;
    let all: Vec<usize> = (0..pages).collect();
    // SAFETY: page numbers below `pages`, buffer of `size` bytes (populated here).
    unsafe { touch_pages(plain, &all, 1) };
    let order_of = |rep: usize| {
        if random {
            random_pages(pages, pages, rep as u64 + 1)
        } else {
            all.clone()
        }
    };
    let (mut tracked, mut untracked, mut rearm) = (vec![], vec![], vec![]);
    let work = WorkDir::create(&a.dir, "tracking")?;
    let engine = if tracker.starts_with("raw-") {
        None
    } else {
        let mut c = Config::new(work.path());
        c.full_every = u32::MAX;
        c.keep_chains = 1;
        Some(Engine::open(c)?)
    };
    let mem = match &engine {
        Some(e) => e.alloc(1, size)?,
        None => ickpt::sys::mem::map_anonymous(size)?,
    };
    // SAFETY: as above, for the tracked buffer.
    unsafe { touch_pages(mem, &all, 1) };
    if let Some(e) = &engine {
        e.checkpoint()?;
    }
    for rep in 0..a.reps.max(1) {
        let order = order_of(rep);
        let v = rep as u8 + 2;
        // SAFETY: as above.
        let p = || unsafe { touch_pages(plain, &order, v) };
        if rep % 2 == 1 {
            untracked.push(p());
        }
        let t = match (tracker, &engine) {
            ("raw-mprotect", _) => tracking_raw::mprotect(mem, size, &order, v)?,
            ("raw-uffd", _) => tracking_raw::uffd(mem, size, &order, v, spin == "spin")?,
            ("raw-uffd-async", _) => {
                let (t, scan) = tracking_raw::uffd_async(mem, size, &order, v)?;
                rearm.push(scan);
                t
            }
            (_, Some(e)) => {
                // SAFETY: as above.
                let t = unsafe { touch_pages(mem, &order, v) };
                let info = e.checkpoint()?;
                if info.pages as usize != pages {
                    return Err(format!("{} pages stored, {pages} written", info.pages).into());
                }
                rearm.push(info.phases.collect);
                t
            }
            _ => unreachable!("engine cases have an engine"),
        };
        tracked.push(t);
        if rep % 2 == 0 {
            untracked.push(p());
        }
    }
    let backend = engine.as_ref().map(|e| e.backend().as_str());
    drop(engine);
    drop(work);
    let per_page = |d: Duration| d.as_nanos() as f64 / pages as f64;
    let (t, p) = (median(tracked), median(untracked));
    Ok(json!({
        "tracker": tracker,
        "backend_in_use": backend,
        "spin": spin,
        "tracked_ns_per_page": per_page(t),
        "plain_ns_per_page": per_page(p),
        "added_ns_per_page": per_page(t) - per_page(p),
        "rearm_ms": if rearm.is_empty() { 0.0 } else { median(rearm).as_secs_f64() * 1e3 },
    }))
}
