//! Compression figures: zstd's ratio and speed at several levels on two corpora (the demo's
//! heat grid, read from a store `heat` wrote, and random bytes), through the very encoder a
//! commit uses (`FrameEncoder`, 256 KiB batches, zero pages left out); and what compression
//! does to a sync full checkpoint of each corpus against writing it raw, paired per
//! repetition in an order that rotates.

use super::util::{median, ms, paired_ratios, settle, with_run_header, RunArgs, WorkDir};
use crate::CmdResult;
use ickpt::format::{
    crc, NewVersion, PageView, ReadAt, RegionEntry, VersionLayout, FORMAT_VERSION,
};
use ickpt::{Compression, Config, Engine};
use rand::{RngCore, SeedableRng};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const PS: usize = 4096;
/// A commit's batch (engine/sink.rs).
const BATCH: usize = 256 << 10;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub(super) run: RunArgs,
    /// A store whose newest version holds the heat grid as region 1 (`scripts/bench-compress.sh`
    /// makes one with demo/heat.c); without it only random bytes are measured.
    #[arg(long)]
    grid_store: Option<PathBuf>,
    /// MiB of random bytes.
    #[arg(long, default_value_t = 64)]
    random_mib: usize,
    /// zstd levels whose ratio and speed are measured, besides off.
    #[arg(long, default_value = "-7,-3,-1,1,3,9", allow_hyphen_values = true)]
    levels: String,
    /// Repetitions; each figure is a median, each ratio the median of per-repetition ratios.
    #[arg(long, default_value_t = 5)]
    reps: usize,
}

/// The settings a sync checkpoint is measured with, the baseline (off) first.
const COMMIT_SETTINGS: [(&str, Compression); 4] = [
    ("off", Compression::Off),
    ("fast", Compression::FAST),
    ("zstd 1", Compression::Zstd(1)),
    ("zstd 3", Compression::Zstd(3)),
];

pub fn run(a: &Args) -> CmdResult {
    let levels: Vec<Option<i32>> = std::iter::once(Ok(None))
        .chain(a.levels.split(',').map(|l| l.trim().parse().map(Some)))
        .collect::<Result<_, _>>()
        .map_err(|_| format!("--levels {}: expected levels such as -3,1,3", a.levels))?;
    let reps = a.reps.max(1);
    let work = WorkDir::create(&a.run.dir, "compress")?;
    let started = Instant::now();
    let mut corpora = Vec::new();
    if let Some(store) = &a.grid_store {
        corpora.push(("heat grid", grid(store)?));
    }
    corpora.push(("random", random(a.random_mib << 20)));
    let mut out = Vec::new();
    for (name, data) in &corpora {
        eprintln!("bench compress: {name}, {} MiB", data.len() >> 20);
        let codec: Vec<Value> = levels
            .iter()
            .map(|&l| codec_figures(data, l, reps))
            .collect::<Result<_, _>>()?;
        let commits = commit_figures(&work, data, reps)?;
        out.push(json!({"corpus": name, "bytes": data.len(), "codec": codec, "sync_checkpoint": commits}));
    }
    let backend = Engine::open(Config::new(work.sub("probe")?))?.backend();
    drop(work);
    let report = with_run_header(json!({
        "benchmark": "compress", "backend": backend.as_str(), "reps": reps,
        "format_version": FORMAT_VERSION, "batch_bytes": BATCH,
        "default": "auto: sync commits off, async commits fast",
        "seconds": started.elapsed().as_secs_f64(),
        "corpora": out,
    }));
    super::util::save(
        a.run.out.as_deref(),
        "compress",
        &report,
        Some(csv(&report)),
    )?;
    if a.run.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", table(&report));
    }
    Ok(ExitCode::SUCCESS)
}

