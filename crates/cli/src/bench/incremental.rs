//! Every ickpt operation against the plainest way to do the same with the same bytes on the
//! same disk, as paired ratios.
//!
//! For 1 / 10 / 50 / 100% dirty pages of a region of random bytes (nothing compresses or
//! dedups): the sync checkpoint against a write+fsync of as many bytes to a new file in the
//! same directory, and against the same write with early writeback every 8 MiB (as the store
//! does); the async checkpoint's call (the pause the application sees), and the call plus `wait()`,
//! against the write+fsync. Then the restore of a full version against a plain
//! sequential read of as many bytes, and the restore of full + 9 increments against one full,
//! each with a warm and a cold page cache. Each repetition measures the ickpt side and its
//! baseline back to back, alternating which goes first (`paired.rs`).

use super::paired::{interleave, Comparison, CSV_HEADER};
use super::util::{
    bytes_below, drop_cached, fill_random, median, ms, named, page_reporting, plain_read,
    plain_write, random_pages, settle, touch_pages, with_run_header, write_file, WorkDir, PAGE,
};
use crate::{human, CmdResult};
use ickpt::format::CommitMode;
use ickpt::{CheckpointInfo, Config, Engine, RestoreInfo};
use rand::{RngCore, SeedableRng};
use serde_json::{json, Value};
use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// Where to work, on the storage to measure: the benchmark makes its own directory in it
    /// and removes only that.
    #[arg(long, default_value = "build/bench")]
    dir: PathBuf,
    /// Protected memory in MiB.
    #[arg(long, default_value_t = 256)]
    size_mib: usize,
    /// Interleaved repetitions per comparison; the per-repetition ratios, their median,
    /// minimum and maximum are reported.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Also write incremental.json and incremental.csv (one row per comparison and
    /// repetition) here; scripts/plot_incremental.py draws incremental.png from the JSON.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Set from the global `--json`.
    #[arg(skip)]
    pub(super) json: bool,
}

type Res<T> = Result<T, Box<dyn Error>>;

const DIRTY_PERCENT: [usize; 4] = [1, 10, 50, 100];
/// The baselines' labels.
const WRITE: &str = "write+fsync";
const WRITE_WB: &str = "write+fsync with writeback every 8 MiB";
const FULL: &str = "restore of full";
/// Increments in the chain restored against one full.
const CHAIN_INCREMENTS: u64 = 9;

/// One dirty share: its comparisons and what goes with them.
struct Case {
    pct: usize,
    pages: usize,
    ckpt_bytes: u64,
    /// Medians of the sync checkpoints' phases: collect, copy, crc, release, write, commit.
    phases: [Duration; 6],
    sync: Comparison,
    sync_writeback: Comparison,
    async_call: Comparison,
    async_total: Comparison,
    async_wait: Duration,
    tracked_write: Duration,
    plain_write: Duration,
}

fn engine(dir: &Path, full_every: u32, mode: CommitMode) -> Res<Engine> {
    let mut c = Config::new(dir);
    c.full_every = full_every;
    c.keep_chains = 1;
    c.mode = mode;
    let e = Engine::open(c)?;
    if e.config().mode != mode {
        return Err(format!(
            "ICKPT_MODE made the {mode:?} engine {:?}: unset it for this benchmark",
            e.config().mode
        )
        .into());
    }
    Ok(e)
}

/// A checkpoint that must hold at least the `pages` pages dirtied (a backend may store more:
/// mprotect's fault-around opens neighbours of pages written in a run).
fn checked(info: CheckpointInfo, pages: usize) -> CheckpointInfo {
    assert!(
        info.pages as usize >= pages,
        "an increment holds every dirty page: {} < {pages}",
        info.pages
    );
    info
}

/// Memory of `size` bytes from `e`, region 1, all random.
fn random_region(e: &Engine, size: usize, seed: u64) -> Res<*mut u8> {
    let m = e.alloc(1, size)?;
    let all: Vec<usize> = (0..size / PAGE).collect();
    // SAFETY: `m` is `size` bytes from alloc, live until the engine drops.
    unsafe { fill_random(m, &all, seed) };
    Ok(m)
}

