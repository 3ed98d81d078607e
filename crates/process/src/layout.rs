//! The process record's byte layout (`docs/FORMAT.md`, "The process record"): sizes, codes
//! and limits that [`crate::encode`] writes by and [`crate::decode`] checks.

use crate::record::{FdKind, MappingKind, TimerNotify, ITIMERS, MM_FIELDS};

pub const MAGIC: [u8; 8] = *b"ICKPTPRC";
/// The format written. Format 1, still read, has no thread names (thread entries of
/// [`THREAD_LEN_1`] bytes) and no timers (header bytes 56..64 reserved).
pub const FORMAT: u16 = 2;

/// The header: magic, format, page size, total length, pid, umask, the tables' counts.
pub const HEADER_LEN: usize = 64;
/// The header and the fixed fields after it: the mm fields, the hole, the restart word, the
/// interval timers.
pub const FIXED_LEN: usize = HEADER_LEN + MM_FIELDS * 8 + 24 + ITIMERS * 16;
/// A string's length prefix.
pub const STRING_HEAD: usize = 2;
/// A file identity without its path.
pub const FILE_ID_LEN: usize = 40;
/// A mapping entry without its name and file identity.
pub const MAPPING_LEN: usize = 40;
pub const THREAD_LEN: usize = THREAD_LEN_1 + crate::record::THREAD_NAME_LEN;
/// A thread entry of format 1, without a name.
pub const THREAD_LEN_1: usize = 64;
pub const SIGACTION_LEN: usize = 32;
/// A descriptor entry without its path.
pub const FD_LEN: usize = 32;
pub const SNAPSHOT_LEN: usize = 24;
pub const TIMER_LEN: usize = 48;

/// Mapping flag bits (byte 33 of a mapping entry).
pub const MAP_SHARED: u8 = 1;
pub const MAP_GROWSDOWN: u8 = 2;
pub const MAP_HAS_FILE: u8 = 4;
/// Descriptor flag bits (byte 5 of a descriptor entry).
pub const FD_LOCKED: u8 = 1;

/// What a reader accepts, and so what a writer may write: each bounds what a crafted record
/// can make a restart hold in memory, with room above what a real process has.
pub mod limits {
    /// `vm.max_map_count` is 65530 by default; administrators raise it, rarely this far.
    pub const MAX_MAPPINGS: u64 = 1 << 20;
    pub const MAX_THREADS: u64 = 1 << 16;
    /// `fs.nr_open`'s default, the most descriptors a process has without raising it.
    pub const MAX_FDS: u64 = 1 << 20;
    pub const MAX_SNAPSHOTS: u64 = 1 << 20;
    /// Each timer holds a preallocated signal counted against `RLIMIT_SIGPENDING`, whose
    /// usual default is about 63,000.
    pub const MAX_TIMERS: u64 = 1 << 16;
    /// Words: 64 (type, value) pairs; Linux 6.x passes about 25.
    pub const MAX_AUXV: u64 = 128;
    /// Bytes: `PATH_MAX`, the most `readlink` of a descriptor and a maps name give.
    pub const MAX_STRING: u64 = 4096;
    pub const MIN_PAGE_SIZE: u32 = 4096;
    pub const MAX_PAGE_SIZE: u32 = 65536;
}

pub fn mapping_kind_code(k: MappingKind) -> (u8, u64) {
    match k {
        MappingKind::Region(id) => (0, id),
        MappingKind::File => (1, 0),
        MappingKind::Snapshot => (2, 0),
        MappingKind::Zero => (3, 0),
        MappingKind::Reserve => (4, 0),
        MappingKind::Special => (5, 0),
    }
}

/// The kind a code stands for; None for an unknown code.
pub fn mapping_kind(code: u8, region: u64) -> Option<MappingKind> {
    Some(match code {
        0 => MappingKind::Region(region),
        1 => MappingKind::File,
        2 => MappingKind::Snapshot,
        3 => MappingKind::Zero,
        4 => MappingKind::Reserve,
        5 => MappingKind::Special,
        _ => return None,
    })
}

pub fn fd_kind_code(k: FdKind) -> u8 {
    match k {
        FdKind::File => 0,
        FdKind::Directory => 1,
        FdKind::Device => 2,
        FdKind::Userfaultfd => 3,
        FdKind::Pagemap => 4,
        FdKind::Other => 5,
    }
}

pub fn fd_kind(code: u8) -> Option<FdKind> {
    Some(match code {
        0 => FdKind::File,
        1 => FdKind::Directory,
        2 => FdKind::Device,
        3 => FdKind::Userfaultfd,
        4 => FdKind::Pagemap,
        5 => FdKind::Other,
        _ => return None,
    })
}

/// `sigev_notify` as the kernel has it (`SIGEV_THREAD_ID` includes `SIGEV_SIGNAL`'s 0), and
/// the target thread's id (0 for the others).
pub fn timer_notify_code(n: TimerNotify) -> (u32, u32) {
    match n {
        TimerNotify::Signal => (0, 0),
        TimerNotify::None => (1, 0),
        TimerNotify::Thread => (2, 0),
        TimerNotify::ThreadId(tid) => (4, tid),
    }
}

/// The notification a code and a thread id stand for; None for an unknown code, or a
/// thread id given with a code that takes none (or missing from one that does).
pub fn timer_notify(code: u32, tid: u32) -> Option<TimerNotify> {
    Some(match (code, tid) {
        (0, 0) => TimerNotify::Signal,
        (1, 0) => TimerNotify::None,
        (2, 0) => TimerNotify::Thread,
        (4, 1..) => TimerNotify::ThreadId(tid),
        _ => return None,
    })
}
