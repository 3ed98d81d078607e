//! AI-Ckpt's memory benchmark (the paper's §4.3): a memory-intensive loop over a 256 MiB
//! region (every byte incremented each iteration, pages in ascending, random or descending
//! order), 39 iterations, a checkpoint every 10, against the same loop on unprotected
//! memory measured in the same run. Figure 2: added run time and access types for sync,
//! async with address order and async with the adaptive order. Figure 4: the async orders
//! with the copy-on-write buffer swept, as the reduction of sync's overhead.

use super::util::{machine, with_run_header, WorkDir, PAGE};
use crate::CmdResult;
use ickpt::format::{CommitMode, FlushOrder};
use ickpt::store::parse_size;
use ickpt::{Config, Engine};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// Where to work, on the storage to measure: the benchmark makes its own directory in it
    /// and removes only that.
    #[arg(long, default_value = "build/bench-aickpt")]
    dir: PathBuf,
    /// Protected memory in MiB.
    #[arg(long, default_value_t = 256)]
    size_mib: usize,
    /// Copy-on-write buffer for figure 2, in MiB.
    #[arg(long, default_value_t = 16)]
    cow_mib: usize,
    #[arg(long, default_value_t = 39)]
    iterations: u32,
    /// Checkpoint after every this many iterations.
    #[arg(long, default_value_t = 10)]
    every: u32,
    /// Extra passes over each page per iteration: the per-page compute knob. 0 is the raw
    /// setting (one vectorised increment of the page).
    #[arg(long, default_value_t = 0)]
    work: u32,
    /// Emulated storage bandwidth, bytes/s with K/M/G suffix; 0 = the device as it is.
    #[arg(long, default_value = "0")]
    bandwidth: String,
    /// Access patterns to run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ascending,random,descending"
    )]
    patterns: Vec<String>,
    /// Copy-on-write sizes (MiB) for figure 4; empty to skip it.
    #[arg(long, value_delimiter = ',', default_value = "")]
    cow_sweep: Vec<String>,
    /// Patterns figure 4 runs (a subset of --patterns).
    #[arg(long, value_delimiter = ',', default_value = "random")]
    sweep_patterns: Vec<String>,
    /// Pages a write fault may open at once (ickpt's fault-around; 1 = one trap per page,
    /// as in the paper).
    #[arg(long, default_value_t = 1)]
    fault_around: usize,
    /// Repetitions: each runs the baseline, then every configuration once; per configuration
    /// the repetition with the median added time is reported.
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// Write one CSV row per configuration here.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Set from the global `--json`.
    #[arg(skip)]
    pub(super) json: bool,
}

#[derive(Clone, Copy)]
struct Setup {
    mode: CommitMode,
    order: FlushOrder,
    cow_mib: usize,
}

struct Run {
    figure: &'static str,
    pattern: String,
    label: String,
    cow_mib: usize,
    runtime: Duration,
    baseline: Duration,
    checkpoints: u64,
    cow: u64,
    wait: u64,
    avoided: u64,
    wait_time: Duration,
    commit_time: Duration,
    faults: u64,
    /// The tracking backend the engine ran with.
    backend: ickpt::Backend,
}

impl Run {
    fn added(&self) -> f64 {
        self.runtime.as_secs_f64() - self.baseline.as_secs_f64()
    }
    fn per_ckpt(&self, n: u64) -> f64 {
        n as f64 / self.checkpoints.max(1) as f64
    }
}

fn page_order(pattern: &str, pages: usize) -> Result<Vec<usize>, String> {
    let mut v: Vec<usize> = (0..pages).collect();
    match pattern {
        "ascending" => {}
        "descending" => v.reverse(),
        "random" => v.shuffle(&mut rand::rngs::StdRng::seed_from_u64(2013)),
        other => {
            return Err(format!(
                "unknown pattern {other:?}: ascending, random or descending"
            ))
        }
    }
    Ok(v)
}

/// One iteration: increment every byte of every page, pages in `order`, `1 + work` passes
/// per page.
fn iterate(mem: *mut u8, order: &[usize], work: u32) {
    for &p in order {
        // SAFETY: every page index is below the region's page count; `mem` is the region.
        let page = unsafe { std::slice::from_raw_parts_mut(mem.add(p * PAGE), PAGE) };
        for _ in 0..=work {
            // Opaque to the optimiser, so passes are not folded into one add.
            let page = std::hint::black_box(&mut *page);
            for b in page.iter_mut() {
                *b = b.wrapping_add(1);
            }
        }
    }
}

struct Bench<'a> {
    a: &'a Args,
    size: usize,
    bandwidth: u64,
    /// Each checkpointed run's store, inside the benchmark's own directory.
    store: PathBuf,
}

