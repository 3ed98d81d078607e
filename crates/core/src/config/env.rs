//! Every `ICKPT_*` environment variable ickpt reads, and the only code that reads one: each
//! variable's name, what it accepts and its check are written once, here. A variable that is
//! set but malformed is an error naming it, never ignored. `docs/abi.md` lists them.
//!
//! Two kinds: settings a user may give instead of `ickpt_config` fields (`ICKPT_MODE` …),
//! and switches that exist for tests ([`TestSwitches`]: fault injection, forced fallbacks,
//! the rename method), kept apart so that no code path other than tests depends on them.

use super::SettingError;
use crate::store::{parse_size, RenameMode};
#[cfg(feature = "testing")]
use crate::store::{Fault, FaultTarget};
use crate::sys::uffd::Hidden;
use crate::track::{Backend, Granularity, UffdSpin};
use ickpt_format::{CommitMode, FlushOrder};
use std::path::PathBuf;

/// Read `name`: None when unset; its text, or an error when it is not Unicode.
fn var(name: &'static str) -> Result<Option<String>, SettingError> {
    match std::env::var(name) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(SettingError::new(
            name,
            format!("{:?}", v.to_string_lossy()),
            "text (the value is not valid UTF-8)",
        )),
    }
}

/// Read and parse `name`; `expected` says what it accepts.
fn parsed<T>(
    name: &'static str,
    expected: &'static str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<Option<T>, SettingError> {
    match var(name)? {
        None => Ok(None),
        Some(v) => parse(&v)
            .map(Some)
            .ok_or_else(|| SettingError::new(name, format!("{v:?}"), expected)),
    }
}

/// A duration as people write it: `90s`, `30min`, `12h`, `7d`, `1h 30m` (humantime's syntax).
pub(crate) fn parse_duration(v: &str) -> Option<std::time::Duration> {
    humantime::parse_duration(v).ok()
}

