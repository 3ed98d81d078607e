//! Issue 2's benchmark: what an incremental checkpoint costs against writing the same bytes
//! plainly, what tracking a first write costs, and what a reverse-scan restart costs.

use super::util::{
    machine, median, ms, plain_write, random_pages, settle, touch_pages, WorkDir, PAGE,
};
use crate::{human, CmdResult};
use ickpt::{Config, Engine};
use serde_json::json;
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
    /// Repetitions per case; the median is reported.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Set from the global `--json`.
    #[arg(skip)]
    pub(super) json: bool,
}

struct Case {
    pct: usize,
    /// Median of each phase: collect, copy, write, commit.
    phases: [Duration; 5],
    pages: usize,
    ckpt_bytes: u64,
    ckpt: Duration,
    plain: Duration,
    tracked_write: Duration,
    plain_write: Duration,
}

fn engine(dir: &Path, full_every: u32) -> Result<Engine, ickpt::InitError> {
    let mut c = Config::new(dir);
    c.full_every = full_every;
    c.keep_chains = 1;
    Engine::open(c)
}

pub fn run(a: &Args) -> CmdResult {
    let size = a.size_mib << 20;
    let pages = size / PAGE;
    let reps = a.reps.max(1);
    let work = WorkDir::create(&a.dir, "incremental")?;
    let baseline_dir = work.sub("baseline")?;
    let buf = vec![0x5au8; 8 << 20];
    let all: Vec<usize> = (0..pages).collect();

    // Checkpoints of 1..100% dirty pages.
    let e = engine(&work.sub("incr")?, u32::MAX)?;
    let mem = e.alloc(1, size)?;
    // SAFETY: `mem` is `size` bytes from alloc, live until the engine drops.
    unsafe { touch_pages(mem, &all, 1) };
    let full = e.checkpoint()?;
    let plain_mem = ickpt::sys::mem::map_anonymous(size)?;
    // SAFETY: as above, for the unprotected comparison buffer (pre-faulted here).
    unsafe { touch_pages(plain_mem, &all, 1) };
    let mut cases = Vec::new();
    for pct in [1usize, 10, 50, 100] {
        let n = (pages * pct / 100).max(1);
        let (mut ck, mut pl, mut tw, mut pw) = (vec![], vec![], vec![], vec![]);
        let mut ph: [Vec<Duration>; 5] = Default::default();
        let mut ckpt_bytes = 0;
        for rep in 0..reps {
            let list = random_pages(pages, n, (pct * 1000 + rep) as u64);
            let v = (rep + 2) as u8;
            // SAFETY: page numbers are below `pages`; both buffers are `size` bytes.
            tw.push(unsafe { touch_pages(mem, &list, v) });
            // SAFETY: as above.
            pw.push(unsafe { touch_pages(plain_mem, &list, v) });
            // Alternate which goes first, so neither always meets a colder or warmer device.
            let known_bytes = ckpt_bytes;
            if rep % 2 == 1 {
                settle();
                pl.push(plain_write(&baseline_dir, known_bytes, &buf)?);
            }
            settle();
            let info = e.checkpoint()?;
            assert_eq!(
                info.pages as usize, n,
                "an increment holds exactly the dirty pages"
            );
            ck.push(info.duration);
            let p = &info.phases;
            for (v, d) in ph
                .iter_mut()
                .zip([p.collect, p.copy, p.release, p.write, p.commit])
            {
                v.push(d);
            }
            ckpt_bytes = info.bytes;
            if rep % 2 == 0 {
                settle();
                pl.push(plain_write(&baseline_dir, info.bytes, &buf)?);
            }
        }
        cases.push(Case {
            pct,
            phases: ph.map(median),
            pages: n,
            ckpt_bytes,
            ckpt: median(ck),
            plain: median(pl),
            tracked_write: median(tw),
            plain_write: median(pw),
        });
    }
    // First-write cost in address order over every page (the cases above write in random
    // order), tracked against the same loop on unprotected memory.
    let (mut seq_t, mut seq_p) = (vec![], vec![]);
    for rep in 0..reps {
        e.checkpoint()?; // re-arm: every page is clean and protected again
                         // SAFETY: page numbers are below `pages`; both buffers are `size` bytes.
        seq_t.push(unsafe { touch_pages(mem, &all, 100 + rep as u8) });
        // SAFETY: as above.
        seq_p.push(unsafe { touch_pages(plain_mem, &all, 100 + rep as u8) });
    }
    let (seq_tracked, seq_plain) = (median(seq_t), median(seq_p));
    drop(e);
    // SAFETY: mapped above, no longer used.
    unsafe { ickpt::sys::mem::unmap(plain_mem, size)? };

    // Restart: full + 9 increments of 10% each, against one full of the same memory.
    let chain_dir = work.sub("chain")?;
    {
        let e = engine(&chain_dir, 10)?;
        let m = e.alloc(1, size)?;
        // SAFETY: `m` is `size` bytes from alloc.
        unsafe { touch_pages(m, &all, 1) };
        e.checkpoint()?;
        for i in 0..9 {
            // SAFETY: as above.
            unsafe { touch_pages(m, &random_pages(pages, pages / 10, 77 + i), i as u8) };
            e.checkpoint()?;
        }
    }
    let full_dir = work.sub("full")?;
    {
        let e = engine(&full_dir, 1)?;
        let m = e.alloc(1, size)?;
        // SAFETY: as above.
        unsafe { touch_pages(m, &all, 1) };
        e.checkpoint()?;
    }
    let restore_time = |dir: &Path| -> Result<(Duration, u64, u32), Box<dyn std::error::Error>> {
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..reps {
            let e = Engine::open(Config::new(dir))?;
            e.alloc(1, size)?;
            let v = e.latest()?.expect("a version");
            let t = Instant::now();
            let info = e.restore(v)?;
            times.push(t.elapsed());
            last = Some(info);
        }
        let info = last.expect("reps >= 1");
        Ok((median(times), info.pages, info.chain_len))
    };
    let (chain_t, chain_pages, chain_len) = restore_time(&chain_dir)?;
    let (full_t, full_pages, _) = restore_time(&full_dir)?;
    drop(work);

    if a.json {
        let rows: Vec<_> = cases
            .iter()
            .map(|c| {
                json!({
                    "dirty_percent": c.pct, "pages": c.pages, "checkpoint_bytes": c.ckpt_bytes,
                    "checkpoint_ms": ms(c.ckpt), "plain_write_ms": ms(c.plain),
                    "phases_ms": {"collect": ms(c.phases[0]), "copy_and_crc": ms(c.phases[1]),
                                  "release": ms(c.phases[2]), "write": ms(c.phases[3]),
                                  "commit": ms(c.phases[4])},
                    "ratio": c.ckpt.as_secs_f64() / c.plain.as_secs_f64(),
                    "tracked_first_write_ns_per_page": c.tracked_write.as_nanos() as f64 / c.pages as f64,
                    "plain_write_ns_per_page": c.plain_write.as_nanos() as f64 / c.pages as f64,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "machine": machine(), "size_mib": a.size_mib, "reps": reps,
                "full_checkpoint": {"bytes": full.bytes, "ms": ms(full.duration)},
                "cases": rows,
                "sequential_first_write": {
                    "tracked_ns_per_page": seq_tracked.as_nanos() as f64 / pages as f64,
                    "plain_ns_per_page": seq_plain.as_nanos() as f64 / pages as f64,
                },
                "restart": {
                    "chain_versions": chain_len, "chain_ms": ms(chain_t), "chain_pages_read": chain_pages,
                    "full_ms": ms(full_t), "full_pages_read": full_pages,
                    "ratio": chain_t.as_secs_f64() / full_t.as_secs_f64(),
                },
            }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "ickpt bench incremental: {} MiB protected, median of {reps}, on {}",
        a.size_mib,
        machine()
    );
    println!(
        "full checkpoint: {} in {}",
        human::bytes(full.bytes),
        human::duration(full.duration)
    );
    println!();
    let rows: Vec<Vec<String>> = cases
        .iter()
        .map(|c| {
            vec![
                format!("{}%", c.pct),
                c.pages.to_string(),
                human::bytes(c.ckpt_bytes),
                format!("{:.1}", ms(c.ckpt)),
                format!("{:.1}", ms(c.plain)),
                format!("{:.2}", c.ckpt.as_secs_f64() / c.plain.as_secs_f64()),
                format!("{:.0}", c.tracked_write.as_nanos() as f64 / c.pages as f64),
                format!("{:.1}", c.plain_write.as_nanos() as f64 / c.pages as f64),
            ]
        })
        .collect();
    human::table(
        &[
            "DIRTY",
            "PAGES",
            "CKPT-SIZE",
            "CKPT-MS",
            "PLAIN-WRITE-MS",
            "RATIO",
            "TRACKED-NS/PAGE",
            "PLAIN-NS/PAGE",
        ],
        &rows,
    );
    println!();
    println!("where a checkpoint's time goes (ms, medians):");
    let rows: Vec<Vec<String>> = cases
        .iter()
        .map(|c| {
            let mut r = vec![format!("{}%", c.pct)];
            r.extend(c.phases.iter().map(|d| format!("{:.1}", ms(*d))));
            r
        })
        .collect();
    human::table(
        &[
            "DIRTY",
            "COLLECT",
            "COPY+CRC",
            "RELEASE",
            "WRITE",
            "COMMIT(FSYNC)",
        ],
        &rows,
    );
    println!(
        "first write in address order, all pages: tracked {:.0} ns/page, plain {:.1} ns/page",
        seq_tracked.as_nanos() as f64 / pages as f64,
        seq_plain.as_nanos() as f64 / pages as f64
    );
    println!();
    println!(
        "restart: full+{} increments {:.1} ms ({chain_pages} pages read), one full {:.1} ms ({full_pages} pages read), ratio {:.2}",
        chain_len - 1,
        ms(chain_t),
        ms(full_t),
        chain_t.as_secs_f64() / full_t.as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
