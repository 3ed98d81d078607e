//! How an engine is set up: [`Config`], its defaults, and the environment's say over it.

mod compression;
pub(crate) mod env;

pub use compression::Compression;

#[cfg(feature = "testing")]
use crate::store::Fault;
use crate::track::{Backend, Granularity};
use env::{Overrides, TestSwitches};
use ickpt_format::{CommitMode, FlushOrder};
use std::path::PathBuf;
use thiserror::Error;

/// A setting (a configuration field, or an `ICKPT_*` variable) with a value ickpt cannot use.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("{name}={value}: expected {expected}")]
pub struct SettingError {
    /// The field or variable.
    pub name: String,
    /// The value given, as the user wrote it (quoted when it was text).
    pub value: String,
    /// What it accepts.
    pub expected: String,
}

impl SettingError {
    pub fn new(
        name: impl Into<String>,
        value: impl Into<String>,
        expected: impl Into<String>,
    ) -> SettingError {
        SettingError {
            name: name.into(),
            value: value.into(),
            expected: expected.into(),
        }
    }
}

/// How an engine is set up. `Config::new(dir)` gives the defaults.
#[derive(Debug, Clone)]
pub struct Config {
    pub dir: PathBuf,
    pub backend: Backend,
    /// Every `full_every`-th checkpoint is full; 10 means 1 full : 9 incremental, the hybrid
    /// full/incremental paper's optimum. Used by the fixed policy only.
    pub full_every: u32,
    /// Fixed (every `full_every`-th full) or cost (full or incremental from measured commit
    /// times and sizes, the hybrid full/incremental paper's S_n: `policy::cost_kind`).
    /// `ICKPT_POLICY` overrides.
    pub policy: crate::policy::KindPolicy,
    /// How much a restart's reading of an increment counts against the checkpoint time it
    /// saves, under the cost policy: 1.0 (the paper's S_n) weighs them alike; lower when
    /// failures are rare. At least 0.
    pub restore_weight: f64,
    /// Whatever the policy chose, a version is full when, as an increment, it would make a
    /// restart read more than this many times the bytes of its chain's full version
    /// (`policy::bounded_kind`): 1.5 caps a restart near one and a half full restores. 0: no
    /// bound (the library's default; `ickpt run`'s is 1.5). `ICKPT_RESTART_BOUND` overrides.
    pub restart_bound: f64,
    /// Full chains kept on disk; older ones are deleted when a new full version commits.
    pub keep_chains: u32,
    /// With n > 0, only what a restore of the n newest versions needs is kept (within
    /// `keep_chains` too); 0: no such limit. `ICKPT_KEEP_VERSIONS` sets it when the program
    /// does not.
    pub keep_versions: u32,
    /// Only what a restore of a version committed within this long needs is kept (within
    /// the other limits too); None: no such limit. `ICKPT_KEEP_WITHIN` (e.g. `12h`) sets it
    /// when the program does not. The newest version is kept however old.
    pub keep_within: Option<std::time::Duration>,
    /// Emulate storage of this many bytes per second (experiments; `ICKPT_BANDWIDTH` sets
    /// it too, e.g. `200M`). None: as fast as the directory's device.
    pub bandwidth: Option<u64>,
    /// Inject a store fault into the first checkpoint (tests; `ICKPT_FAULT` sets it too,
    /// for `Engine::open`, which makes the store it can put the fault in).
    #[cfg(feature = "testing")]
    pub fault: Option<Fault>,
    /// Sync: `checkpoint` returns once the version is committed. Async: it returns once the
    /// pages are scheduled, and a committer thread writes them while the application runs
    /// (AI-Ckpt). `ICKPT_MODE` overrides.
    pub mode: CommitMode,
    /// Copy-on-write buffer for pages written while their commit is running; 0 makes every
    /// such write wait for the committer. An async call may also copy written pages ahead
    /// of its commit into up to 16 times as much memory (at most 1 GiB), given back to the
    /// kernel after each commit. `ICKPT_COW_BYTES` overrides.
    pub cow_bytes: usize,
    /// Order the committer takes pages in. `ICKPT_FLUSH_ORDER` overrides.
    pub flush_order: FlushOrder,
    /// A write fault opens up to this many pages at once (an aligned block), those the last
    /// epoch wrote, so one trap serves a block when an iterative code rewrites it; 1 traps
    /// every page (AI-Ckpt). `ICKPT_FAULT_AROUND` overrides.
    pub fault_around: usize,
    /// Page: every page traps on its first write. Adaptive: ACCK stops trapping
    /// in the rest of a piece whose start is being written. `ICKPT_GRANULARITY` overrides.
    /// No effect with the uffd-async backend, whose first writes never reach ickpt (except in
    /// regions that fell back to page protection).
    pub granularity: Granularity,
    /// ACCK cuts each region into 2^acck_pieces_log2 pieces (at least a page each).
    /// `ICKPT_ACCK_PIECES` overrides.
    pub acck_pieces_log2: u32,
    /// ACCK makes released 2 MiB-aligned spans huge pages. `ICKPT_HUGE_PAGES` overrides.
    pub huge_pages: bool,
    /// A second tier (the hybrid full/incremental paper's shared storage: a parallel file
    /// system path): a drain thread copies every committed version there in the background,
    /// and a restart whose `dir` lost them (another node) reads them from there.
    /// `ICKPT_SHARED_DIR` sets it when the program does not.
    pub shared_dir: Option<PathBuf>,
    /// The drain's bytes per second, so it leaves the application's network and file system
    /// alone; None or 0: unlimited. `ICKPT_DRAIN_BANDWIDTH` (e.g. `100M`) sets it when the
    /// program does not.
    pub drain_bandwidth: Option<u64>,
    /// The lowest tier, an S3-compatible bucket (`s3://bucket/prefix`, one prefix per store):
    /// drained to after `shared_dir`, restored from when both faster tiers lost a version.
    /// Endpoint and credentials from the AWS variables (`AWS_ENDPOINT_URL`,
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`; `AWS_ALLOW_HTTP=true` for
    /// plain HTTP). `ICKPT_OBJECT_URL` sets it when the program does not.
    pub object_url: Option<String>,
    /// Another process drains the first tier to tiers this engine does not open (`ickpt
    /// run`'s supervisor, to the bucket: the program may hold no socket) and records how far
    /// it got in the store (`engine/outside_drain.rs`); collection keeps what it has not
    /// copied yet. `ICKPT_DRAINED_ELSEWHERE=1` sets it.
    pub drained_elsewhere: bool,
    /// How pages are stored (format 6): zstd at a level, or raw; zero pages are left out
    /// either way. Compression runs on the committer, so in async mode off the
    /// application's path. The default, `Auto`, compresses async commits only.
    /// `ICKPT_COMPRESS` (`auto`, `off`, `fast`, `high`, a level) overrides.
    pub compression: Compression,
    /// Write dirty pages out between checkpoints, so a checkpoint has less left to write
    /// (PRWIP): `Off` (the default), `Blind` (every dirty page as it is seen), `Prwip`
    /// (a page whose predicted next write falls after the next checkpoint), `PrwipOpt`.
    /// `ICKPT_PRECOPY` (`off`, `blind`, `prwip`, `prwip-opt`) overrides.
    pub precopy: crate::policy::prwip::Strategy,
    /// How often the application checkpoints: pre-copy expects the next call this long
    /// after the last one began, or the mean of the gaps seen between calls when that is
    /// longer (a program asked for 5 s calls 5 s after the last call *returned*, at its
    /// next step). None: the gaps alone; the first epoch pre-copies nothing.
    /// `ICKPT_CHECKPOINT_INTERVAL` (e.g. `5s`, `500ms`) sets it when the program does not.
    pub checkpoint_interval: Option<std::time::Duration>,
    /// What pre-copy keeps a page's rewrite intervals per (PRWIP's execution context):
    /// `Function` (the default), the function that wrote the page where the backend reports
    /// the writing instruction (mprotect), the region elsewhere; `Region`, the region on
    /// every backend. `ICKPT_PRECOPY_CONTEXT` (`function`, `region`) overrides.
    pub precopy_context: crate::policy::prwip::Context,
    /// Every other thread of the process is stopped while a checkpoint collects (`ickpt
    /// run` stops the program's threads first): an async commit then fences only the pages
    /// it collected ([`crate::track::Guard::FenceWritten`]). Wrong for a program that calls
    /// the API while other threads run: their writes between the scan and the fence would
    /// reach the version.
    #[doc(hidden)]
    pub others_stopped: bool,
    /// Pre-copy passes run on a thread of ickpt's (true, the default), or only when
    /// `Engine::precopy_pass` is called (tests that count what one pass did).
    #[doc(hidden)]
    pub precopy_thread: bool,
}

