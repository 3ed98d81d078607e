//! The configuration a program hands `ickpt_init`: `ickpt_config`, its constants, its
//! defaults, and how a struct of any version is read (docs/abi.md, rules 6 and 7).

use super::*;
use std::path::PathBuf;

/// Probe the kernel once and take the best backend it has (uffd-async, else mprotect).
pub const ICKPT_BACKEND_AUTO: u32 = 0;

/// mprotect + SIGSEGV: works everywhere; system calls writing into tracked memory fail
/// with EFAULT (see ickpt_prepare_write).
pub const ICKPT_BACKEND_MPROTECT: u32 = 1;

/// userfaultfd write-protect with a handler thread: system calls may write tracked memory.
pub const ICKPT_BACKEND_UFFD: u32 = 2;

/// userfaultfd async write-protect + PAGEMAP_SCAN (Linux 6.7+): the cheapest first write.
pub const ICKPT_BACKEND_UFFD_ASYNC: u32 = 3;

/// `ickpt_checkpoint` returns once the version is committed.
pub const ICKPT_MODE_SYNC: u32 = 0;

/// `ickpt_checkpoint` returns once the pages are scheduled; a committer thread writes them
/// while the application computes (`ickpt_wait` blocks until it is done).
pub const ICKPT_MODE_ASYNC: u32 = 1;

/// The committer takes pages in ascending address order.
pub const ICKPT_FLUSH_ADDRESS: u32 = 0;

/// The committer takes first the pages the last epoch's writes ran into (AI-Ckpt).
pub const ICKPT_FLUSH_ADAPTIVE: u32 = 1;

/// Every page traps on its first write in an epoch.
pub const ICKPT_GRANULARITY_PAGE: u32 = 0;

/// ACCK: pieces of a region whose start is being written stop trapping for the
/// rest of the epoch and are stored whole. No effect with the uffd-async backend.
pub const ICKPT_GRANULARITY_ADAPTIVE: u32 = 1;

/// Every `full_every`-th checkpoint is full.
pub const ICKPT_POLICY_FIXED: u32 = 0;

/// Full or incremental from measured commit times and sizes (the hybrid full/incremental
/// paper's S_n, docs/design.md).
pub const ICKPT_POLICY_COST: u32 = 1;

/// The library's default: async commits compressed at the fast level (off the application's
/// path), sync commits stored raw (docs/benchmarks.md, "Compression"); ICKPT_COMPRESS
/// overrides. All-zero pages are stored without data whatever the setting.
pub const ICKPT_COMPRESS_DEFAULT: u32 = 0;

/// Pages stored raw (all-zero pages are still stored without data).
pub const ICKPT_COMPRESS_OFF: u32 = 1;

/// zstd at a fast level (-1), sync and async commits alike.
pub const ICKPT_COMPRESS_FAST: u32 = 2;

/// zstd at a high level (9): smaller files, slower commits.
pub const ICKPT_COMPRESS_HIGH: u32 = 3;

/// zstd at `compress_level`.
pub const ICKPT_COMPRESS_LEVEL: u32 = 4;

/// No pre-copy: a checkpoint writes every page written since the last one (the default).
pub const ICKPT_PRECOPY_OFF: u32 = 0;

/// Every dirty page is written out as soon as it is seen between checkpoints (Kannan et al.).
pub const ICKPT_PRECOPY_BLIND: u32 = 1;

/// A dirty page is written out when its predicted next write falls after the next
/// checkpoint (PRWIP).
pub const ICKPT_PRECOPY_PRWIP: u32 = 2;

/// PRWIP, raising a page's predicted rewrite interval after two conflict-free rounds.
pub const ICKPT_PRECOPY_PRWIP_OPT: u32 = 3;

