use ickpt_format::{CommitStats, Kind};
use std::time::Duration;

/// What one committed checkpoint wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointInfo {
    pub version: u64,
    /// The application's value given with the checkpoint (0 when none was).
    pub tag: u64,
    pub kind: Kind,
    pub parent: u64,
    /// Pages stored in this version.
    pub pages: u64,
    /// Size of the version file.
    pub bytes: u64,
    /// Time in `checkpoint` (sync: until committed; async: until scheduled), or from the
    /// request until committed when reported by `wait`.
    pub duration: Duration,
    /// Where the time went.
    pub phases: Phases,
    /// How the commit went: mode, time, and how the application's first writes met it.
    pub commit: CommitStats,
    /// What pre-copy did for this version; None with pre-copy off.
    pub precopy: Option<super::PrecopyInfo>,
}

/// Time spent in each phase of a checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Phases {
    /// Taking the dirty sets and write-protecting the regions again.
    pub collect: Duration,
    /// Copying pages into the staging buffer.
    pub copy: Duration,
    /// Checksumming them.
    pub crc: Duration,
    /// Handing the regions back to their tracker once every page is taken: for uffd-async,
    /// lifting the fence `collect` set (the rest of the fence's cost is in `collect`), or, for
    /// a sync commit without one, checking that no write reached its pages meanwhile.
    pub release: Duration,
    /// Handing bytes to the store (page cache for a local directory).
    pub write: Duration,
    /// Making the version durable and visible: fsync, rename, directory fsync.
    pub commit: Duration,
    /// Garbage collection after a full version.
    pub gc: Duration,
}

/// What one restore read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreInfo {
    pub version: u64,
    /// The tag the version was checkpointed with (0 when none was, or before format 5).
    pub tag: u64,
    /// Versions in the chain, newest to full.
    pub chain_len: u32,
    /// Pages read (each page once, however many versions stored it).
    pub pages: u64,
    pub duration: Duration,
}

impl Stats {
    /// Keep the running totals a region leaving the engine counted in its own memory.
    pub(crate) fn keep_counts_of(&mut self, r: &crate::track::TrackedRegion) {
        self.faults_of_removed += r.faults();
        self.acck_released_of_removed += r.acck_released_pages();
    }
}

/// Running totals since the engine started.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub backend: &'static str,
    /// Regions the backend handed to page protection because userfaultfd refused their
    /// memory type (most file mappings, with the uffd backend).
    pub regions_by_protection: u64,
    pub regions: u64,
    pub protected_bytes: u64,
    pub checkpoints: u64,
    pub full_checkpoints: u64,
    pub incremental_checkpoints: u64,
    pub failed_checkpoints: u64,
    pub pages_written: u64,
    pub bytes_written: u64,
    pub checkpoint_time: Duration,
    /// First writes trapped since start.
    pub faults: u64,
    pub(crate) faults_of_removed: u64,
    /// Time ickpt spent handling first writes (the trap's kernel entry and exit come on
    /// top; a write that waited for the committer counts its wait here too).
    pub monitor_time: Duration,
    /// Pages coarse-grained monitoring released (stored whole without a trap each, written
    /// or not), since start.
    pub acck_released_pages: u64,
    pub(crate) acck_released_of_removed: u64,
    /// 2 MiB spans of released pages turned into huge pages, since start.
    pub acck_huge_spans: u64,
    /// First writes that copied a page aside, waited for the committer, came after the
    /// committer had taken the page, or came after the commit (AI-Ckpt's access types).
    pub cow_pages: u64,
    pub wait_pages: u64,
    pub avoided_pages: u64,
    pub after_pages: u64,
    /// Time application threads spent waiting for the committer.
    pub wait_time: Duration,
    /// Checkpoints taken again with fences because a write came where no fence kept it
    /// out (uffd-async; see `docs/design.md`): a sync commit's collected page written
    /// before it copied it, or an async call's region written between its scan and its
    /// fence.
    pub raced_commits: u64,
    /// Pre-copy since start (PRWIP; zero when off): passes, pages the checkpoints took
    /// from pre-copy, those written again before their checkpoint (conflicts), page copies
    /// written before the checkpoint calls, and bytes written more than once.
    pub precopy_passes: u64,
    pub precopy_pages: u64,
    pub precopy_conflicts: u64,
    pub precopy_copies: u64,
    pub precopy_rewritten_bytes: u64,
    pub restores: u64,
    pub pages_restored: u64,
    pub restore_time: Duration,
    pub last_checkpoint: Option<CheckpointInfo>,
}
