//! The process record's byte layout (`docs/FORMAT.md`, "The process record"): sizes, codes
//! and limits that [`crate::encode`] writes by and [`crate::decode`] checks.

use crate::record::{FdKind, MappingKind, ITIMERS, MM_FIELDS};

pub const MAGIC: [u8; 8] = *b"ICKPTPRC";
pub const FORMAT: u16 = 1;

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
pub const THREAD_LEN: usize = 64;
pub const SIGACTION_LEN: usize = 32;
/// A descriptor entry without its path.
pub const FD_LEN: usize = 32;
pub const SNAPSHOT_LEN: usize = 24;

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