/// Configuration for `ickpt_init`. Initialise with `ickpt_config_init`, then change fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ickpt_config {
    /// sizeof(ickpt_config); set by ickpt_config_init. A program built against an older,
    /// shorter ickpt_config keeps working (the fields it lacks take their defaults), and one
    /// built against a newer one too while the fields this library lacks are 0 (docs/abi.md).
    pub struct_size: u32,
    /// ICKPT_BACKEND_*; the environment variable ICKPT_BACKEND overrides it.
    pub backend: u32,
    /// Every full_every-th checkpoint is full (default 10: 1 full, 9 incremental).
    pub full_every: u32,
    /// Full chains kept on disk (default 2).
    pub keep_chains: u32,
    /// Store directory; NULL means the environment variable ICKPT_DIR.
    pub dir: *const c_char,
    /// Emulated storage bandwidth in bytes per second for experiments; 0 means unlimited
    /// (the environment variable ICKPT_BANDWIDTH, e.g. "200M", sets it too).
    pub bandwidth: u64,
    /// ICKPT_MODE_SYNC (default) or ICKPT_MODE_ASYNC; ICKPT_MODE ("sync"/"async") overrides.
    pub mode: u32,
    /// ICKPT_FLUSH_ADAPTIVE (default) or ICKPT_FLUSH_ADDRESS; ICKPT_FLUSH_ORDER overrides.
    pub flush_order: u32,
    /// Bytes of copy-on-write buffer for pages written while their commit runs (default
    /// 16 MiB; 0: such writes wait for the committer; at most 1024 GiB). An async call may
    /// also copy written pages ahead of its commit, into up to 16 times as much memory of
    /// its own (at most 1 GiB), given back to the kernel after each commit. ICKPT_COW_BYTES
    /// overrides.
    pub cow_bytes: u64,
    /// ICKPT_GRANULARITY_PAGE (default) or ICKPT_GRANULARITY_ADAPTIVE; ICKPT_GRANULARITY
    /// ("page"/"adaptive") overrides.
    pub granularity: u32,
    /// Adaptive granularity cuts each region into 2^acck_pieces_log2 pieces (default 6, 1 to
    /// 16); ICKPT_ACCK_PIECES overrides.
    pub acck_pieces_log2: u32,
    /// Adaptive granularity turns released 2 MiB-aligned spans into huge pages (default 1);
    /// ICKPT_HUGE_PAGES ("0"/"1") overrides.
    pub huge_pages: u32,
    /// Bytes per second the drain to `shared_dir` may use (e.g. 100 << 20); 0 means
    /// unlimited (the environment variable ICKPT_DRAIN_BANDWIDTH, e.g. "100M", sets it when
    /// this is 0).
    pub drain_bandwidth: u64,
    /// A shared directory (a parallel file system path, one per store) every committed
    /// version is copied to in the background; a restart whose `dir` lost its versions
    /// (another node) restores from there. NULL means the environment variable
    /// ICKPT_SHARED_DIR, or none. See ickpt_wait_drained.
    pub shared_dir: *const c_char,
    /// The lowest tier, an S3-compatible bucket: "s3://bucket/prefix" (one prefix per
    /// store), drained to after shared_dir; endpoint and credentials from the AWS variables
    /// (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
    /// AWS_ALLOW_HTTP=true for plain HTTP). NULL means the environment variable
    /// ICKPT_OBJECT_URL, or none.
    pub object_url: *const c_char,
    /// With n > 0, only what a restore of the n newest versions needs is kept, within
    /// keep_chains too (0, the default: no such limit; ICKPT_KEEP_VERSIONS sets it when 0).
    pub keep_versions: u32,
    /// With s > 0, only what a restore of a version committed in the last s seconds needs is
    /// kept, within the other limits too; the newest version stays however old (0, the
    /// default: no such limit; ICKPT_KEEP_WITHIN, e.g. "7d", sets it when 0).
    pub keep_within_s: u32,
    /// ICKPT_POLICY_FIXED (default: every full_every-th checkpoint full) or ICKPT_POLICY_COST
    /// (full or incremental from measured costs); ICKPT_POLICY ("fixed"/"cost") overrides.
    pub policy: u32,
    /// Under the cost policy, how much a restart's reading of an increment counts against
    /// the checkpoint time it saves, in percent (default 100, the hybrid full/incremental
    /// paper's S_n; lower when failures are rare).
    pub restore_weight_pct: u32,
    /// ICKPT_COMPRESS_* (default ICKPT_COMPRESS_DEFAULT: async commits compressed, sync ones
    /// raw); ICKPT_COMPRESS ("auto", "off", "fast", "high" or a level) overrides. In async
    /// mode compression runs on the committer thread, off the application's path.
    pub compression: u32,
    /// The zstd level for ICKPT_COMPRESS_LEVEL, -7 to 19; must be 0 with any other setting
    /// (ICKPT_ERR_INVALID_ARGUMENT otherwise: it would be ignored).
    pub compress_level: i32,
    /// ICKPT_PRECOPY_* (default ICKPT_PRECOPY_OFF): write dirty pages out between
    /// checkpoints so a checkpoint has less left to write (PRWIP, docs/precopy.md);
    /// ICKPT_PRECOPY ("off", "blind", "prwip", "prwip-opt") overrides.
    pub precopy: u32,
    /// How often the program checkpoints, in milliseconds: pre-copy expects the next call
    /// this long after the last one began, or the mean of the gaps seen between the calls
    /// when that is longer; 0 (the default): the gaps alone, so the first epoch pre-copies
    /// nothing (ICKPT_CHECKPOINT_INTERVAL, e.g. "5s", sets it when 0).
    pub checkpoint_interval_ms: u32,
}