pub fn run(a: &Args) -> CmdResult {
    let started = Instant::now();
    let reporting_at_start = page_reporting();
    let size = a.size_mib << 20;
    let pages = size / PAGE;
    if pages == 0 {
        return Err("--size-mib must be at least 1".into());
    }
    let reps = a.reps.max(1);
    let work = WorkDir::create(&a.dir, "incremental")?;
    let baseline_dir = work.sub("baseline")?;
    let all: Vec<usize> = (0..pages).collect();
    // The baselines' bytes, random like the region's; also the unprotected memory the first
    // writes are compared with.
    let mut src = vec![0u8; size];
    rand::rngs::SmallRng::seed_from_u64(9).fill_bytes(&mut src);

    eprintln!("checkpoints: {} MiB, {reps} repetitions ...", a.size_mib);
    let es = engine(&work.sub("sync")?, u32::MAX, CommitMode::Sync)?;
    let ea = engine(&work.sub("async")?, u32::MAX, CommitMode::Async)?;
    let backend = es.backend();
    let mem = random_region(&es, size, 1)?;
    let amem = random_region(&ea, size, 2)?;
    let full = es.checkpoint()?;
    ea.checkpoint()?;
    ea.wait()?;
    let t = Checkpoints {
        sync: &es,
        asynchronous: &ea,
        mem,
        amem,
        baseline_dir: &baseline_dir,
        pages,
        reps,
    };
    let mut cases = Vec::new();
    for pct in DIRTY_PERCENT {
        eprintln!("  {pct}% dirty");
        cases.push(t.case(&mut src, pct)?);
    }
    // First-write cost in address order over every page (the cases above write in random
    // order), tracked against the same loop on unprotected memory.
    let (mut seq_t, mut seq_p) = (vec![], vec![]);
    for rep in 0..reps {
        es.checkpoint()?; // re-arm: every page is clean and protected again
        let v = 100 + rep as u8;
        // SAFETY: page numbers are below `pages`; both buffers are `size` bytes.
        seq_t.push(unsafe { touch_pages(mem, &all, v) });
        // SAFETY: as above.
        seq_p.push(unsafe { touch_pages(src.as_mut_ptr(), &all, v) });
    }
    let seq = [median(seq_t), median(seq_p)];
    drop((es, ea));

    eprintln!("restores ...");
    let restores = restores(&work, size, &src, reps)?;
    drop(work);

    let run = Run {
        backend,
        full,
        cases,
        seq,
        restores,
        reporting_at_start,
    };
    let report = report(a, reps, &run, started);
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).map_err(|e| named(dir, e))?;
        std::fs::write(
            dir.join("incremental.json"),
            serde_json::to_string_pretty(&report)? + "\n",
        )?;
        let mut csv = CSV_HEADER.to_string();
        for c in run.comparisons() {
            csv += &c.csv_rows();
        }
        std::fs::write(dir.join("incremental.csv"), csv)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_tables(&report, &run);
    }
    Ok(ExitCode::SUCCESS)
}

/// What the checkpoint comparisons run on: a sync and an async engine, each with one region of
/// `pages` random pages, and the directory the baselines write in (beside the stores).
struct Checkpoints<'a> {
    sync: &'a Engine,
    asynchronous: &'a Engine,
    mem: *mut u8,
    amem: *mut u8,
    baseline_dir: &'a Path,
    pages: usize,
    reps: usize,
}

