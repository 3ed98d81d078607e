//! The restore figures of `ickpt bench incremental` on their own: a warm-cache restore of
//! one full version and of full + 9 increments, each against a plain sequential read of the
//! same full version file (`cat FILE > /dev/null`: read(2) into one 128 KiB buffer; and the
//! same read into memory mapped fresh, where a restore's bytes must land), interleaved per
//! repetition.

use super::util::{
    machine, median, ms, paired_ratios, random_pages, with_run_header, WorkDir, PAGE,
};
use crate::CmdResult;
use ickpt::{Config, Engine};
use serde_json::json;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// Where to work: the benchmark makes its own directory in it and removes only that.
    #[arg(long, default_value = "build/bench")]
    dir: PathBuf,
    /// Protected memory in MiB, filled with random bytes.
    #[arg(long, default_value_t = 256)]
    size_mib: usize,
    /// Repetitions; each figure is a median, each ratio the median of the per-repetition ratios.
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Set from the global `--json`.
    #[arg(skip)]
    pub(super) json: bool,
}

/// Fill `len` bytes at `base` with random bytes (xorshift: incompressible enough, and fast).
///
/// # Safety
/// `base..base+len` must be writable memory no reference points into.
pub(super) unsafe fn fill_random(base: *mut u8, len: usize, seed: u64) {
    let mut x = seed | 1;
    for i in (0..len).step_by(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        let n = (len - i).min(8);
        // SAFETY: i + n <= len, inside the caller's buffer.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), base.add(i), n) };
    }
}

/// Write the stores: `full` holds one full version, `chain` a full version and 9 increments
/// of a random 10% of pages each.
fn make_stores(full: &Path, chain: &Path, size: usize) -> Result<(), Box<dyn std::error::Error>> {
    for (dir, increments) in [(full, 0u64), (chain, 9)] {
        let mut c = Config::new(dir);
        c.full_every = 10;
        c.keep_chains = 1;
        write_chain(&Engine::open(c)?, size, increments)?;
    }
    Ok(())
}

/// Protect `size` random bytes in `e` and checkpoint them: a full version, then `increments`
/// increments of a random 10% of the pages each.
pub(super) fn write_chain(
    e: &Engine,
    size: usize,
    increments: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let pages = size / PAGE;
    let m = e.alloc(1, size)?;
    // SAFETY: `m` is `size` bytes from alloc, live until the engine drops.
    unsafe { fill_random(m, size, 1) };
    e.checkpoint()?;
    for i in 0..increments {
        let written = random_pages(pages, pages / 10, 77 + i);
        // SAFETY: every page listed is below `pages`, inside the `size` bytes at `m`.
        unsafe { super::util::fill_random(m, &written, 1000 + i) };
        e.checkpoint()?;
    }
    Ok(())
}

/// The one version file in `dir` with the lowest number (the full version).
fn first_version(dir: &Path) -> std::io::Result<PathBuf> {
    super::util::version_files(dir)?
        .into_iter()
        .next()
        .ok_or_else(|| std::io::Error::other("no version file"))
}

/// `cat FILE > /dev/null`: the file read front to back into one 128 KiB buffer.
fn plain_read(path: &Path, buf: &mut [u8]) -> std::io::Result<(Duration, u64)> {
    let t = Instant::now();
    let mut f = std::fs::File::open(path)?;
    let mut total = 0u64;
    loop {
        match f.read(buf)? {
            0 => break,
            n => total += n as u64,
        }
    }
    Ok((t.elapsed(), total))
}

/// The same file read front to back, 2 MiB per read(2), into memory mapped fresh for it,
/// as a restore's bytes must land: the first touch of each page costs a fault.
fn plain_read_into_memory(path: &Path, len: usize) -> Result<Duration, Box<dyn std::error::Error>> {
    let t = Instant::now();
    let mut f = std::fs::File::open(path)?;
    let mem = ickpt::sys::mem::map_anonymous(len)?;
    // SAFETY: `len` bytes mapped just above, unmapped below; no other reference exists.
    let dst = unsafe { std::slice::from_raw_parts_mut(mem, len) };
    for chunk in dst.chunks_mut(2 << 20) {
        f.read_exact(chunk)?;
    }
    let d = t.elapsed();
    // SAFETY: mapped above, no longer used.
    unsafe { ickpt::sys::mem::unmap(mem, len)? };
    Ok(d)
}