// The sizes docs/abi.md lists, which programs built against older headers pass as
// struct_size, and the layout fortran/ickpt.f90 mirrors: a field moved, retyped or put in
// padding fails the build here.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(offset_of!(ickpt_config, bandwidth) == 24);
    assert!(offset_of!(ickpt_config, drain_bandwidth) == 64);
    assert!(offset_of!(ickpt_config, object_url) == 80);
    assert!(offset_of!(ickpt_config, keep_versions) == 88);
    assert!(offset_of!(ickpt_config, policy) == 96);
    assert!(offset_of!(ickpt_config, compression) == 104);
    assert!(offset_of!(ickpt_config, precopy) == 112);
    assert!(size_of::<ickpt_config>() == 120);
};

/// Fill the `size` bytes at `cfg` with the defaults of the fields they hold, and set
/// `struct_size` to `size`: backend auto, full_every 10, keep_chains 2 (keep_versions and
/// keep_within_s 0: no such limits), policy fixed, restore_weight_pct 100, compression
/// ICKPT_COMPRESS_DEFAULT, dir NULL (then
/// `ICKPT_DIR` is used), bandwidth 0 (unlimited), mode sync, flush order adaptive, cow_bytes
/// 16 MiB, granularity page, acck_pieces_log2 6, huge_pages 1. Call it as
/// `ickpt_config_init(&cfg)`, the header's macro, which passes `sizeof cfg`: nothing past
/// the caller's struct is ever written, whichever `ickpt.h` the program was built with.
#[no_mangle]
pub extern "C" fn ickpt_config_init_sized(cfg: *mut ickpt_config, size: usize) -> ickpt_result {
    guard(|| {
        if cfg.is_null() {
            return Err(Error::Null { what: "cfg" });
        }
        check_config_size(size)?;
        // SAFETY: by contract `cfg` points to `size` writable bytes.
        unsafe {
            write_sized(&default_config(), cfg, size);
            std::ptr::addr_of_mut!((*cfg).struct_size).write(size as u32);
        }
        Ok(())
    })
}

/// The symbol programs built before `ickpt_config_init_sized` existed call: it writes the
/// 64-byte layout they were built with (the header now maps `ickpt_config_init` to the sized
/// call, so this size stays frozen whatever is appended to `ickpt_config`).
#[no_mangle]
pub extern "C" fn ickpt_config_init(cfg: *mut ickpt_config) -> ickpt_result {
    ickpt_config_init_sized(cfg, CONFIG_SIZE_OF_UNSIZED_INIT)
}