impl Checkpoints<'_> {
    /// `reps` repetitions at `pct` dirty: each dirties the same share of both engines' regions
    /// with fresh random bytes (untimed but for the first write of each page), then measures the
    /// sync checkpoint with its two floors, and the async call and wait with its floor.
    fn case(&self, src: &mut [u8], pct: usize) -> Res<Case> {
        let Checkpoints {
            sync: es,
            asynchronous: ea,
            mem,
            amem,
            baseline_dir,
            pages,
            reps,
        } = *self;
        let n = (pages * pct / 100).max(1);
        let [mut sync, mut sync_writeback, mut async_call, mut async_total] = [
            ("sync_checkpoint", "sync checkpoint()", WRITE),
            (
                "sync_checkpoint_vs_writeback",
                "sync checkpoint()",
                WRITE_WB,
            ),
            ("async_call", "async checkpoint()", WRITE),
            ("async_call_and_wait", "async checkpoint() + wait()", WRITE),
        ]
        .map(|(name, ickpt, baseline)| Comparison::new(name, ickpt, baseline, Some(pct)));
        let (mut tw, mut pw, mut waits) = (vec![], vec![], vec![]);
        // Every baseline file stays until the run ends, as every version stays in the stores.
        let kept = |pct: usize, rep: usize, what: &str| {
            baseline_dir.join(format!("{pct}pct-rep{rep}-{what}.bin"))
        };
        let mut ph: [Vec<Duration>; 6] = Default::default();
        // Known from the first repetition on, which runs its checkpoint first.
        let mut bytes = 0u64;
        for rep in 0..reps {
            let seed = (pct * 1000 + rep) as u64;
            let list = random_pages(pages, n, seed);
            let v = (rep + 2) as u8;
            // SAFETY: page numbers are below `pages`; the three buffers are `size` bytes each.
            unsafe {
                tw.push(touch_pages(mem, &list, v));
                pw.push(touch_pages(src.as_mut_ptr(), &list, v));
                fill_random(mem, &list, seed);
                fill_random(amem, &list, !seed);
            }
            let src: &[u8] = src;
            let mut info = None;
            let t = interleave(rep, 3, |step| -> Res<Duration> {
                settle();
                Ok(match step {
                    0 => {
                        let t = Instant::now();
                        let i = checked(es.checkpoint()?, n);
                        let d = t.elapsed();
                        bytes = i.bytes;
                        info = Some(i);
                        d
                    }
                    1 => plain_write(&kept(pct, rep, "write"), bytes, src, false)?,
                    _ => plain_write(&kept(pct, rep, "writeback"), bytes, src, true)?,
                })
            })?;
            sync.push(&t, 0, 1, Duration::ZERO);
            sync_writeback.push(&t, 0, 2, Duration::ZERO);
            let p = info.expect("step 0 ran").phases;
            for (v, d) in ph
                .iter_mut()
                .zip([p.collect, p.copy, p.crc, p.release, p.write, p.commit])
            {
                v.push(d);
            }
            let mut wait = Duration::ZERO;
            let t = interleave(rep, 2, |step| -> Res<Duration> {
                settle();
                if step == 1 {
                    return Ok(plain_write(&kept(pct, rep, "async"), bytes, src, false)?);
                }
                let t = Instant::now();
                checked(ea.checkpoint()?, n);
                let call = t.elapsed();
                let t = Instant::now();
                let done = ea.wait()?.ok_or("an async checkpoint committed nothing")?;
                wait = t.elapsed();
                checked(done, n);
                Ok(call)
            })?;
            async_call.push(&t, 0, 1, Duration::ZERO);
            async_total.push(&t, 0, 1, wait);
            waits.push(wait);
        }
        for c in [
            &mut sync,
            &mut sync_writeback,
            &mut async_call,
            &mut async_total,
        ] {
            c.bytes = bytes;
        }
        Ok(Case {
            pct,
            pages: n,
            ckpt_bytes: bytes,
            phases: ph.map(median),
            sync,
            sync_writeback,
            async_call,
            async_total,
            async_wait: median(waits),
            tracked_write: median(tw),
            plain_write: median(pw),
        })
    }
}

/// The restore comparisons, and what the chain restore read.
struct Restores {
    warm: Comparison,
    cold: Comparison,
    chain_warm: Comparison,
    chain_cold: Comparison,
    chain: RestoreInfo,
    full: RestoreInfo,
}