/// The newest version's region 1 of `store`, read back as a restore reads it.
fn grid(store: &Path) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let store = ickpt::store::DirStore::open_read(store)?;
    let catalog = ickpt::read::catalog::Catalog::new(&store)?;
    let newest = *catalog
        .versions()?
        .last()
        .ok_or("the grid store has no version")?;
    let chain = catalog.chain(newest)?;
    let meta = &chain[0].meta;
    let (index, region) = meta
        .region_by_id(1)
        .ok_or("no region 1 in the grid store")?;
    let mut data = vec![0u8; region.length as usize];
    let mut slots: Vec<Option<&mut [u8]>> = meta.regions.iter().map(|_| None).collect();
    slots[index] = Some(&mut data[..]);
    ickpt::read::reverse_scan::reverse_scan::<ickpt::ReadError>(
        &catalog,
        &chain,
        &|r| r.id == 1,
        ickpt::read::reverse_scan::Sink::Memory(slots),
        &mut |_, _| {},
    )?;
    // Whole pages, as a checkpoint stores them.
    data.truncate(data.len() / PS * PS);
    Ok(data)
}

fn random(len: usize) -> Vec<u8> {
    let mut data = vec![0u8; len / PS * PS];
    rand::rngs::SmallRng::seed_from_u64(7).fill_bytes(&mut data);
    data
}

/// Encode `data` batch by batch at `level` (the copy into the batch untimed), then read it
/// back through `PageView`: ratio, and each direction's MB/s, medians of `reps`.
fn codec_figures(
    data: &[u8],
    level: Option<i32>,
    reps: usize,
) -> Result<Value, Box<dyn std::error::Error>> {
    // The encoder a commit uses.
    let mut enc = ickpt::frame_encoder(level, PS)?;
    let regions = vec![RegionEntry {
        id: 1,
        born: 1,
        length: data.len() as u64,
        page_offset: 0,
    }];
    let (mut enc_t, mut dec_t, mut stored) = (Vec::new(), Vec::new(), 0u64);
    let mut batch = vec![0u8; BATCH];
    for _ in 0..reps {
        let mut layout = VersionLayout::new(new_version(), regions.clone());
        let mut file = layout.prefix();
        let mut took = Duration::ZERO;
        for (b, chunk) in data.chunks(BATCH).enumerate() {
            batch[..chunk.len()].copy_from_slice(chunk);
            let t = Instant::now();
            let crcs: Vec<u32> = chunk.chunks(PS).map(crc).collect();
            for (i, c) in crcs.iter().enumerate() {
                layout.push_page(0, (b * BATCH / PS + i) as u64, *c);
            }
            let n = enc.encode(&mut batch, chunk.len(), PS, &crcs, |f| layout.push_frame(f));
            took += t.elapsed();
            file.extend_from_slice(&batch[..n]);
        }
        file.extend_from_slice(&layout.trailer());
        enc_t.push(took);
        let meta = ickpt::format::read_meta(&file, file.len() as u64)?;
        stored = meta.stored_bytes();
        let view = PageView::new(&meta, &file);
        let mut back = vec![0u8; data.len()];
        let t = Instant::now();
        for (k, chunk) in back.chunks_mut(2 << 20).enumerate() {
            view.read_exact_at(chunk, meta.header.data_offset + (k * (2 << 20)) as u64)?;
        }
        dec_t.push(t.elapsed());
        if back != data {
            return Err("pages read back differ from the pages encoded".into());
        }
    }
    let mbs = |d: Duration| data.len() as f64 / d.as_secs_f64() / 1e6;
    Ok(json!({
        "level": level.map_or("off".to_string(), |l| l.to_string()),
        "stored_bytes": stored,
        "ratio": data.len() as f64 / stored.max(1) as f64,
        "encode_mb_s": mbs(median(enc_t)), "decode_mb_s": mbs(median(dec_t)),
    }))
}

fn new_version() -> NewVersion {
    NewVersion {
        kind: ickpt::format::Kind::Full,
        page_size: PS as u32,
        version: 1,
        parent: 0,
        chain_depth: 0,
        parent_meta_crc: 0,
        store_id: [1; 16],
        created_unix_ns: 0,
        tag: 0,
    }
}