/// The largest copy-on-write buffer ickpt accepts.
pub(crate) const MAX_COW_BYTES: u64 = 1 << 40;

impl Config {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Config {
            dir: dir.into(),
            backend: Backend::Auto,
            full_every: 10,
            policy: crate::policy::KindPolicy::Fixed,
            restore_weight: 1.0,
            restart_bound: 0.0,
            keep_chains: 2,
            keep_versions: 0,
            keep_within: None,
            bandwidth: None,
            #[cfg(feature = "testing")]
            fault: None,
            mode: CommitMode::Sync,
            cow_bytes: 16 << 20,
            flush_order: FlushOrder::Adaptive,
            fault_around: 1,
            granularity: Granularity::Page,
            acck_pieces_log2: 6,
            huge_pages: true,
            shared_dir: None,
            drain_bandwidth: None,
            object_url: None,
            drained_elsewhere: false,
            compression: Compression::Auto,
            precopy: crate::policy::prwip::Strategy::Off,
            checkpoint_interval: None,
            precopy_context: crate::policy::prwip::Context::Function,
            others_stopped: false,
            precopy_thread: true,
        }
    }

    /// The configuration an engine runs with: `asked` as the environment changes it (the
    /// `ICKPT_*` settings override their fields; `config/env.rs` reads every variable), and
    /// the test switches beside it. Every field is then checked, so an engine never starts
    /// on a value it cannot use.
    pub(crate) fn from_env(asked: Config) -> Result<(Config, TestSwitches), SettingError> {
        let mut c = asked;
        let o = Overrides::read()?;
        if let Some(b) = env::backend()? {
            c.backend = b;
        }
        c.mode = o.mode.unwrap_or(c.mode);
        c.compression = o.compression.unwrap_or(c.compression);
        c.policy = o.policy.unwrap_or(c.policy);
        c.restart_bound = o.restart_bound.unwrap_or(c.restart_bound);
        c.cow_bytes = o.cow_bytes.unwrap_or(c.cow_bytes);
        c.fault_around = o.fault_around.unwrap_or(c.fault_around);
        c.granularity = o.granularity.unwrap_or(c.granularity);
        c.acck_pieces_log2 = o.acck_pieces_log2.unwrap_or(c.acck_pieces_log2);
        c.huge_pages = o.huge_pages.unwrap_or(c.huge_pages);
        c.flush_order = o.flush_order.unwrap_or(c.flush_order);
        // A program's own bandwidth wins over the variable.
        c.bandwidth = c.bandwidth.or(o.bandwidth);
        c.shared_dir = c.shared_dir.or(o.shared_dir);
        c.drain_bandwidth = c.drain_bandwidth.or(o.drain_bandwidth);
        c.object_url = c.object_url.or(o.object_url);
        c.drained_elsewhere |= o.drained_elsewhere.unwrap_or(false);
        if c.keep_versions == 0 {
            c.keep_versions = o.keep_versions.unwrap_or(0);
        }
        c.keep_within = c.keep_within.or(o.keep_within);
        c.precopy = o.precopy.unwrap_or(c.precopy);
        c.checkpoint_interval = c.checkpoint_interval.or(o.checkpoint_interval);
        c.precopy_context = o.precopy_context.unwrap_or(c.precopy_context);
        let test = TestSwitches::read()?;
        c.check()?;
        Ok((c, test))
    }

    /// This configuration as an engine opened with it would run: the `ICKPT_*` settings
    /// applied and every field checked (what another process acting on the same store, such
    /// as `ickpt run`'s supervisor, must agree with).
    pub fn with_env(self) -> Result<Config, SettingError> {
        Self::from_env(self).map(|(c, _)| c)
    }

    /// What garbage collection keeps, from the three `keep_*` fields.
    pub fn retention(&self) -> crate::policy::Retention {
        crate::policy::Retention {
            chains: self.keep_chains,
            versions: (self.keep_versions > 0).then_some(self.keep_versions),
            within: self.keep_within,
        }
    }

    /// Every field within what the engine can use.
    pub(crate) fn check(&self) -> Result<(), SettingError> {
        if self.precopy != crate::policy::prwip::Strategy::Off
            && self.granularity == Granularity::Adaptive
        {
            // ACCK stops trapping in whole pieces; pre-copy re-arms single pages.
            return Err(SettingError::new(
                "precopy",
                self.precopy.as_str(),
                "off while granularity is adaptive (ACCK): the two cannot be combined yet",
            ));
        }
        if !(1..=16).contains(&self.acck_pieces_log2) {
            return Err(SettingError::new(
                "acck_pieces_log2",
                self.acck_pieces_log2.to_string(),
                "1 to 16",
            ));
        }
        for (name, v) in [
            ("full_every", self.full_every),
            ("keep_chains", self.keep_chains),
        ] {
            if v == 0 {
                return Err(SettingError::new(name, "0", "at least 1"));
            }
        }
        if let Compression::Zstd(l) = self.compression {
            if !Compression::LEVELS.contains(&l) {
                return Err(SettingError::new(
                    "compression",
                    l.to_string(),
                    Compression::EXPECTED,
                ));
            }
        }
        if !(self.restore_weight >= 0.0 && self.restore_weight.is_finite()) {
            return Err(SettingError::new(
                "restore_weight",
                self.restore_weight.to_string(),
                "a number 0 or above",
            ));
        }
        if !crate::policy::valid_bound(self.restart_bound) {
            return Err(SettingError::new(
                "restart_bound",
                self.restart_bound.to_string(),
                crate::policy::BOUND_EXPECTED,
            ));
        }
        if self.shared_dir.as_ref() == Some(&self.dir) {
            return Err(SettingError::new(
                "shared_dir",
                self.dir.display().to_string(),
                "a directory other than the store's own",
            ));
        }
        if let Some(url) = &self.object_url {
            #[cfg(feature = "s3")]
            crate::store::parse_object_url(url)
                .map_err(|want| SettingError::new("object_url", url.clone(), want))?;
            #[cfg(not(feature = "s3"))]
            return Err(SettingError::new(
                "object_url",
                url.clone(),
                "none: this libickpt was built without its s3 feature",
            ));
        }
        // Sized into slots before anything is mapped: a value near 2^64 would overflow that
        // sum rather than fail to map with a message naming the setting.
        if self.cow_bytes as u64 > MAX_COW_BYTES {
            return Err(SettingError::new(
                "cow_bytes",
                self.cow_bytes.to_string(),
                "at most 1024G",
            ));
        }
        Ok(())
    }
}