/// Restore one store's latest version into fresh memory: the engine is opened and the memory
/// allocated outside the timing, and with `cold` the store's files are then dropped from the
/// page cache.
fn timed_restore(dir: &Path, size: usize, cold: bool) -> Res<(Duration, RestoreInfo)> {
    let e = Engine::open(Config::new(dir))?;
    e.alloc(1, size)?;
    let v = e.latest()?.ok_or("a version")?;
    if cold {
        drop_cached(dir)?;
    }
    let t = Instant::now();
    let info = e.restore(v)?;
    Ok((t.elapsed(), info))
}

fn restores(work: &WorkDir, size: usize, src: &[u8], reps: usize) -> Res<Restores> {
    let pages = size / PAGE;
    // Full + 9 increments of 10% each, against one full of the same size.
    let chain_dir = work.sub("chain")?;
    {
        let e = engine(&chain_dir, CHAIN_INCREMENTS as u32 + 1, CommitMode::Sync)?;
        let m = random_region(&e, size, 3)?;
        e.checkpoint()?;
        for i in 0..CHAIN_INCREMENTS {
            let list = random_pages(pages, (pages / 10).max(1), 77 + i);
            // SAFETY: page numbers are below `pages`; `m` is `size` bytes from alloc.
            unsafe { fill_random(m, &list, 200 + i) };
            e.checkpoint()?;
        }
    }
    let full_dir = work.sub("full")?;
    {
        let e = engine(&full_dir, 1, CommitMode::Sync)?;
        random_region(&e, size, 4)?;
        e.checkpoint()?;
    }
    // The plain read's file: as many bytes as the full store holds, in the same file system.
    let plain = work.path().join("plain-read.bin");
    let full_bytes = bytes_below(&full_dir)?;
    write_file(&plain, full_bytes, src, false)?;

    let [mut warm, mut cold, mut chain_warm, mut chain_cold] = [
        ("restore_warm", FULL, "read"),
        ("restore_cold", FULL, "read"),
        ("chain_restore_warm", "restore of full+9", FULL),
        ("chain_restore_cold", "restore of full+9", FULL),
    ]
    .map(|(name, ickpt, baseline)| Comparison::new(name, ickpt, baseline, None));
    warm.bytes = full_bytes;
    cold.bytes = full_bytes;
    chain_warm.bytes = bytes_below(&chain_dir)?;
    chain_cold.bytes = chain_warm.bytes;
    // Warm runs first, after one untimed pass over everything; cold ones drop before each step.
    plain_read(&plain)?;
    timed_restore(&full_dir, size, false)?;
    let (_, mut chain) = timed_restore(&chain_dir, size, false)?;
    let mut full = chain.clone();
    for cold_cache in [false, true] {
        let (c, cc) = if cold_cache {
            (&mut cold, &mut chain_cold)
        } else {
            (&mut warm, &mut chain_warm)
        };
        for rep in 0..reps {
            let t = interleave(rep, 2, |step| -> Res<Duration> {
                if step == 0 {
                    let (d, i) = timed_restore(&full_dir, size, cold_cache)?;
                    full = i;
                    return Ok(d);
                }
                if cold_cache {
                    drop_cached(&plain)?;
                }
                Ok(plain_read(&plain)?.0)
            })?;
            c.push(&t, 0, 1, Duration::ZERO);
            let t = interleave(rep, 2, |step| -> Res<Duration> {
                let (d, i) = timed_restore(
                    if step == 0 { &chain_dir } else { &full_dir },
                    size,
                    cold_cache,
                )?;
                if step == 0 {
                    chain = i;
                }
                Ok(d)
            })?;
            cc.push(&t, 0, 1, Duration::ZERO);
        }
    }
    Ok(Restores {
        warm,
        cold,
        chain_warm,
        chain_cold,
        chain,
        full,
    })
}

