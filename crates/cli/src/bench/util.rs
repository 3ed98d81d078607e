//! Small helpers shared by the benchmarks.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::fs::File;
use std::io::Write;
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

/// The baseline a checkpoint is compared with: write `bytes` sequentially to a new file in
/// `dir`, fsync it and its directory (the same durability a committed version gets).
pub fn plain_write(dir: &Path, bytes: u64, buf: &[u8]) -> std::io::Result<Duration> {
    let path = dir.join("baseline.bin");
    let t = Instant::now();
    let mut f = File::create(&path)?;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        f.write_all(&buf[..n])?;
        left -= n as u64;
    }
    f.sync_all()?;
    File::open(dir)?.sync_all()?;
    let d = t.elapsed();
    std::fs::remove_file(&path)?;
    Ok(d)
}

/// Flush unrelated dirty data before a timed operation, so each fsync measured flushes only
/// its own bytes (without this, the first fsync of a run paid for earlier writes: 5x noise).
pub fn settle() {
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
}

/// One line describing the machine, for the record.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown cpu".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {cores} cores, Linux {kernel}")
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