/// What `ickpt_config_init` (the unsized symbol) has always written.
pub(super) const CONFIG_SIZE_OF_UNSIZED_INIT: usize = 64;

pub(super) fn default_config() -> ickpt_config {
    let d = Config::new("");
    ickpt_config {
        struct_size: std::mem::size_of::<ickpt_config>() as u32,
        backend: ICKPT_BACKEND_AUTO,
        full_every: d.full_every,
        keep_chains: d.keep_chains,
        dir: std::ptr::null(),
        bandwidth: 0,
        mode: ICKPT_MODE_SYNC,
        flush_order: ICKPT_FLUSH_ADAPTIVE,
        cow_bytes: d.cow_bytes as u64,
        granularity: ICKPT_GRANULARITY_PAGE,
        acck_pieces_log2: d.acck_pieces_log2,
        huge_pages: d.huge_pages as u32,
        drain_bandwidth: 0,
        shared_dir: std::ptr::null(),
        object_url: std::ptr::null(),
        keep_versions: 0,
        keep_within_s: 0,
        policy: ICKPT_POLICY_FIXED,
        restore_weight_pct: (d.restore_weight * 100.0) as u32,
        compression: ICKPT_COMPRESS_DEFAULT,
        compress_level: 0,
        precopy: ICKPT_PRECOPY_OFF,
        checkpoint_interval_ms: 0,
    }
}

/// A field of `ickpt_config` with a value no constant of its type has.
pub(super) fn setting(field: &'static str, value: impl std::fmt::Display) -> Error {
    SettingError::new(
        field,
        value.to_string(),
        "one of the values ickpt.h defines for it",
    )
    .into()
}

/// The first layout of `ickpt_config` (ickpt 0.1.0) ended after `dir`.
pub(super) const FIRST_CONFIG_SIZE: usize = std::mem::offset_of!(ickpt_config, bandwidth);

/// Whether `size` can be the size of some version of `ickpt_config`.
pub(super) fn check_config_size(size: usize) -> Result<(), Error> {
    let refuse = |why: String| {
        Err(SettingError::new(
            "cfg->struct_size",
            size.to_string(),
            format!(
                "the size of an ickpt_config (this one is {why}); call ickpt_config_init first"
            ),
        )
        .into())
    };
    if size < FIRST_CONFIG_SIZE {
        return refuse(format!(
            "less than any ickpt_config ({FIRST_CONFIG_SIZE} bytes at the least)"
        ));
    }
    // Every version's size is a multiple of the alignment, so no field is ever cut in two.
    // (is_multiple_of is newer than the Rust 1.85 the workspace supports.)
    if size.next_multiple_of(std::mem::align_of::<ickpt_config>()) != size {
        return refuse("not the size of any ickpt_config".into());
    }
    // As Linux's openat2 and clone3 do: beyond a page it is garbage, not a newer struct,
    // and reading that far could fault.
    if size > 4096 {
        return refuse("larger than any ickpt_config can be (4096 bytes)".into());
    }
    Ok(())
}