/// Restore the newest version of `dir` into a fresh engine's fresh region; the restore call
/// alone is timed.
fn restore(
    dir: &Path,
    size: usize,
) -> Result<(Duration, ickpt::RestoreInfo), Box<dyn std::error::Error>> {
    let e = Engine::open(Config::new(dir))?;
    e.alloc(1, size)?;
    let v = e.latest()?.ok_or("no version")?;
    let t = Instant::now();
    let info = e.restore(v)?;
    Ok((t.elapsed(), info))
}

pub fn run(a: &Args) -> CmdResult {
    let size = a.size_mib << 20;
    let reps = a.reps.max(1);
    let work = WorkDir::create(&a.dir, "restore")?;
    let (full_dir, chain_dir) = (work.sub("full")?, work.sub("chain")?);
    make_stores(&full_dir, &chain_dir, size)?;
    let file = first_version(&full_dir)?;
    let mut buf = vec![0u8; 128 << 10];
    // Warm the page cache with every file read once.
    plain_read(&file, &mut buf)?;
    restore(&chain_dir, size)?;
    let backend = Engine::open(Config::new(&full_dir))?.backend();
    let (mut plain, mut into_memory, mut full, mut chain) = (vec![], vec![], vec![], vec![]);
    let data = std::fs::metadata(&file)?.len() as usize / PAGE * PAGE;
    let mut bytes = 0;
    let mut chain_info = None;
    for rep in 0..reps {
        // Alternate the order, so that none always runs first.
        let mut order = [0, 1, 2, 3];
        order.rotate_left(rep % 4);
        for what in order {
            match what {
                0 => {
                    let (d, n) = plain_read(&file, &mut buf)?;
                    plain.push(d);
                    bytes = n;
                }
                1 => full.push(restore(&full_dir, size)?.0),
                3 => into_memory.push(plain_read_into_memory(&file, data)?),
                _ => {
                    let (d, info) = restore(&chain_dir, size)?;
                    chain.push(d);
                    chain_info = Some(info);
                }
            }
        }
    }
    drop(work);
    let chain_info = chain_info.expect("reps >= 1");
    let ratio = |a: &[Duration], b: &[Duration]| paired_ratios(a, b).0;
    let speed = ratio(&plain, &full);
    let speed_memory = ratio(&into_memory, &full);
    let chain_ratio = ratio(&chain, &full);
    let list = |v: &[Duration]| v.iter().map(|d| ms(*d)).collect::<Vec<_>>();
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&with_run_header(json!({
                "backend": backend.as_str(), "size_mib": a.size_mib,
                "reps": reps, "file_bytes": bytes,
                "plain_read_ms": ms(median(plain.clone())), "restore_full_ms": ms(median(full.clone())),
                "restore_chain_ms": ms(median(chain.clone())), "chain_versions": chain_info.chain_len,
                "chain_pages_read": chain_info.pages,
                "plain_read_into_memory_ms": ms(median(into_memory.clone())),
                "restore_speed_over_plain_read": speed,
                "restore_speed_over_plain_read_into_memory": speed_memory,
                "chain_over_full": chain_ratio,
                "runs": {"plain_read_ms": list(&plain), "plain_read_into_memory_ms": list(&into_memory),
                         "restore_full_ms": list(&full),
                         "restore_chain_ms": list(&chain)},
            })))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "ickpt bench restore: {} MiB, warm page cache, {} backend, median of {reps}, on {}",
        a.size_mib,
        backend.as_str(),
        machine()
    );
    println!(
        "plain read of the full version ({bytes} bytes): {:.1} ms",
        ms(median(plain))
    );
    println!(
        "the same read into fresh memory: {:.1} ms",
        ms(median(into_memory))
    );
    println!(
        "restore, one full: {:.1} ms, speed {speed:.2} of the plain read, {speed_memory:.2} of the read into memory",
        ms(median(full)),
    );
    println!(
        "restore, full + {} increments: {:.1} ms, {:.2}x one full",
        chain_info.chain_len - 1,
        ms(median(chain)),
        chain_ratio
    );
    Ok(ExitCode::SUCCESS)
}