/// A sync full checkpoint of `data` with each of `COMMIT_SETTINGS`, a fresh store each,
/// `reps` times in an order that rotates: median time, file bytes, and the paired ratio to
/// off.
fn commit_figures(
    work: &WorkDir,
    data: &[u8],
    reps: usize,
) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    let n = COMMIT_SETTINGS.len();
    let mut times = vec![Vec::new(); n];
    let mut bytes = vec![0u64; n];
    for rep in 0..reps {
        for k in 0..n {
            let i = (rep + k) % n;
            let dir = work.sub(&format!("commit-{i}-{rep}"))?;
            let mut c = Config::new(&dir);
            c.compression = COMMIT_SETTINGS[i].1;
            let e = Engine::open(c)?;
            let m = e.alloc(1, data.len())?;
            // SAFETY: alloc returned data.len() bytes, live while `e` lives.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), m, data.len()) };
            settle();
            let t = Instant::now();
            let info = e.checkpoint()?;
            times[i].push(t.elapsed());
            bytes[i] = info.bytes;
            drop(e);
            std::fs::remove_dir_all(&dir)?;
        }
    }
    Ok((0..n)
        .map(|i| {
            let (r, lo, hi) = paired_ratios(&times[i], &times[0]);
            json!({
                "setting": COMMIT_SETTINGS[i].0, "median_ms": ms(median(times[i].clone())),
                "file_bytes": bytes[i], "ratio_to_off": r, "ratio_low": lo, "ratio_high": hi,
                "runs_ms": times[i].iter().map(|d| ms(*d)).collect::<Vec<_>>(),
            })
        })
        .collect())
}

fn csv(r: &Value) -> String {
    let mut out =
        String::from("corpus,what,setting,ratio_or_ms,encode_mb_s,decode_mb_s,ratio_to_off\n");
    for c in r["corpora"].as_array().into_iter().flatten() {
        for l in c["codec"].as_array().into_iter().flatten() {
            out += &format!(
                "{},codec,{},{:.3},{:.0},{:.0},\n",
                c["corpus"].as_str().unwrap_or(""),
                l["level"].as_str().unwrap_or(""),
                l["ratio"].as_f64().unwrap_or(0.0),
                l["encode_mb_s"].as_f64().unwrap_or(0.0),
                l["decode_mb_s"].as_f64().unwrap_or(0.0),
            );
        }
        for s in c["sync_checkpoint"].as_array().into_iter().flatten() {
            out += &format!(
                "{},sync_checkpoint,{},{:.1},,,{:.3}\n",
                c["corpus"].as_str().unwrap_or(""),
                s["setting"].as_str().unwrap_or(""),
                s["median_ms"].as_f64().unwrap_or(0.0),
                s["ratio_to_off"].as_f64().unwrap_or(0.0),
            );
        }
    }
    out
}

fn table(r: &Value) -> String {
    let mut out = String::new();
    for c in r["corpora"].as_array().into_iter().flatten() {
        out += &format!(
            "{} ({} MiB)\n",
            c["corpus"].as_str().unwrap_or(""),
            c["bytes"].as_u64().unwrap_or(0) >> 20
        );
        out += "  level   ratio   encode MB/s   decode MB/s\n";
        for l in c["codec"].as_array().into_iter().flatten() {
            out += &format!(
                "  {:>5} {:>7.2} {:>13.0} {:>13.0}\n",
                l["level"].as_str().unwrap_or(""),
                l["ratio"].as_f64().unwrap_or(0.0),
                l["encode_mb_s"].as_f64().unwrap_or(0.0),
                l["decode_mb_s"].as_f64().unwrap_or(0.0),
            );
        }
        out += "  sync full checkpoint   median ms   file MiB   x off (pairs)\n";
        for s in c["sync_checkpoint"].as_array().into_iter().flatten() {
            out += &format!(
                "  {:<20} {:>11.1} {:>10.1}   {:.2} ({:.2}-{:.2})\n",
                s["setting"].as_str().unwrap_or(""),
                s["median_ms"].as_f64().unwrap_or(0.0),
                s["file_bytes"].as_f64().unwrap_or(0.0) / (1 << 20) as f64,
                s["ratio_to_off"].as_f64().unwrap_or(0.0),
                s["ratio_low"].as_f64().unwrap_or(0.0),
                s["ratio_high"].as_f64().unwrap_or(0.0),
            );
        }
    }
    out
}
