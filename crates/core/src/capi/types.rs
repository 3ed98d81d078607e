//! Types and constants of the C ABI, laid out as `include/ickpt.h` declares them.

use crate::engine::{CheckpointInfo, Stats};
use crate::error::{
    CheckpointError, DrainError, Error, FileError, GcError, GlobalError, InitError, InjectError,
    MergeFilesError, ProtectError, ReadError, RegionError, RestoreError, SectionError,
};
use crate::store::dir::OpenError;
use crate::track::{RangeProblem, TrackError};
use ickpt_format::{CommitMode, Kind};
use std::ffi::{c_char, CStr};

/// Result of every ickpt call. 0 is success; `ickpt_last_error()` explains a failure.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ickpt_result {
    ICKPT_OK = 0,
    /// A NULL pointer, zero length, bad configuration or unknown pointer.
    ICKPT_ERR_INVALID_ARGUMENT = 1,
    ICKPT_ERR_NOT_INITIALIZED = 2,
    ICKPT_ERR_ALREADY_INITIALIZED = 3,
    /// No protected region has that id.
    ICKPT_ERR_UNKNOWN_REGION = 4,
    /// A region with that id is already protected, or the memory overlaps one.
    ICKPT_ERR_REGION_EXISTS = 5,
    /// Protected regions and the version's regions differ (missing id or size mismatch).
    ICKPT_ERR_REGION_MISMATCH = 6,
    /// No such version, or no version at all.
    ICKPT_ERR_NOT_FOUND = 7,
    /// A checkpoint file failed its checks, or a chain is broken.
    ICKPT_ERR_CORRUPT = 8,
    ICKPT_ERR_IO = 9,
    /// The store's device is full. Earlier versions are intact.
    ICKPT_ERR_NO_SPACE = 10,
    /// The directory holds something other than an ickpt store.
    ICKPT_ERR_NOT_A_STORE = 11,
    /// Another process holds the store.
    ICKPT_ERR_STORE_LOCKED = 12,
    /// Write tracking failed (protection change, signal handler replaced).
    ICKPT_ERR_TRACKING = 13,
    /// A bug in ickpt; the message says where.
    ICKPT_ERR_INTERNAL = 14,
    /// ickpt_mpi: the ranks are not all in the same collective call, or an MPI call failed.
    /// The serial library never returns it.
    ICKPT_ERR_COLLECTIVE = 15,
    /// A section call out of order: a start inside a section, a save or stop outside one, a
    /// save in a section replayed while recovering, a reset after the first start; or a
    /// restore while a section is open.
    ICKPT_ERR_SECTION = 16,
}

/// Probe the kernel once and take the best backend it has (uffd-async, else mprotect).
pub const ICKPT_BACKEND_AUTO: u32 = 0;
/// mprotect + SIGSEGV: works everywhere; system calls writing into tracked memory fail
/// with EFAULT (see ickpt_prepare_write).
pub const ICKPT_BACKEND_MPROTECT: u32 = 1;
/// userfaultfd write-protect with a handler thread: system calls may write tracked memory.
pub const ICKPT_BACKEND_UFFD: u32 = 2;
/// userfaultfd async write-protect + PAGEMAP_SCAN (Linux 6.7+): the cheapest first write.
pub const ICKPT_BACKEND_UFFD_ASYNC: u32 = 3;

pub const ICKPT_KIND_FULL: u32 = 0;
pub const ICKPT_KIND_INCREMENTAL: u32 = 1;

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
/// ACCK (paper 001): pieces of a region whose start is being written stop trapping for the
/// rest of the epoch and are stored whole. No effect with the uffd-async backend.
pub const ICKPT_GRANULARITY_ADAPTIVE: u32 = 1;

/// Every `full_every`-th checkpoint is full.
pub const ICKPT_POLICY_FIXED: u32 = 0;
/// Full or incremental from measured commit times and sizes (paper 002's S_n, docs/design.md).
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
/// checkpoint (paper 004, PRWIP).
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
    /// 16 MiB; 0: such writes wait for the committer; at most 1024 GiB). ICKPT_COW_BYTES
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
    /// the checkpoint time it saves, in percent (default 100, paper 002's S_n; lower when
    /// failures are rare).
    pub restore_weight_pct: u32,
    /// ICKPT_COMPRESS_* (default ICKPT_COMPRESS_DEFAULT: async commits compressed, sync ones
    /// raw); ICKPT_COMPRESS ("auto", "off", "fast", "high" or a level) overrides. In async
    /// mode compression runs on the committer thread, off the application's path.
    pub compression: u32,
    /// The zstd level for ICKPT_COMPRESS_LEVEL, -7 to 19; must be 0 with any other setting
    /// (ICKPT_ERR_INVALID_ARGUMENT otherwise: it would be ignored).
    pub compress_level: i32,
    /// ICKPT_PRECOPY_* (default ICKPT_PRECOPY_OFF): write dirty pages out between
    /// checkpoints so a checkpoint has less left to write (paper 004, docs/precopy.md);
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