/// Read the caller's `ickpt_config`, of whichever version its program was compiled with
/// (docs/abi.md, rule 7): the fields its `struct_size` covers, the defaults for the others.
/// Beyond the fields this library knows, the caller's bytes must be zero: a field set there
/// is one this library would silently ignore.
pub(super) fn read_config(cfg: *const ickpt_config) -> Result<ickpt_config, Error> {
    let known = std::mem::size_of::<ickpt_config>();
    // SAFETY: non-NULL and, by the API contract, an ickpt_config of some version: every
    // version starts with struct_size. No reference is made, as the caller's struct may be
    // shorter than this library's.
    let size = unsafe { std::ptr::addr_of!((*cfg).struct_size).read() } as usize;
    check_config_size(size)?;
    if size > known {
        // SAFETY: the caller's struct has `size` bytes, of which these are the last.
        let tail = unsafe { std::slice::from_raw_parts(cfg.cast::<u8>().add(known), size - known) };
        if let Some(at) = tail.iter().position(|&b| b != 0) {
            return Err(SettingError::new(
                "cfg->struct_size",
                size.to_string(),
                format!(
                    "at most {known}, or zero bytes past it: this libickpt ({}) knows only \
                     the first {known} bytes of ickpt_config, and byte {} is not zero, so the \
                     program sets a field this library does not have; run it with the \
                     libickpt it was built for",
                    env!("CARGO_PKG_VERSION"),
                    known + at
                ),
            )
            .into());
        }
    }
    let mut c = default_config();
    macro_rules! take {
        ($($field:ident),*) => {
            // Exhaustive: a field added to ickpt_config does not compile until listed here.
            let ickpt_config { struct_size: _, $($field: _),* } = c;
            $(
                if std::mem::offset_of!(ickpt_config, $field) + std::mem::size_of_val(&c.$field)
                    <= size
                {
                    // SAFETY: the field lies within the caller's `size` bytes.
                    c.$field = unsafe { std::ptr::addr_of!((*cfg).$field).read() };
                }
            )*
        };
    }
    take!(
        backend,
        full_every,
        keep_chains,
        dir,
        bandwidth,
        mode,
        flush_order,
        cow_bytes,
        granularity,
        acck_pieces_log2,
        huge_pages,
        drain_bandwidth,
        shared_dir,
        object_url,
        keep_versions,
        keep_within_s,
        policy,
        restore_weight_pct,
        compression,
        compress_level,
        precopy,
        checkpoint_interval_ms
    );
    Ok(c)
}

/// The settings `cfg` asks for (NULL: the defaults), each checked, with the store directory
/// `cfg->dir`, or `ICKPT_DIR` when that is NULL; before the `ICKPT_*` overrides, which
/// `Config::from_env` applies. What `ickpt_init` opens, and `ickpt_config_resolve` resolves.
pub(super) fn asked_config(cfg: *const ickpt_config) -> Result<Config, Error> {
    let (mut c, dir) = if cfg.is_null() {
        (Config::new(""), None)
    } else {
        to_config(&read_config(cfg)?)?
    };
    // ICKPT_DIR only when cfg->dir is NULL: a program that names its directory never
    // fails on a variable it does not use.
    let dir = match dir {
        Some(d) => Some(d),
        None => crate::config::env::dir()?,
    };
    c.dir = dir.filter(|d| !d.as_os_str().is_empty()).ok_or_else(|| {
        SettingError::new(
            "cfg->dir",
            "NULL",
            "a store directory: set cfg->dir or ICKPT_DIR",
        )
    })?;
    Ok(c)
}

/// A path field of `ickpt_config`: None for NULL, else its string, which must be UTF-8.
pub(super) fn c_path(
    field: &'static str,
    p: *const c_char,
) -> Result<Option<std::path::PathBuf>, Error> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, and the contract says a NUL-terminated string.
    let s = unsafe { CStr::from_ptr(p) };
    let s = s.to_str().map_err(|_| {
        SettingError::new(
            field,
            format!("{:?}", s.to_string_lossy()),
            "a path in UTF-8",
        )
    })?;
    Ok(Some(s.into()))
}

