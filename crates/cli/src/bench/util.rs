//! Small helpers shared by the benchmarks.

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{RngCore, SeedableRng};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const PAGE: usize = 4096;

/// A directory a benchmark makes for itself inside the `--dir` it was given, and the only
/// thing it ever removes: `--dir` may be the user's own directory, full of their files
/// (outside testing lost a directory this way).
pub struct WorkDir(PathBuf);

impl WorkDir {
    /// A new, empty `PARENT/ickpt-bench-LABEL-PID-N` (PARENT is created if missing; never
    /// an existing directory: `create_dir` fails on one, and the next N is tried).
    pub fn create(parent: &Path, label: &str) -> std::io::Result<WorkDir> {
        if parent.exists() && !parent.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                format!(
                    "{} is not a directory: --dir names a directory, in which the benchmark \
                     makes one of its own",
                    parent.display()
                ),
            ));
        }
        std::fs::create_dir_all(parent).map_err(|e| named(parent, e))?;
        for n in 0.. {
            let d = parent.join(format!("ickpt-bench-{label}-{}-{n}", std::process::id()));
            match private_dir(&d) {
                Ok(()) => return Ok(WorkDir(d)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(named(&d, e)),
            }
        }
        unreachable!("an unbounded range")
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A new, empty subdirectory of this one.
    pub fn sub(&self, name: &str) -> std::io::Result<PathBuf> {
        let d = self.0.join(name);
        private_dir(&d).map_err(|e| named(&d, e))?;
        Ok(d)
    }
}

/// Owner-only whatever the umask: the stores made inside must pass the writer's check that
/// group and others cannot write the directory (a umask of 000 made every benchmark fail).
fn private_dir(d: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new().mode(0o700).create(d)?;
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))
}

/// The error with the path it is about ("File exists (os error 17)" named nothing).
pub fn named(path: &Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The ratios `a[i] / b[i]` of paired times: (median, lowest, highest).
pub fn paired_ratios(a: &[Duration], b: &[Duration]) -> (f64, f64, f64) {
    let mut r: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
        .collect();
    r.sort_by(f64::total_cmp);
    (r[r.len() / 2], r[0], r[r.len() - 1])
}

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// `n` distinct page numbers below `pages`, in random order.
pub fn random_pages(pages: usize, n: usize, seed: u64) -> Vec<usize> {
    let mut all: Vec<usize> = (0..pages).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    all.shuffle(&mut rng);
    all.truncate(n);
    all
}

/// Write one byte into each listed page of `base`, returning the elapsed time.
///
/// # Safety
/// `base` must point to at least `(max page + 1) * PAGE` writable bytes.
pub unsafe fn touch_pages(base: *mut u8, pages: &[usize], value: u8) -> Duration {
    let t = Instant::now();
    for &p in pages {
        // SAFETY: the caller guarantees every listed page lies within the buffer.
        unsafe { std::ptr::write_volatile(base.add(p * PAGE + 64), value) };
    }
    t.elapsed()
}

/// Bytes per `write(2)` of the plain baselines, and the step of their early writeback (the
/// store's `WRITEBACK_BYTES`).
pub const CHUNK: usize = 8 << 20;

/// The baseline a checkpoint is compared with: write `bytes` sequentially to the new file
/// `path`, taken from `src` (from its start again when `bytes` is longer), and fsync it and its
/// directory (the same durability a committed version gets). With `writeback`, the device is
/// asked to start writing every `CHUNK` appended (sync_file_range, as the store does), so the
/// final fsync finds most bytes already on their way.
///
/// The file is kept, as a store keeps its versions: a baseline that removed its file drew its
/// page cache from pages just freed, while the store takes fresh ones for every version. On a
/// VM that hands freed memory back to the host (free page reporting), fresh pages cost a host
/// fault each, and only one side paid it.
pub fn plain_write(path: &Path, bytes: u64, src: &[u8], writeback: bool) -> io::Result<Duration> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let t = Instant::now();
    write_file(path, bytes, src, writeback)?;
    File::open(dir)?.sync_all()?;
    Ok(t.elapsed())
}