/// What a checkpoint wrote. From `ickpt_checkpoint` in async mode it describes the version
/// just scheduled (`bytes` and the commit fields are 0 until `ickpt_wait` reports it).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ickpt_checkpoint_info {
    pub version: u64,
    /// The version this one increments; 0 for a full version.
    pub parent: u64,
    /// ICKPT_KIND_FULL or ICKPT_KIND_INCREMENTAL.
    pub kind: u32,
    /// ICKPT_MODE_* the version was committed in.
    pub mode: u32,
    /// Pages stored in this version (async, from ickpt_checkpoint: pages scheduled).
    pub pages: u64,
    /// Size of the version file in bytes.
    pub bytes: u64,
    /// Time spent in the call that returned this.
    pub duration_ns: u64,
    /// From the request until the last page was handed to the store.
    pub commit_ns: u64,
    /// Time application threads spent blocked waiting for this commit's pages.
    pub wait_ns: u64,
    /// First writes during the commit that copied the page aside (COW), waited for the
    /// committer (WAIT), or found the page already taken (AVOIDED).
    pub cow_pages: u64,
    pub wait_pages: u64,
    pub avoided_pages: u64,
    /// First writes after the previous commit had finished (its AFTER count).
    pub after_previous: u64,
    /// Most copy-on-write buffer bytes in use at once during the commit.
    pub peak_cow_bytes: u64,
}

/// Where the time of a checkpoint went, in nanoseconds (from `ickpt_get_phases`). Fields
/// are only ever appended: the call writes as many bytes as the caller's struct has.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ickpt_phases {
    /// The version these phases are of.
    pub version: u64,
    /// Times the version was scheduled: 1, or 2 when a sync commit that ran without a fence
    /// (uffd-async) met a write and was taken again with fences.
    pub attempts: u64,
    /// Taking the written pages and write-protecting them again (and raising the fence, for
    /// a fenced commit), with application threads held.
    pub collect_ns: u64,
    /// Copying pages out of application memory or copy-on-write slots.
    pub copy_ns: u64,
    /// Checksumming them.
    pub crc_ns: u64,
    /// Lifting fences, or checking that no write reached a page collected without one.
    pub release_ns: u64,
    /// Inside the store's write calls.
    pub write_ns: u64,
    /// Making the version durable and visible: fsync, rename, directory fsync.
    pub commit_ns: u64,
    /// Garbage collection after a full version.
    pub gc_ns: u64,
}

impl From<&CheckpointInfo> for ickpt_phases {
    fn from(i: &CheckpointInfo) -> Self {
        let ns = |d: std::time::Duration| d.as_nanos() as u64;
        let p = &i.phases;
        ickpt_phases {
            version: i.version,
            attempts: i.commit.phases.attempts.into(),
            collect_ns: ns(p.collect),
            copy_ns: ns(p.copy),
            crc_ns: ns(p.crc),
            release_ns: ns(p.release),
            write_ns: ns(p.write),
            commit_ns: ns(p.commit),
            gc_ns: ns(p.gc),
        }
    }
}

/// Totals since `ickpt_init`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ickpt_stats {
    /// ICKPT_BACKEND_* in use.
    pub backend: u32,
    pub regions: u32,
    pub protected_bytes: u64,
    pub checkpoints: u64,
    pub full_checkpoints: u64,
    pub incremental_checkpoints: u64,
    pub failed_checkpoints: u64,
    pub pages_written: u64,
    pub bytes_written: u64,
    pub checkpoint_ns: u64,
    /// First writes trapped.
    pub faults: u64,
    pub restores: u64,
    pub pages_restored: u64,
    pub restore_ns: u64,
    /// First writes that met a running commit: copied aside, waited, or already taken;
    /// and first writes outside any commit.
    pub cow_pages: u64,
    pub wait_pages: u64,
    pub avoided_pages: u64,
    pub after_pages: u64,
    /// Time application threads spent waiting for the committer.
    pub wait_ns: u64,
    /// Time ickpt spent handling first writes (kernel trap entry and exit not included).
    pub monitor_ns: u64,
    /// Pages adaptive granularity stored whole without a trap each (written or not).
    pub acck_released_pages: u64,
    /// 2 MiB spans adaptive granularity turned into huge pages.
    pub acck_huge_spans: u64,
    /// Regions the backend tracks by page protection because userfaultfd refused their
    /// memory type.
    pub regions_by_protection: u32,
}