/// `0` or `1`.
fn zero_one(v: &str) -> Option<bool> {
    match v {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// A switch: unset or `0` is off, `1` is on.
fn switch(name: &'static str) -> Result<bool, SettingError> {
    Ok(parsed(name, "0 or 1", zero_one)?.unwrap_or(false))
}

/// The settings that override `Config` fields (see `Config::from_env`).
#[derive(Debug, Default)]
pub(crate) struct Overrides {
    pub mode: Option<CommitMode>,
    pub compression: Option<super::Compression>,
    pub policy: Option<crate::policy::KindPolicy>,
    pub restart_bound: Option<f64>,
    pub cow_bytes: Option<usize>,
    pub fault_around: Option<usize>,
    pub granularity: Option<Granularity>,
    pub acck_pieces_log2: Option<u32>,
    pub huge_pages: Option<bool>,
    pub flush_order: Option<FlushOrder>,
    pub bandwidth: Option<u64>,
    pub shared_dir: Option<PathBuf>,
    pub drain_bandwidth: Option<u64>,
    pub object_url: Option<String>,
    pub drained_elsewhere: Option<bool>,
    pub keep_versions: Option<u32>,
    pub keep_within: Option<std::time::Duration>,
    pub precopy: Option<crate::policy::prwip::Strategy>,
    pub checkpoint_interval: Option<std::time::Duration>,
    pub precopy_context: Option<crate::policy::prwip::Context>,
}

impl Overrides {
    pub fn read() -> Result<Overrides, SettingError> {
        Ok(Overrides {
            mode: parsed("ICKPT_MODE", "sync or async", CommitMode::parse)?,
            compression: parsed(
                "ICKPT_COMPRESS",
                super::Compression::EXPECTED,
                super::Compression::parse,
            )?,
            policy: parsed(
                "ICKPT_POLICY",
                "fixed or cost",
                crate::policy::KindPolicy::parse,
            )?,
            restart_bound: parsed("ICKPT_RESTART_BOUND", crate::policy::BOUND_EXPECTED, |v| {
                v.parse::<f64>()
                    .ok()
                    .filter(|&b| crate::policy::valid_bound(b))
            })?,
            cow_bytes: parsed(
                "ICKPT_COW_BYTES",
                "a size such as 16M or 0, at most 1024G",
                |v| {
                    parse_size(v)
                        .filter(|&b| b <= super::MAX_COW_BYTES)
                        .and_then(|b| usize::try_from(b).ok())
                },
            )?,
            fault_around: parsed("ICKPT_FAULT_AROUND", "a page count from 1 to 4096", |v| {
                v.parse().ok().filter(|n| (1..=4096).contains(n))
            })?,
            granularity: parsed("ICKPT_GRANULARITY", "page or adaptive", Granularity::parse)?,
            acck_pieces_log2: parsed("ICKPT_ACCK_PIECES", "log2 of pieces, 1 to 16", |v| {
                v.parse().ok().filter(|n| (1..=16).contains(n))
            })?,
            huge_pages: parsed("ICKPT_HUGE_PAGES", "0 or 1", zero_one)?,
            flush_order: parsed(
                "ICKPT_FLUSH_ORDER",
                "address or adaptive",
                FlushOrder::parse,
            )?,
            bandwidth: parsed(
                "ICKPT_BANDWIDTH",
                "bytes per second, e.g. 200M (0: unlimited)",
                parse_size,
            )?,
            shared_dir: var("ICKPT_SHARED_DIR")?
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
            drain_bandwidth: parsed(
                "ICKPT_DRAIN_BANDWIDTH",
                "bytes per second, e.g. 100M (0: unlimited)",
                parse_size,
            )?,
            object_url: var("ICKPT_OBJECT_URL")?.filter(|u| !u.is_empty()),
            drained_elsewhere: parsed("ICKPT_DRAINED_ELSEWHERE", "0 or 1", zero_one)?,
            keep_versions: parsed(
                "ICKPT_KEEP_VERSIONS",
                "a count of versions (0: no limit)",
                |v| v.parse().ok(),
            )?,
            keep_within: parsed(
                "ICKPT_KEEP_WITHIN",
                "a duration such as 12h, 7d or 90min",
                parse_duration,
            )?,
            precopy: parsed(
                "ICKPT_PRECOPY",
                "off, blind, prwip or prwip-opt",
                crate::policy::prwip::Strategy::parse,
            )?,
            checkpoint_interval: parsed(
                "ICKPT_CHECKPOINT_INTERVAL",
                "a duration such as 5s or 500ms, more than 0",
                |v| parse_duration(v).filter(|d| !d.is_zero()),
            )?,
            precopy_context: parsed(
                "ICKPT_PRECOPY_CONTEXT",
                "function or region",
                crate::policy::prwip::Context::parse,
            )?,
        })
    }
}

/// `ICKPT_BACKEND`: the tracking backend, overriding what the program asked for (so tests
/// can run every program on every backend).
pub(crate) fn backend() -> Result<Option<Backend>, SettingError> {
    parsed(
        "ICKPT_BACKEND",
        "auto, mprotect, uffd or uffd-async",
        Backend::parse,
    )
}

/// `ICKPT_UFFD_SPIN`: never | commit | burst (default) | always.
fn uffd_spin() -> Result<UffdSpin, SettingError> {
    Ok(parsed(
        "ICKPT_UFFD_SPIN",
        "never, commit, burst or always",
        |v| match v {
            "never" | "0" => Some(UffdSpin::Never),
            "commit" => Some(UffdSpin::Commit),
            "burst" => Some(UffdSpin::Burst),
            "always" => Some(UffdSpin::Always),
            _ => None,
        },
    )?
    .unwrap_or(UffdSpin::Burst))
}

/// `ICKPT_DIR`: the store directory when the C API's `cfg->dir` is NULL.
pub(crate) fn dir() -> Result<Option<PathBuf>, SettingError> {
    Ok(var("ICKPT_DIR")?
        .filter(|d| !d.is_empty())
        .map(PathBuf::from))
}

/// Switches for tests only: they inject faults or hide what the kernel offers, so that
/// tests reach paths this machine would otherwise never take. Those that inject faults or
/// discard versions exist only in builds with the `testing` feature; the others force a
/// kernel feature's fallback, and ship.
#[derive(Debug, Clone)]
pub(crate) struct TestSwitches {
    /// `ICKPT_FAULT`: a store fault in the first checkpoint, or with `record:` in front, in
    /// the first global-commit record (the flag).
    #[cfg(feature = "testing")]
    pub fault: Option<(Fault, FaultTarget)>,
    /// `ICKPT_RENAME`: how versions get their final names (auto probes the file system).
    pub rename: RenameMode,
    /// `ICKPT_UFFD_SPIN`: when the uffd backend's handler thread polls.
    pub uffd_spin: UffdSpin,
    /// `ICKPT_NO_UFFD`, `ICKPT_NO_PAGEMAP_SCAN`: kernel features hidden from the probe.
    pub hide: Hidden,
    /// `ICKPT_DISCARD_WRITES`: versions are written nowhere, so a run measures tracking,
    /// prediction and copying without the I/O (PRWIP's Fig. 11; measurements only).
    #[cfg(feature = "testing")]
    pub discard_writes: bool,
}

impl TestSwitches {
    pub fn read() -> Result<TestSwitches, SettingError> {
        Ok(TestSwitches {
            #[cfg(feature = "testing")]
            fault: parsed(
                "ICKPT_FAULT",
                "enospc@BYTES, eio@BYTES, eio-once@BYTES, crash@BYTES or commit-eio, optionally after \
                 record: (fault injection for tests; unset it otherwise)",
                |s| match s.strip_prefix("record:") {
                    Some(rest) => Fault::parse(rest).map(|f| (f, FaultTarget::Record)),
                    None => Fault::parse(s).map(|f| (f, FaultTarget::Any)),
                },
            )?,
            rename: rename()?,
            uffd_spin: uffd_spin()?,
            hide: hidden_features()?,
            #[cfg(feature = "testing")]
            discard_writes: switch("ICKPT_DISCARD_WRITES")?,
        })
    }
}

/// `ICKPT_RENAME`: how versions get their final names (`auto` when unset).
pub(crate) fn rename() -> Result<RenameMode, SettingError> {
    Ok(parsed(
        crate::store::RENAME_VAR,
        "auto, noreplace, link or rename",
        RenameMode::parse,
    )?
    .unwrap_or(RenameMode::Auto))
}

/// `ICKPT_NO_UFFD` and `ICKPT_NO_PAGEMAP_SCAN`: hide userfaultfd, or PAGEMAP_SCAN, from
/// the kernel probe, forcing each fallback on any kernel (tests; `ickpt probe` shows them).
pub(crate) fn hidden_features() -> Result<Hidden, SettingError> {
    Ok(Hidden {
        uffd: switch("ICKPT_NO_UFFD")?,
        scan: switch("ICKPT_NO_PAGEMAP_SCAN")?,
    })
}
