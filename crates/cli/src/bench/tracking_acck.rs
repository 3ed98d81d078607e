//! ACCK's workloads (its §3.1): many allocations of many sizes, each written in one
//! contiguous run covering 30–70% of it, in order or out of order; and a scattered one
//! (like freqmine). Each epoch writes, then checkpoints; the same writes run on unprotected
//! copies in the same process, so monitoring time is the tracked loop's excess over them.

use super::util::{WorkDir, PAGE};
use ickpt::{Config, Engine};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub enum Workload {
    /// Each allocation's run written front to back.
    InOrder,
    /// Each run written in 16-page chunks taken in random order.
    OutOfOrder,
    /// 5% of all pages, anywhere, in random order.
    Scattered,
}

impl Workload {
    pub const ALL: [Workload; 3] = [Workload::InOrder, Workload::OutOfOrder, Workload::Scattered];

    pub fn name(self) -> &'static str {
        match self {
            Workload::InOrder => "in-order",
            Workload::OutOfOrder => "out-of-order",
            Workload::Scattered => "scattered",
        }
    }

    pub fn parse(s: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == s)
    }
}

/// Allocation sizes in pages, log-uniform from 16 KiB to 16 MiB, summing to about `total`.
fn allocations(total_pages: usize, rng: &mut impl Rng) -> Vec<usize> {
    let mut v = Vec::new();
    let mut sum = 0;
    while sum < total_pages {
        let pages = (2f64.powf(rng.gen_range(2.0..12.0)) as usize).min(total_pages - sum);
        v.push(pages.max(1));
        sum += pages.max(1);
    }
    v
}

/// One epoch's writes, as (allocation, page) in the order they happen.
fn epoch_writes(w: Workload, sizes: &[usize], rng: &mut impl Rng) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    match w {
        Workload::Scattered => {
            let total: usize = sizes.iter().sum();
            let mut all: Vec<(usize, usize)> = sizes
                .iter()
                .enumerate()
                .flat_map(|(a, &n)| (0..n).map(move |p| (a, p)))
                .collect();
            all.shuffle(rng);
            all.truncate(total / 20);
            out = all;
        }
        Workload::InOrder | Workload::OutOfOrder => {
            for (a, &n) in sizes.iter().enumerate() {
                let len = ((n as f64 * rng.gen_range(0.3..0.7)) as usize).max(1);
                let start = rng.gen_range(0..=n - len);
                let mut chunks: Vec<usize> = (start..start + len).step_by(16).collect();
                if matches!(w, Workload::OutOfOrder) {
                    chunks.shuffle(rng);
                }
                for c in chunks {
                    out.extend((c..(c + 16).min(start + len)).map(|p| (a, p)));
                }
            }
        }
    }
    out
}

fn write_all(bases: &[*mut u8], writes: &[(usize, usize)], v: u8) -> Duration {
    let t = Instant::now();
    for &(a, p) in writes {
        // SAFETY: every (allocation, page) pair lies inside that allocation's mapping.
        unsafe { bases[a].add(p * PAGE + 128).write_volatile(v) };
    }
    t.elapsed()
}

/// Run `epochs` epochs of `w` over about `size` bytes with the engine the environment
/// configures (ICKPT_BACKEND, ICKPT_GRANULARITY).
pub fn run(
    w: Workload,
    size: usize,
    reps: usize,
    dir: &Path,
) -> Result<Value, Box<dyn std::error::Error>> {
    let epochs = (reps * 3).max(3);
    let work = WorkDir::create(dir, "acck")?;
    let mut c = Config::new(work.path());
    c.full_every = u32::MAX;
    c.keep_chains = 1;
    let e = Engine::open(c)?;
    // The same allocations and writes for every configuration.
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let sizes = allocations(size / PAGE, &mut rng);
    let mut tracked = Vec::new();
    let mut plain = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        tracked.push(e.alloc(i as u64 + 1, n * PAGE)?);
        plain.push(ickpt::sys::mem::map_anonymous(n * PAGE)?);
    }
    // Populate everything, as after an application's first sweep, then arm.
    let everything: Vec<(usize, usize)> = sizes
        .iter()
        .enumerate()
        .flat_map(|(a, &n)| (0..n).map(move |p| (a, p)))
        .collect();
    write_all(&tracked, &everything, 1);
    write_all(&plain, &everything, 1);
    e.checkpoint()?;
    let s0 = e.stats();
    let (mut monitor, mut ckpt) = (Duration::ZERO, Duration::ZERO);
    let (mut written, mut stored) = (0u64, 0u64);
    for epoch in 0..epochs {
        let writes = epoch_writes(w, &sizes, &mut rng);
        let v = epoch as u8 + 2;
        let (t, p) = if epoch % 2 == 0 {
            let t = write_all(&tracked, &writes, v);
            (t, write_all(&plain, &writes, v))
        } else {
            let p = write_all(&plain, &writes, v);
            (write_all(&tracked, &writes, v), p)
        };
        monitor += t.saturating_sub(p);
        let mut distinct = writes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        written += distinct.len() as u64;
        let info = e.checkpoint()?;
        if info.pages < distinct.len() as u64 {
            return Err(format!("{} pages stored, {} written", info.pages, distinct.len()).into());
        }
        stored += info.pages;
        ckpt += info.duration;
    }
    let s = e.stats();
    let backend = e.backend().as_str();
    drop(e);
    drop(work);
    for (p, &n) in plain.iter().zip(&sizes) {
        // SAFETY: mapped above, no longer used.
        let _ = unsafe { ickpt::sys::mem::unmap(*p, n * PAGE) };
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Ok(json!({
        "workload": w.name(),
        "backend_in_use": backend,
        "allocations": sizes.len(),
        "epochs": epochs,
        "monitor_ms": ms(monitor),
        "handler_ms": ms(s.monitor_time.saturating_sub(s0.monitor_time)),
        "faults": s.faults - s0.faults,
        "released_pages": s.acck_released_pages,
        "huge_spans": s.acck_huge_spans,
        "written_pages": written,
        "stored_pages": stored,
        "checkpoint_ms": ms(ckpt),
        "total_ms": ms(monitor + ckpt),
    }))
}