impl From<&CheckpointInfo> for ickpt_checkpoint_info {
    fn from(i: &CheckpointInfo) -> Self {
        ickpt_checkpoint_info {
            version: i.version,
            parent: i.parent,
            kind: kind_code(i.kind),
            mode: match i.commit.mode {
                CommitMode::Sync => ICKPT_MODE_SYNC,
                CommitMode::Async => ICKPT_MODE_ASYNC,
            },
            pages: i.pages,
            bytes: i.bytes,
            duration_ns: i.duration.as_nanos() as u64,
            commit_ns: i.commit.commit_ns,
            wait_ns: i.commit.wait_ns,
            cow_pages: i.commit.cow_pages,
            wait_pages: i.commit.wait_pages,
            avoided_pages: i.commit.avoided_pages,
            after_previous: i.commit.after_previous,
            peak_cow_bytes: i.commit.peak_cow_bytes,
        }
    }
}

impl From<&Stats> for ickpt_stats {
    fn from(s: &Stats) -> Self {
        ickpt_stats {
            backend: match s.backend {
                "mprotect" => ICKPT_BACKEND_MPROTECT,
                "uffd" => ICKPT_BACKEND_UFFD,
                "uffd-async" => ICKPT_BACKEND_UFFD_ASYNC,
                _ => ICKPT_BACKEND_AUTO,
            },
            regions: s.regions as u32,
            protected_bytes: s.protected_bytes,
            checkpoints: s.checkpoints,
            full_checkpoints: s.full_checkpoints,
            incremental_checkpoints: s.incremental_checkpoints,
            failed_checkpoints: s.failed_checkpoints,
            pages_written: s.pages_written,
            bytes_written: s.bytes_written,
            checkpoint_ns: s.checkpoint_time.as_nanos() as u64,
            faults: s.faults,
            restores: s.restores,
            pages_restored: s.pages_restored,
            restore_ns: s.restore_time.as_nanos() as u64,
            cow_pages: s.cow_pages,
            wait_pages: s.wait_pages,
            avoided_pages: s.avoided_pages,
            after_pages: s.after_pages,
            wait_ns: s.wait_time.as_nanos() as u64,
            monitor_ns: s.monitor_time.as_nanos() as u64,
            acck_released_pages: s.acck_released_pages,
            acck_huge_spans: s.acck_huge_spans,
            regions_by_protection: s.regions_by_protection as u32,
        }
    }
}

fn kind_code(k: Kind) -> u32 {
    match k {
        Kind::Full => ICKPT_KIND_FULL,
        Kind::Incremental => ICKPT_KIND_INCREMENTAL,
    }
}

/// The result code for an error: the one place errors meet the C API's codes. An
/// operation's error is mapped by its own function below, the shared parts (a file, a
/// region, the tracker) by theirs.
pub fn code_of(e: &Error) -> ickpt_result {
    use ickpt_result::*;
    match e {
        Error::Init(e) => init_code(e),
        Error::Protect(e) => protect_code(e),
        Error::Checkpoint(e) => checkpoint_code(e),
        Error::Restore(e) => restore_code(e),
        Error::Read(e) => read_code(e),
        Error::Global(e) => global_code(e),
        Error::Drain(e) => drain_code(e),
        Error::Inject(e) => inject_code(e),
        Error::Section(e) => section_code(e),
        Error::Merge(e) => match e {
            MergeFilesError::Read(e) => inject_code(e),
            MergeFilesError::Layout { .. } => ickpt_result::ICKPT_ERR_REGION_MISMATCH,
            MergeFilesError::TooLarge { .. } => ickpt_result::ICKPT_ERR_INVALID_ARGUMENT,
            MergeFilesError::Write(e) => file_code(e),
        },
        Error::Setting(_) | Error::Null { .. } => ICKPT_ERR_INVALID_ARGUMENT,
        Error::NotInitialized | Error::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
        Error::AlreadyInitialized => ICKPT_ERR_ALREADY_INITIALIZED,
    }
}