impl Bench<'_> {
    /// Run the loop; with `setup`, over ickpt-protected memory with checkpoints.
    fn run(
        &self,
        order: &[usize],
        setup: Option<Setup>,
    ) -> Result<(Duration, Option<Engine>), Box<dyn std::error::Error>> {
        let a = self.a;
        let Some(s) = setup else {
            let mem = ickpt::sys::mem::map_anonymous(self.size)?;
            let t = Instant::now();
            for _ in 0..a.iterations {
                iterate(mem, order, a.work);
            }
            let d = t.elapsed();
            // SAFETY: mapped above, unused from here on.
            unsafe { ickpt::sys::mem::unmap(mem, self.size)? };
            return Ok((d, None));
        };
        let _ = std::fs::remove_dir_all(&self.store);
        let mut c = Config::new(&self.store);
        c.mode = s.mode;
        c.flush_order = s.order;
        c.cow_bytes = s.cow_mib << 20;
        c.bandwidth = (self.bandwidth > 0).then_some(self.bandwidth);
        c.keep_chains = 1;
        c.fault_around = a.fault_around;
        let e = Engine::open(c)?;
        let mem = e.alloc(1, self.size)?;
        let t = Instant::now();
        for i in 1..=a.iterations {
            iterate(mem, order, a.work);
            if i % a.every == 0 && i < a.iterations {
                e.checkpoint()?;
            }
        }
        e.wait()?;
        Ok((t.elapsed(), Some(e)))
    }

    /// One run of one configuration, paired with the baseline run just before it.
    fn measure_once(
        &self,
        c: &Case,
        pattern: &str,
        order: &[usize],
        baseline: Duration,
    ) -> Result<Run, Box<dyn std::error::Error>> {
        let (runtime, e) = self.run(order, Some(c.setup))?;
        let e = e.expect("an engine for a checkpointed run");
        let st = e.stats();
        let backend = e.backend();
        drop(e);
        let _ = std::fs::remove_dir_all(&self.store);
        Ok(Run {
            figure: c.figure,
            pattern: pattern.into(),
            label: c.label.into(),
            cow_mib: c.setup.cow_mib,
            runtime,
            baseline,
            checkpoints: st.checkpoints,
            cow: st.cow_pages,
            wait: st.wait_pages,
            avoided: st.avoided_pages,
            wait_time: st.wait_time,
            commit_time: st.checkpoint_time,
            faults: st.faults,
            backend,
        })
    }

    /// Every configuration `reps` times, each repetition after a fresh baseline run (so slow
    /// drift of the machine cancels in the difference); per configuration the run with the
    /// median added time is reported.
    fn measure(
        &self,
        cases: &[Case],
        pattern: &str,
        order: &[usize],
    ) -> Result<Vec<Run>, Box<dyn std::error::Error>> {
        let mut all: Vec<Vec<Run>> = cases.iter().map(|_| Vec::new()).collect();
        for rep in 0..self.a.reps.max(1) {
            let baseline = self.run(order, None)?.0;
            eprintln!(
                "  rep {rep} baseline {pattern:<10} {:>7.2} s ({:.1} ms per iteration)",
                baseline.as_secs_f64(),
                baseline.as_secs_f64() * 1e3 / self.a.iterations as f64
            );
            for (c, runs) in cases.iter().zip(&mut all) {
                runs.push(self.measure_once(c, pattern, order, baseline)?);
            }
        }
        let mut out = Vec::new();
        for mut runs in all {
            runs.sort_by(|x, y| x.added().total_cmp(&y.added()));
            let r = runs.swap_remove(runs.len() / 2);
            eprintln!(
                "  {} {pattern:<10} {:<15} cow {:>3} MiB: {:+.2} s over {:.2} s  WAIT {:>6.0} AVOIDED {:>6.0} COW {:>6.0} per checkpoint, waited {:.2} s",
                r.figure,
                r.label,
                r.cow_mib,
                r.added(),
                r.baseline.as_secs_f64(),
                r.per_ckpt(r.wait),
                r.per_ckpt(r.avoided),
                r.per_ckpt(r.cow),
                r.wait_time.as_secs_f64()
            );
            out.push(r);
        }
        Ok(out)
    }
}

/// One configuration to measure.
struct Case {
    figure: &'static str,
    label: &'static str,
    setup: Setup,
}