/// What the guest kernel's free page reporting (virtio balloon) has handed back to the host so
/// far, in KiB, and its order: memory freed in blocks of that order goes back to the host, and
/// the next use of such a page pays a host fault. `None` where the kernel has no such files.
pub fn page_reporting() -> Option<(u64, u64)> {
    let read = |name: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/sys/module/page_reporting/parameters/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    Some((read("reported_kib")?, read("page_reporting_order")?))
}

/// Create `path` with `bytes` bytes taken from `src` (cycling), `CHUNK` per write, and fsync it.
pub fn write_file(path: &Path, bytes: u64, src: &[u8], writeback: bool) -> io::Result<()> {
    let mut f = File::create(path).map_err(|e| named(path, e))?;
    let (mut done, mut at) = (0u64, 0usize);
    while done < bytes {
        if at == src.len() {
            at = 0;
        }
        let n = ((bytes - done) as usize).min(CHUNK).min(src.len() - at);
        f.write_all(&src[at..at + n])?;
        if writeback {
            start_writeback(&f, done, n as u64);
        }
        done += n as u64;
        at += n;
    }
    f.sync_all()
}

/// The store's own hint (`ickpt::sys::fs::start_writeback`); a refusal is ignored, as the
/// store does.
fn start_writeback(f: &File, offset: u64, len: u64) {
    let _ = ickpt::sys::fs::start_writeback(f, offset, len);
}

/// The baseline a restore is compared with: read all of `path` sequentially, `CHUNK` bytes per
/// `read(2)`, into a new buffer (untouched until the read faults it in, like the memory a
/// restore fills). Returns the time and the bytes read.
pub fn plain_read(path: &Path) -> io::Result<(Duration, u64)> {
    let mut f = File::open(path)?;
    let len = f.metadata()?.len() as usize;
    // calloc-backed: fresh zero pages, faulted in by the read as a restore faults in its own.
    let mut buf = vec![0u8; len];
    let t = Instant::now();
    for chunk in buf.chunks_mut(CHUNK) {
        f.read_exact(chunk)?;
    }
    let d = t.elapsed();
    std::hint::black_box(&buf);
    Ok((d, len as u64))
}

/// Drop `path` (a file, or every file below a directory) from the page cache, so the next read
/// comes from the device: fsync each file (dirty pages cannot be dropped), then
/// posix_fadvise(POSIX_FADV_DONTNEED). Needs no privilege, unlike drop_caches.
pub fn drop_cached(path: &Path) -> io::Result<()> {
    if path.is_dir() {
        for e in std::fs::read_dir(path).map_err(|e| named(path, e))? {
            drop_cached(&e?.path())?;
        }
        return Ok(());
    }
    let f = File::open(path).map_err(|e| named(path, e))?;
    f.sync_all()?;
    // SAFETY: a plain system call on an open descriptor; no memory is passed.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(named(path, io::Error::from_raw_os_error(rc)));
    }
    Ok(())
}

/// Bytes in the regular files below `dir`.
pub fn bytes_below(dir: &Path) -> io::Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let m = e.metadata()?;
        n += if m.is_dir() {
            bytes_below(&e.path())?
        } else {
            m.len()
        };
    }
    Ok(n)
}

/// Fill each listed page of `base` with fresh random bytes (incompressible, never equal to
/// another page's). Untimed: the data a benchmark's checkpoints write.
///
/// # Safety
/// `base` must point to at least `(max page + 1) * PAGE` writable bytes.
pub unsafe fn fill_random(base: *mut u8, pages: &[usize], seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    for &p in pages {
        // SAFETY: the caller guarantees every listed page lies within the buffer, and nothing
        // else refers to it while the slice lives.
        let page = unsafe { std::slice::from_raw_parts_mut(base.add(p * PAGE), PAGE) };
        rng.fill_bytes(page);
    }
}

/// Flush unrelated dirty data before a timed operation, so each fsync measured flushes only
/// its own bytes (without this, the first fsync of a run paid for earlier writes: 5x noise).
pub fn settle() {
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
}

/// The CPU's model name, from /proc/cpuinfo.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown cpu".into())
}

/// The running kernel's release.
pub fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// One line describing the machine, for the record.
pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{}, {cores} cores, Linux {}", cpu_model(), kernel())
}