fn init_code(e: &InitError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        InitError::Setting(_) => ICKPT_ERR_INVALID_ARGUMENT,
        InitError::Store(e) => open_code(e),
        InitError::File(e) => file_code(e),
        InitError::Read(e) => read_code(e),
        InitError::Tracking(e) => track_code(e),
        InitError::Tier(e) => drain_code(e),
    }
}

fn drain_code(e: &DrainError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        DrainError::File { source, .. } => file_code(source),
        DrainError::Collect { source, .. } => match &**source {
            GcError::Read(e) => read_code(e),
            GcError::File(e) => file_code(e),
            GcError::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
        },
        // A directory holding another store's versions, as with the store's own.
        DrainError::Foreign { .. } => ICKPT_ERR_NOT_A_STORE,
        DrainError::Source(e) => file_code(e),
        DrainError::Stopped => ICKPT_ERR_IO,
        DrainError::Panicked(_) => ICKPT_ERR_INTERNAL,
    }
}

fn open_code(e: &OpenError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        OpenError::NotAStore { .. }
        | OpenError::Missing { .. }
        | OpenError::NoSuchDir { .. }
        | OpenError::NotADirectory { .. }
        | OpenError::Symlink { .. }
        | OpenError::Unsafe { .. }
        | OpenError::BadMarker { .. } => ICKPT_ERR_NOT_A_STORE,
        OpenError::Locked { .. } | OpenError::InUse { .. } => ICKPT_ERR_STORE_LOCKED,
        OpenError::Io { .. } | OpenError::NotWritable { .. } => ICKPT_ERR_IO,
    }
}

fn protect_code(e: &ProtectError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        ProtectError::BadRange { problem, .. } => range_code(problem),
        ProtectError::RegionExists(_) => ICKPT_ERR_REGION_EXISTS,
        ProtectError::AllocSize { .. } | ProtectError::NotAllocated { .. } => {
            ICKPT_ERR_INVALID_ARGUMENT
        }
        ProtectError::Map { .. } | ProtectError::Unmap { .. } => ICKPT_ERR_IO,
        ProtectError::UnknownRegion(_) => ICKPT_ERR_UNKNOWN_REGION,
        ProtectError::Region(e) => region_code(e),
        ProtectError::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
    }
}

/// Memory `protect` refuses: overlapping a region is a region that exists.
fn range_code(p: &RangeProblem) -> ickpt_result {
    match p {
        RangeProblem::Overlaps(_) => ickpt_result::ICKPT_ERR_REGION_EXISTS,
        _ => ickpt_result::ICKPT_ERR_INVALID_ARGUMENT,
    }
}

fn checkpoint_code(e: &CheckpointError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        CheckpointError::File(e) => file_code(e),
        CheckpointError::Region(e) => region_code(e),
        CheckpointError::Tracking(e) => track_code(e),
        // A stray name in the store the user must move out (the message says which).
        CheckpointError::VersionsExhausted { .. } => ICKPT_ERR_INVALID_ARGUMENT,
        CheckpointError::HandlerReplaced | CheckpointError::CommitAborted { .. } => {
            ICKPT_ERR_TRACKING
        }
        CheckpointError::CommitPanicked { .. } => ICKPT_ERR_INTERNAL,
        CheckpointError::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
    }
}

fn inject_code(e: &InjectError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        InjectError::File(FileError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            ICKPT_ERR_NOT_FOUND
        }
        InjectError::File(e) => file_code(e),
        InjectError::Corrupt { .. } => ICKPT_ERR_CORRUPT,
        InjectError::RegionMismatch { .. } => ICKPT_ERR_REGION_MISMATCH,
        InjectError::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
    }
}

fn section_code(e: &SectionError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        SectionError::Order(_) => ICKPT_ERR_SECTION,
        SectionError::Name { .. } | SectionError::TooLarge { .. } => ICKPT_ERR_INVALID_ARGUMENT,
        SectionError::Regions(_) => ICKPT_ERR_REGION_MISMATCH,
        SectionError::File(e) => file_code(e),
        SectionError::Corrupt { .. } => ICKPT_ERR_CORRUPT,
        SectionError::Inject(e) => inject_code(e),
        SectionError::Region(e) => region_code(e),
        SectionError::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
    }
}