/// Everything a run measured.
struct Run {
    /// `page_reporting()` when the run began.
    reporting_at_start: Option<(u64, u64)>,
    backend: ickpt::Backend,
    full: CheckpointInfo,
    cases: Vec<Case>,
    /// First writes in address order, tracked and unprotected.
    seq: [Duration; 2],
    restores: Restores,
}

impl Run {
    fn comparisons(&self) -> Vec<&Comparison> {
        let mut v: Vec<&Comparison> = self
            .cases
            .iter()
            .flat_map(|c| [&c.sync, &c.sync_writeback, &c.async_call, &c.async_total])
            .collect();
        let r = &self.restores;
        v.extend([&r.warm, &r.cold, &r.chain_warm, &r.chain_cold]);
        v
    }
}

/// The JSON: the side-by-side (`comparisons`), and the keys earlier versions wrote
/// (`cases[i].checkpoint_ms`, `plain_write_ms`, `phases_ms`, `restart`, ...), which
/// scripts/bench-compare*.{sh,py} read, now the medians of the paired repetitions.
fn report(a: &Args, reps: usize, run: &Run, started: Instant) -> Value {
    let Run {
        backend,
        full,
        cases,
        seq: [seq_tracked, seq_plain],
        restores: r,
        reporting_at_start,
    } = run;
    // How much freed memory the guest handed back to the host while the run went on: each
    // such page the run took again cost a host fault, on either side of a pair.
    let reporting = reporting_at_start.zip(page_reporting()).map(|((a, order), (b, _))| {
        json!({"order": order, "reported_mib_during_run": b.saturating_sub(a) / 1024})
    });
    let pages = (a.size_mib << 20) / PAGE;
    let per_page = |d: Duration, n: usize| d.as_nanos() as f64 / n as f64;
    let rows: Vec<_> = cases
        .iter()
        .map(|c| {
            json!({
                "dirty_percent": c.pct, "pages": c.pages, "checkpoint_bytes": c.ckpt_bytes,
                "checkpoint_ms": c.sync.ickpt_median(), "plain_write_ms": c.sync.baseline_median(),
                "plain_write_writeback_ms": c.sync_writeback.baseline_median(),
                "phases_ms": {"collect": ms(c.phases[0]), "copy": ms(c.phases[1]),
                              "crc": ms(c.phases[2]),
                              "copy_and_crc": ms(c.phases[1]) + ms(c.phases[2]),
                              "release": ms(c.phases[3]), "write": ms(c.phases[4]),
                              "commit": ms(c.phases[5])},
                "ratio": c.sync.ratio_stats().0,
                "ratio_writeback": c.sync_writeback.ratio_stats().0,
                "async_call_ms": c.async_call.ickpt_median(),
                "async_wait_ms": ms(c.async_wait),
                "async_plain_write_ms": c.async_call.baseline_median(),
                "async_call_ratio": c.async_call.ratio_stats().0,
                "tracked_first_write_ns_per_page": per_page(c.tracked_write, c.pages),
                "plain_write_ns_per_page": per_page(c.plain_write, c.pages),
            })
        })
        .collect();
    let restore = |c: &Comparison| json!({"ms": c.ickpt_median(), "read_ms": c.baseline_median(), "ratio": c.ratio_stats().0});
    with_run_header(json!({
        "backend": backend.as_str(),
        "size_mib": a.size_mib, "reps": reps,
        "run_seconds": started.elapsed().as_secs_f64(),
        "free_page_reporting": reporting,
        "full_checkpoint": {"bytes": full.bytes, "ms": ms(full.duration)},
        "cases": rows,
        "sequential_first_write": {
            "tracked_ns_per_page": per_page(*seq_tracked, pages),
            "plain_ns_per_page": per_page(*seq_plain, pages),
        },
        "restore": {"bytes": r.warm.bytes, "pages": r.full.pages,
                    "warm": restore(&r.warm), "cold": restore(&r.cold)},
        "restart": {
            "chain_versions": r.chain.chain_len, "chain_pages_read": r.chain.pages,
            "full_pages_read": r.full.pages,
            "chain_ms": r.chain_warm.ickpt_median(), "full_ms": r.chain_warm.baseline_median(),
            "ratio": r.chain_warm.ratio_stats().0,
            "chain_cold_ms": r.chain_cold.ickpt_median(), "full_cold_ms": r.chain_cold.baseline_median(),
            "cold_ratio": r.chain_cold.ratio_stats().0,
        },
        "comparisons": run.comparisons().iter().map(|c| c.to_json()).collect::<Vec<_>>(),
    }))
}