pub fn run(a: &Args) -> CmdResult {
    let size = a.size_mib << 20;
    let pages = size / PAGE;
    let bandwidth = parse_size(&a.bandwidth)
        .ok_or_else(|| format!("--bandwidth {:?}: expected e.g. 256M or 0", a.bandwidth))?;
    let work = WorkDir::create(&a.dir, "aickpt")?;
    let b = Bench {
        a,
        size,
        bandwidth,
        store: work.path().join("store"),
    };
    let sweep: Vec<usize> = a
        .cow_sweep
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .map_err(|_| format!("--cow-sweep: {s:?} is not a MiB count"))
        })
        .collect::<Result<_, _>>()?;
    let fig2 = [
        ("sync", CommitMode::Sync, FlushOrder::Address),
        ("async-address", CommitMode::Async, FlushOrder::Address),
        ("async-adaptive", CommitMode::Async, FlushOrder::Adaptive),
    ];
    eprintln!(
        "aickpt: {} MiB, {} iterations, checkpoint every {}, work {}, bandwidth {}, on {}",
        a.size_mib,
        a.iterations,
        a.every,
        a.work,
        if bandwidth == 0 {
            "device".to_string()
        } else {
            crate::human::bytes(bandwidth) + "/s"
        },
        machine()
    );
    let mut runs = Vec::new();
    for pattern in &a.patterns {
        let order = page_order(pattern, pages)?;
        let mut cases: Vec<Case> = fig2
            .iter()
            .map(|&(label, mode, order)| Case {
                figure: "fig2",
                label,
                setup: Setup {
                    mode,
                    order,
                    cow_mib: a.cow_mib,
                },
            })
            .collect();
        if a.sweep_patterns.contains(pattern) {
            for &cow_mib in &sweep {
                for (label, order) in [
                    ("async-address", FlushOrder::Address),
                    ("async-adaptive", FlushOrder::Adaptive),
                ] {
                    cases.push(Case {
                        figure: "fig4",
                        label,
                        setup: Setup {
                            mode: CommitMode::Async,
                            order,
                            cow_mib,
                        },
                    });
                }
            }
        }
        runs.extend(b.measure(&cases, pattern, &order)?);
    }
    if let Some(path) = &a.csv {
        write_csv(path, a, bandwidth, &runs)?;
    }
    let rows: Vec<_> = runs
        .iter()
        .map(|r| {
            json!({
                "figure": r.figure, "pattern": r.pattern, "mode": r.label, "cow_mib": r.cow_mib,
                "runtime_s": r.runtime.as_secs_f64(), "baseline_s": r.baseline.as_secs_f64(),
                "added_s": r.added(), "checkpoints": r.checkpoints,
                "wait_per_checkpoint": r.per_ckpt(r.wait),
                "avoided_per_checkpoint": r.per_ckpt(r.avoided),
                "cow_per_checkpoint": r.per_ckpt(r.cow),
                "wait_s": r.wait_time.as_secs_f64(),
                "commit_s_per_checkpoint": r.commit_time.as_secs_f64() / r.checkpoints.max(1) as f64,
                "faults": r.faults,
                "backend": r.backend.as_str(),
            })
        })
        .collect();
    let out = with_run_header(json!({
        "size_mib": a.size_mib, "iterations": a.iterations,
        "every": a.every, "work": a.work, "bandwidth": bandwidth, "cow_mib": a.cow_mib,
        "fault_around": a.fault_around, "reps": a.reps,
        "runs": rows,
    }));
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_table(&runs);
    }
    Ok(ExitCode::SUCCESS)
}

fn write_csv(path: &Path, a: &Args, bandwidth: u64, runs: &[Run]) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    writeln!(f, "figure,pattern,mode,cow_mib,work,bandwidth,fault_around,runtime_s,baseline_s,added_s,checkpoints,wait_per_ckpt,avoided_per_ckpt,cow_per_ckpt,wait_s,commit_s_per_ckpt,faults")?;
    for r in runs {
        writeln!(
            f,
            "{},{},{},{},{},{},{},{:.4},{:.4},{:.4},{},{:.1},{:.1},{:.1},{:.4},{:.4},{}",
            r.figure,
            r.pattern,
            r.label,
            r.cow_mib,
            a.work,
            bandwidth,
            a.fault_around,
            r.runtime.as_secs_f64(),
            r.baseline.as_secs_f64(),
            r.added(),
            r.checkpoints,
            r.per_ckpt(r.wait),
            r.per_ckpt(r.avoided),
            r.per_ckpt(r.cow),
            r.wait_time.as_secs_f64(),
            r.commit_time.as_secs_f64() / r.checkpoints.max(1) as f64,
            r.faults
        )?;
    }
    Ok(())
}

fn print_table(runs: &[Run]) {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.figure.into(),
                r.pattern.clone(),
                r.label.clone(),
                r.cow_mib.to_string(),
                format!("{:.2}", r.added()),
                format!("{:.2}", r.runtime.as_secs_f64() / r.baseline.as_secs_f64()),
                format!("{:.0}", r.per_ckpt(r.wait)),
                format!("{:.0}", r.per_ckpt(r.avoided)),
                format!("{:.0}", r.per_ckpt(r.cow)),
            ]
        })
        .collect();
    crate::human::table(
        &[
            "FIG",
            "PATTERN",
            "MODE",
            "COW MIB",
            "ADDED S",
            "RATIO",
            "WAIT/CKPT",
            "AVOIDED/CKPT",
            "COW/CKPT",
        ],
        &rows,
    );
}