fn restore_code(e: &RestoreError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        RestoreError::Read(e) => read_code(e),
        RestoreError::RegionMismatch { .. } => ICKPT_ERR_REGION_MISMATCH,
        RestoreError::Region(e) => region_code(e),
        RestoreError::SectionOpen(_) => ICKPT_ERR_SECTION,
        RestoreError::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
    }
}

fn global_code(e: &GlobalError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        GlobalError::Read(e) => read_code(e),
        GlobalError::File(e) => file_code(e),
        GlobalError::OutOfOrder { .. } | GlobalError::BadNumber { .. } => {
            ICKPT_ERR_INVALID_ARGUMENT
        }
        GlobalError::Forked(_) => ICKPT_ERR_NOT_INITIALIZED,
    }
}

fn read_code(e: &ReadError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        ReadError::NotFound { .. }
        | ReadError::NoCheckpoint { .. }
        | ReadError::NoGlobal { .. } => ICKPT_ERR_NOT_FOUND,
        ReadError::Corrupt { .. }
        | ReadError::ChainBroken { .. }
        | ReadError::Foreign { .. }
        | ReadError::NoRestorable { .. } => ICKPT_ERR_CORRUPT,
        ReadError::OutOfFiles { .. } => ICKPT_ERR_IO,
        ReadError::File(e) => file_code(e),
    }
}

fn file_code(e: &FileError) -> ickpt_result {
    match e {
        FileError::NoSpace { .. } => ickpt_result::ICKPT_ERR_NO_SPACE,
        FileError::Io { .. } | FileError::Refused { .. } => ickpt_result::ICKPT_ERR_IO,
    }
}

fn region_code(e: &RegionError) -> ickpt_result {
    match e {
        RegionError::Unmapped { .. } => ickpt_result::ICKPT_ERR_TRACKING,
        RegionError::Tracking { source, .. } => track_code(source),
    }
}

fn track_code(e: &TrackError) -> ickpt_result {
    use ickpt_result::*;
    match e {
        TrackError::Refused(problem) => range_code(problem),
        _ => ICKPT_ERR_TRACKING,
    }
}

pub fn result_name(code: i32) -> &'static CStr {
    use ickpt_result::*;
    const NAMES: [(ickpt_result, &CStr); 17] = [
        (ICKPT_OK, c"ICKPT_OK"),
        (ICKPT_ERR_INVALID_ARGUMENT, c"ICKPT_ERR_INVALID_ARGUMENT"),
        (ICKPT_ERR_NOT_INITIALIZED, c"ICKPT_ERR_NOT_INITIALIZED"),
        (
            ICKPT_ERR_ALREADY_INITIALIZED,
            c"ICKPT_ERR_ALREADY_INITIALIZED",
        ),
        (ICKPT_ERR_UNKNOWN_REGION, c"ICKPT_ERR_UNKNOWN_REGION"),
        (ICKPT_ERR_REGION_EXISTS, c"ICKPT_ERR_REGION_EXISTS"),
        (ICKPT_ERR_REGION_MISMATCH, c"ICKPT_ERR_REGION_MISMATCH"),
        (ICKPT_ERR_NOT_FOUND, c"ICKPT_ERR_NOT_FOUND"),
        (ICKPT_ERR_CORRUPT, c"ICKPT_ERR_CORRUPT"),
        (ICKPT_ERR_IO, c"ICKPT_ERR_IO"),
        (ICKPT_ERR_NO_SPACE, c"ICKPT_ERR_NO_SPACE"),
        (ICKPT_ERR_NOT_A_STORE, c"ICKPT_ERR_NOT_A_STORE"),
        (ICKPT_ERR_STORE_LOCKED, c"ICKPT_ERR_STORE_LOCKED"),
        (ICKPT_ERR_TRACKING, c"ICKPT_ERR_TRACKING"),
        (ICKPT_ERR_INTERNAL, c"ICKPT_ERR_INTERNAL"),
        (ICKPT_ERR_COLLECTIVE, c"ICKPT_ERR_COLLECTIVE"),
        (ICKPT_ERR_SECTION, c"ICKPT_ERR_SECTION"),
    ];
    NAMES
        .iter()
        .find(|(r, _)| *r as i32 == code)
        .map_or(c"unknown", |(_, name)| name)
}