/// The commit of the source tree this binary was built in (`git describe --always --dirty` in
/// the directory of the executable, which `cargo build` puts under the tree's target/);
/// "unknown" for a binary outside a repository (never the current directory's commit, which
/// need not be the one built).
pub fn git_commit() -> String {
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    let Some(dir) = exe_dir else {
        return "unknown".into();
    };
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(&dir)
        .args(["describe", "--always", "--dirty", "--abbrev=40"])
        .stderr(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => "unknown".into(),
    }
}

/// What every benchmark's JSON records about its run, merged into `out` (an object): the
/// machine, the commit, the backend asked for, and every `ICKPT_*` variable set (test
/// switches and overrides alike change what is measured), so two runs of one binary can be
/// told apart from the file.
pub fn with_run_header(mut out: serde_json::Value) -> serde_json::Value {
    let ickpt: serde_json::Map<String, serde_json::Value> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v)))
        .filter(|(k, _)| k.starts_with("ICKPT_"))
        .map(|(k, v)| (k, v.to_string_lossy().into_owned().into()))
        .collect();
    let backend = ickpt.get("ICKPT_BACKEND").cloned();
    let header = serde_json::json!({
        "machine": machine(), "cpu": cpu_model(), "kernel": kernel(),
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "git_commit": git_commit(),
        "backend_requested": backend.unwrap_or_else(|| "auto".into()),
        "environment": ickpt,
    });
    if let (Some(o), serde_json::Value::Object(h)) = (out.as_object_mut(), header) {
        o.extend(h);
    }
    out
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The newest version of `store` read back by the reverse scan into `size` bytes of fresh
/// memory (faulted in as a restore's are), the catalog's reading of metadata included; the
/// time, and the chain's length.
pub fn restore_newest(
    store: &dyn ickpt::store::Store,
    size: usize,
) -> Result<(Duration, usize), Box<dyn std::error::Error>> {
    let mem = ickpt::sys::mem::map_anonymous(size)?;
    let t = Instant::now();
    let catalog = ickpt::read::catalog::Catalog::new(store)?;
    let newest = *catalog.versions()?.last().ok_or("no version")?;
    let chain = catalog.chain(newest)?;
    // SAFETY: `size` bytes mapped just above, unmapped below; nothing else refers to them.
    let dst = unsafe { std::slice::from_raw_parts_mut(mem, size) };
    let r = ickpt::read::reverse_scan::reverse_scan::<ickpt::ReadError>(
        &catalog,
        &chain,
        &|_| true,
        ickpt::read::reverse_scan::Sink::Memory(vec![Some(dst)]),
        &mut |_, _| {},
    );
    let d = t.elapsed();
    // SAFETY: mapped above, no longer used.
    unsafe { ickpt::sys::mem::unmap(mem, size)? };
    r?;
    Ok((d, chain.len()))
}

/// Write `report` as `dir/STEM.json`, and `csv` as `dir/STEM.csv` when given; nothing without
/// a `dir` (`--out` not given).
pub fn save(
    dir: Option<&Path>,
    stem: &str,
    report: &serde_json::Value,
    csv: Option<String>,
) -> io::Result<()> {
    let Some(dir) = dir else { return Ok(()) };
    std::fs::create_dir_all(dir).map_err(|e| named(dir, e))?;
    std::fs::write(
        dir.join(format!("{stem}.json")),
        serde_json::to_string_pretty(report)?,
    )?;
    if let Some(csv) = csv {
        std::fs::write(dir.join(format!("{stem}.csv")), csv)?;
    }
    Ok(())
}

/// The arguments the policy, restart-tiers, compress and drain benchmarks share, flattened
/// into each one's own.
#[derive(clap::Args)]
pub struct RunArgs {
    /// Where to work: the benchmark makes its own directory in it and removes only that.
    #[arg(long, default_value = "build/bench")]
    pub dir: PathBuf,
    /// Also write the benchmark's files here: NAME.json, and NAME.csv where it has a table
    /// (NAME is the benchmark's: drain, compress, policy, restart-tiers).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Set from the global `--json`.
    #[arg(skip)]
    pub json: bool,
}

/// The version files of `dir`, in name order.
pub fn version_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ickpt"))
        .collect();
    v.sort();
    Ok(v)
}