/// The settings `cfg` gives (read by [`read_config`], so every field is there), each checked:
/// a value no constant of its type has, a path not in UTF-8 or a field its setting would
/// ignore is an error naming the field. `cfg->dir` comes back apart, None for NULL (the
/// caller then takes `ICKPT_DIR`).
pub(super) fn to_config(cfg: &ickpt_config) -> Result<(Config, Option<PathBuf>), Error> {
    let mut c = Config::new("");
    c.backend = match cfg.backend {
        ICKPT_BACKEND_AUTO => Backend::Auto,
        ICKPT_BACKEND_MPROTECT => Backend::Mprotect,
        ICKPT_BACKEND_UFFD => Backend::Uffd,
        ICKPT_BACKEND_UFFD_ASYNC => Backend::UffdAsync,
        b => return Err(setting("cfg->backend", b)),
    };
    c.full_every = cfg.full_every;
    c.keep_chains = cfg.keep_chains;
    c.bandwidth = (cfg.bandwidth != 0).then_some(cfg.bandwidth);
    c.mode = match cfg.mode {
        ICKPT_MODE_SYNC => CommitMode::Sync,
        ICKPT_MODE_ASYNC => CommitMode::Async,
        m => return Err(setting("cfg->mode", m)),
    };
    c.flush_order = match cfg.flush_order {
        ICKPT_FLUSH_ADDRESS => FlushOrder::Address,
        ICKPT_FLUSH_ADAPTIVE => FlushOrder::Adaptive,
        o => return Err(setting("cfg->flush_order", o)),
    };
    c.granularity = match cfg.granularity {
        ICKPT_GRANULARITY_PAGE => Granularity::Page,
        ICKPT_GRANULARITY_ADAPTIVE => Granularity::Adaptive,
        g => return Err(setting("cfg->granularity", g)),
    };
    c.acck_pieces_log2 = cfg.acck_pieces_log2;
    c.huge_pages = match cfg.huge_pages {
        0 => false,
        1 => true,
        h => return Err(setting("cfg->huge_pages", h)),
    };
    c.cow_bytes =
        usize::try_from(cfg.cow_bytes).map_err(|_| setting("cfg->cow_bytes", cfg.cow_bytes))?;
    let dir = c_path("cfg->dir", cfg.dir)?;
    c.shared_dir = c_path("cfg->shared_dir", cfg.shared_dir)?;
    c.object_url = c_path("cfg->object_url", cfg.object_url)?
        // c_path has checked the bytes are UTF-8.
        .and_then(|p| p.into_os_string().into_string().ok());
    c.drain_bandwidth = (cfg.drain_bandwidth != 0).then_some(cfg.drain_bandwidth);
    c.keep_versions = cfg.keep_versions;
    c.policy = match cfg.policy {
        ICKPT_POLICY_FIXED => crate::policy::KindPolicy::Fixed,
        ICKPT_POLICY_COST => crate::policy::KindPolicy::Cost,
        p => return Err(setting("cfg->policy", p)),
    };
    c.restore_weight = f64::from(cfg.restore_weight_pct) / 100.0;
    c.compression = match cfg.compression {
        ICKPT_COMPRESS_DEFAULT => c.compression,
        ICKPT_COMPRESS_OFF => crate::Compression::Off,
        ICKPT_COMPRESS_FAST => crate::Compression::FAST,
        ICKPT_COMPRESS_HIGH => crate::Compression::HIGH,
        ICKPT_COMPRESS_LEVEL if crate::Compression::LEVELS.contains(&cfg.compress_level) => {
            crate::Compression::Zstd(cfg.compress_level)
        }
        ICKPT_COMPRESS_LEVEL => {
            return Err(SettingError::new(
                "cfg->compress_level",
                cfg.compress_level.to_string(),
                "a zstd level from -7 to 19",
            )
            .into())
        }
        x => return Err(setting("cfg->compression", x)),
    };
    // A level with any other setting would be ignored: the program meant something
    // else than it gets.
    if cfg.compression != ICKPT_COMPRESS_LEVEL && cfg.compress_level != 0 {
        return Err(SettingError::new(
            "cfg->compress_level",
            cfg.compress_level.to_string(),
            "0 unless cfg->compression is ICKPT_COMPRESS_LEVEL, the one setting that \
                 uses it (set that to compress at this level)",
        )
        .into());
    }
    c.precopy = crate::policy::prwip::Strategy::from_code(cfg.precopy)
        .ok_or_else(|| setting("cfg->precopy", cfg.precopy))?;
    c.checkpoint_interval = (cfg.checkpoint_interval_ms != 0)
        .then(|| std::time::Duration::from_millis(cfg.checkpoint_interval_ms.into()));
    c.keep_within =
        (cfg.keep_within_s != 0).then(|| std::time::Duration::from_secs(cfg.keep_within_s.into()));
    Ok((c, dir))
}