fn print_tables(j: &Value, run: &Run) {
    let (cases, r) = (&run.cases, &run.restores);
    println!(
        "ickpt bench incremental: {} MiB of random bytes, backend {}, {} interleaved repetitions, commit {}, on {}",
        j["size_mib"],
        j["backend"].as_str().unwrap_or(""),
        j["reps"],
        j["git_commit"].as_str().unwrap_or(""),
        j["machine"].as_str().unwrap_or("")
    );
    println!(
        "full checkpoint: {} in {:.1} ms; ratio = ickpt / baseline per repetition (below 1: faster)",
        human::bytes(j["full_checkpoint"]["bytes"].as_u64().unwrap_or(0)),
        j["full_checkpoint"]["ms"].as_f64().unwrap_or(0.0)
    );
    println!();
    let rows: Vec<Vec<String>> = run
        .comparisons()
        .iter()
        .map(|c| {
            let (med, min, max) = c.ratio_stats();
            vec![
                c.name.to_string(),
                c.dirty_percent.map_or("-".into(), |p| format!("{p}%")),
                human::bytes(c.bytes),
                format!("{:.1}", c.ickpt_median()),
                format!("{:.1}", c.baseline_median()),
                c.baseline.to_string(),
                format!("{med:.2}"),
                format!("{min:.2}-{max:.2}"),
                c.ratios()
                    .iter()
                    .map(|x| format!("{x:.2}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]
        })
        .collect();
    human::table(
        &[
            "COMPARISON",
            "DIRTY",
            "BYTES",
            "ICKPT-MS",
            "BASE-MS",
            "BASELINE",
            "RATIO",
            "MIN-MAX",
            "PER-REP",
        ],
        &rows,
    );
    println!();
    println!("where a sync checkpoint's time goes (ms, medians), async wait, first writes:");
    let rows: Vec<Vec<String>> = cases
        .iter()
        .map(|c| {
            let mut row = vec![format!("{}%", c.pct)];
            row.extend(c.phases.iter().map(|d| format!("{:.1}", ms(*d))));
            row.push(format!("{:.1}", ms(c.async_wait)));
            row.push(format!(
                "{:.0}",
                c.tracked_write.as_nanos() as f64 / c.pages as f64
            ));
            row.push(format!(
                "{:.1}",
                c.plain_write.as_nanos() as f64 / c.pages as f64
            ));
            row
        })
        .collect();
    human::table(
        &[
            "DIRTY",
            "COLLECT",
            "COPY",
            "CRC",
            "RELEASE",
            "WRITE",
            "COMMIT(FSYNC)",
            "ASYNC-WAIT",
            "TRACKED-NS/PAGE",
            "PLAIN-NS/PAGE",
        ],
        &rows,
    );
    let s = &j["sequential_first_write"];
    println!(
        "first write in address order, all pages: tracked {:.0} ns/page, plain {:.1} ns/page",
        s["tracked_ns_per_page"].as_f64().unwrap_or(0.0),
        s["plain_ns_per_page"].as_f64().unwrap_or(0.0)
    );
    println!(
        "restart: full+{} increments read {} pages, one full {} pages; {:.1} s in all",
        r.chain.chain_len.saturating_sub(1),
        r.chain.pages,
        r.full.pages,
        j["run_seconds"].as_f64().unwrap_or(0.0)
    );
}
