//! Field-for-field mirror of the byte diagram in `docs/FORMAT.md`. All integers little-endian.

use crate::FormatError;

/// First 8 bytes of every version file. The high byte and CR LF catch 7-bit and
/// line-ending mangling, as PNG's signature does.
pub const MAGIC: [u8; 8] = *b"\x89ICKPT\r\n";
/// First 8 bytes of the footer, the last 64 bytes of the file.
pub const FOOTER_MAGIC: [u8; 8] = *b"ICKPTEND";
/// The format version this crate writes, and the newest it reads.
pub const FORMAT_VERSION: u16 = 7;

/// Header bytes of the format this crate writes (version 3 on); versions 1 and 2 have
/// [`HEADER_LEN_V1`].
pub const HEADER_LEN: usize = 96;
pub const HEADER_LEN_V1: usize = 64;
pub const REGION_ENTRY_LEN: usize = 32;
pub const RUN_ENTRY_LEN: usize = 24;
/// Bytes of a frame-table entry (format 6 on).
pub const FRAME_ENTRY_LEN: usize = 16;
pub const FOOTER_LEN: usize = 64;
/// Commit-stats bytes of the format this crate writes (version 4 on: with the phases);
/// versions 2 and 3 have [`STATS_LEN_V2`].
pub const STATS_LEN: usize = 160;
/// The commit-stats block of format versions 4 to 6.
pub const STATS_LEN_V4: usize = 128;
pub const STATS_LEN_V2: usize = 80;

/// Header bytes of a file of `format_version`.
pub fn header_len_for(format_version: u16) -> usize {
    if format_version >= 3 {
        HEADER_LEN
    } else {
        HEADER_LEN_V1
    }
}

/// Limits the reader holds every file to, whatever its size claims, so that a crafted or
/// damaged file can never make it allocate without bound. The writer never exceeds them
/// (the engine refuses to protect more).
pub mod limits {
    /// Regions in one version's table (a table of 32 MiB).
    pub const MAX_REGIONS: u32 = 1 << 20;
    /// Pages in one version, and so in one region: 1 TiB of 4 KiB pages. A page costs 4
    /// bytes of CRC table and at most 24 of run index in memory while a version is read.
    pub const MAX_PAGES: u64 = 1 << 28;
    /// Smallest and largest page size (4 KiB and 64 KiB base pages).
    pub const MIN_PAGE_SIZE: u32 = 1 << 12;
    pub const MAX_PAGE_SIZE: u32 = 1 << 16;
    /// Highest version number, far beyond any store's life, so `version + 1` never overflows.
    pub const MAX_VERSION: u64 = 1 << 62;
    /// Most page bytes one frame holds (format 6): what a reader decompresses into at once.
    pub const MAX_FRAME_BYTES: u64 = 1 << 20;
}

/// Whether files of `format_version` may carry a frame table (format 6 on).
pub fn has_frames(format_version: u16) -> bool {
    format_version >= 6
}

/// Bytes of commit-stats block a file of `format_version` carries: v1 files have none.
pub fn stats_len_for(format_version: u16) -> usize {
    match format_version {
        0 | 1 => 0,
        2 | 3 => STATS_LEN_V2,
        4..=6 => STATS_LEN_V4,
        _ => STATS_LEN,
    }
}

/// Whether a version holds every page (full) or only pages written since its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Full,
    Incremental,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::Full => 0,
            Kind::Incremental => 1,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Full => "full",
            Kind::Incremental => "incremental",
        }
    }
}

/// How a checkpoint was committed: the application waited for it (sync), or resumed while
/// pages were flushed behind copy-on-write (async).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommitMode {
    Sync,
    Async,
}

impl CommitMode {
    fn code(self) -> u8 {
        match self {
            CommitMode::Sync => 0,
            CommitMode::Async => 1,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CommitMode::Sync => "sync",
            CommitMode::Async => "async",
        }
    }

    pub fn parse(s: &str) -> Option<CommitMode> {
        match s {
            "sync" => Some(CommitMode::Sync),
            "async" => Some(CommitMode::Async),
            _ => None,
        }
    }
}

/// The order in which a commit flushed its pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlushOrder {
    Address,
    Adaptive,
}

impl FlushOrder {
    fn code(self) -> u8 {
        match self {
            FlushOrder::Address => 0,
            FlushOrder::Adaptive => 1,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FlushOrder::Address => "address",
            FlushOrder::Adaptive => "adaptive",
        }
    }

    pub fn parse(s: &str) -> Option<FlushOrder> {
        match s {
            "address" => Some(FlushOrder::Address),
            "adaptive" => Some(FlushOrder::Adaptive),
            _ => None,
        }
    }
}

const BACKEND_NAMES: [&str; 4] = ["unknown", "mprotect", "uffd", "uffd-async"];

/// Name of a write-tracking backend code; "unknown" for 0 and for codes this reader lacks.
pub fn backend_name(code: u8) -> &'static str {
    BACKEND_NAMES
        .get(code as usize)
        .copied()
        .unwrap_or(BACKEND_NAMES[0])
}

/// Code of a write-tracking backend name; 0 ("unknown") for names without one (e.g. "auto").
pub fn backend_code(name: &str) -> u8 {
    BACKEND_NAMES
        .iter()
        .position(|&n| n == name)
        .map_or(0, |i| i as u8)
}

/// How one commit went (format version 2 on): the fixed block between the page-CRC table
/// and the footer. Counts of first writes follow AI-Ckpt's access types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitStats {
    pub mode: CommitMode,
    pub flush_order: FlushOrder,
    /// Write-tracking backend, see [`backend_name`].
    pub backend: u8,
    /// From the checkpoint request until the last page was handed to the store.
    pub commit_ns: u64,
    /// Total time application threads were blocked waiting for pages of this commit.
    pub wait_ns: u64,
    pub peak_cow_bytes: u64,
    pub cow_limit_bytes: u64,
    /// First writes during the commit that copied the page to a CoW slot (COW).
    pub cow_pages: u64,
    /// First writes during the commit that waited for the page (WAIT).
    pub wait_pages: u64,
    /// First writes during the commit to pages already committed (AVOIDED).
    pub avoided_pages: u64,
    /// First writes after the previous version's commit and before this checkpoint's request:
    /// the previous version's AFTER count, known only once this version is taken.
    pub after_previous: u64,
    /// The version whose AFTER count `after_previous` is: the one this process committed
    /// just before. 0 when there is none (the process's first checkpoint, or the first after
    /// a restore or a failed commit), and in format 2 files, which do not record it.
    pub previous_version: u64,
    /// Where the commit's time went until its last bytes were handed to the store (format 4
    /// on; zero before).
    pub phases: StoredPhases,
    /// What pre-copy did for the version (format 7 on; zero before, and with pre-copy off).
    pub precopy: StoredPrecopy,
}

/// What pre-copy (PRWIP) did for one version, as its file records it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoredPrecopy {
    /// 0 off, 1 blind, 2 prwip, 3 prwip-opt ([`PRECOPY_NAMES`]).
    pub strategy: u8,
    /// Pages the version took from pre-copy, written before the checkpoint call.
    pub pages: u64,
    /// Of those, pages written again before the checkpoint (conflicts).
    pub conflicts: u64,
    /// Page copies written before the checkpoint call, first copies and again.
    pub copies: u64,
    /// Bytes written into the file more than once.
    pub rewritten_bytes: u64,
}

/// Names of the pre-copy strategies by their code in [`StoredPrecopy::strategy`].
pub const PRECOPY_NAMES: [&str; 4] = ["off", "blind", "prwip", "prwip-opt"];

/// The phases of a commit a version file can record: those before its last bytes were
/// written. Its `fsync` and rename come after, so only the process that committed it knows
/// them (`CheckpointInfo::phases`). Nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoredPhases {
    /// Taking the written pages and write-protecting them again (and, for a fenced commit,
    /// raising the fence), with application threads held at the gate.
    pub collect_ns: u64,
    /// Copying pages out of application memory or copy-on-write slots.
    pub copy_ns: u64,
    /// Checksumming the copied pages.
    pub crc_ns: u64,
    /// Once every page was taken: lifting fences, or checking that no write reached a page
    /// collected without one.
    pub release_ns: u64,
    /// Inside the store's write calls.
    pub write_ns: u64,
    /// Times the version was scheduled: 1, or 2 when a sync commit without a fence met a
    /// write and was taken again with fences. 0: not recorded (format 3 and before).
    pub attempts: u8,
}

impl Default for CommitStats {
    fn default() -> Self {
        CommitStats {
            mode: CommitMode::Sync,
            flush_order: FlushOrder::Address,
            backend: 0,
            commit_ns: 0,
            wait_ns: 0,
            peak_cow_bytes: 0,
            cow_limit_bytes: 0,
            cow_pages: 0,
            wait_pages: 0,
            avoided_pages: 0,
            after_previous: 0,
            previous_version: 0,
            phases: StoredPhases::default(),
            precopy: StoredPrecopy::default(),
        }
    }
}

/// The first bytes of a version file: 96 (format 3), 64 (formats 1 and 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub format_version: u16,
    pub kind: Kind,
    pub page_size: u32,
    /// This version's number, >= 1, unique within a store.
    pub version: u64,
    /// The version this one is an increment of; 0 for a full version.
    pub parent: u64,
    /// Increments between this version and its full version; 0 for a full version.
    pub chain_depth: u32,
    pub region_count: u32,
    pub created_unix_ns: u64,
    /// Where page data starts: the region table's end rounded up to the page size.
    pub data_offset: u64,
    /// The identity of the store that wrote the file (format 3 on; None before): a file
    /// from another store never joins this store's chains.
    pub store_id: Option<[u8; 16]>,
    /// The parent's `meta_crc` (format 3 incremental versions; 0 otherwise): the chain is
    /// bound file to file, so a stale or foreign file with the parent's number is refused.
    pub parent_meta_crc: u32,
    /// The application's value for this version, given at the checkpoint (an iteration
    /// number, a time step): format 5 on; 0 before, and when none was given.
    pub tag: u64,
}

/// One protected region as it stood at the checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionEntry {
    /// The application's id for the region.
    pub id: u64,
    /// The version that first wrote this incarnation of the region whole. Pages of older
    /// versions belong to an earlier incarnation (freed, re-protected) and are never restored.
    pub born: u64,
    /// Length in bytes as the application protected it.
    pub length: u64,
    /// Offset of the region's first byte within its first page.
    pub page_offset: u32,
}

impl RegionEntry {
    /// Pages covering the region: page i holds region bytes [i*ps - page_offset, (i+1)*ps - page_offset).
    /// Saturates, so a length that only a damaged table holds counts far beyond
    /// [`limits::MAX_PAGES`] instead of wrapping to a few pages.
    pub fn page_count(&self, page_size: u32) -> u64 {
        (self.page_offset as u64)
            .saturating_add(self.length)
            .div_ceil(page_size as u64)
    }
}

/// A run of consecutive pages of one region, stored back to back in the data section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Index into the region table.
    pub region_index: u32,
    pub page_count: u32,
    pub first_page: u64,
    /// Absolute file offset of the run's first page.
    pub data_offset: u64,
}

/// How a frame's pages are stored (format 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// The pages as they are.
    Raw,
    /// One zstd frame that decompresses to the pages.
    Zstd,
    /// Every page all zero; no bytes stored.
    Zero,
}

impl Codec {
    pub fn code(self) -> u8 {
        match self {
            Codec::Raw => 0,
            Codec::Zstd => 1,
            Codec::Zero => 2,
        }
    }

    pub fn from_code(c: u8) -> Option<Codec> {
        Some(match c {
            0 => Codec::Raw,
            1 => Codec::Zstd,
            2 => Codec::Zero,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Codec::Raw => "raw",
            Codec::Zstd => "zstd",
            Codec::Zero => "zero",
        }
    }
}

/// Consecutive pages of the log (in flush order, across runs), stored one way (format 6).
/// Frames tile the log's pages and, back to back, the data section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub page_count: u32,
    pub codec: Codec,
    /// Bytes the frame takes in the data section.
    pub stored_len: u32,
    /// A zstd frame's CRC-32C of its stored bytes, checked before they are decompressed; 0
    /// for the others (their pages' CRCs cover them).
    pub crc: u32,
}

impl Frame {
    pub fn encode(&self) -> [u8; FRAME_ENTRY_LEN] {
        let mut b = [0u8; FRAME_ENTRY_LEN];
        put(&mut b, 0, &self.page_count.to_le_bytes());
        b[4] = self.codec.code();
        put(&mut b, 8, &self.stored_len.to_le_bytes());
        put(&mut b, 12, &self.crc.to_le_bytes());
        b
    }

    /// Decode and check the entry at file offset `at` of a file with pages of `page_size`.
    pub fn decode(b: &[u8], at: u64, page_size: u32) -> Result<Frame, FormatError> {
        let codec = Codec::from_code(b[4])
            .ok_or_else(|| FormatError::corrupt(at + 4, format!("unknown codec {}", b[4])))?;
        if b[5..8].iter().any(|&x| x != 0) {
            return Err(FormatError::corrupt(
                at + 5,
                "reserved frame bytes are not zero",
            ));
        }
        let f = Frame {
            page_count: u32_at(b, 0),
            codec,
            stored_len: u32_at(b, 8),
            crc: u32_at(b, 12),
        };
        let raw = f.raw_len(page_size);
        if f.page_count == 0 || raw > limits::MAX_FRAME_BYTES {
            return Err(FormatError::corrupt(
                at,
                format!(
                    "frame of {} pages: 1 to {} bytes of pages allowed",
                    f.page_count,
                    limits::MAX_FRAME_BYTES
                ),
            ));
        }
        let stored = f.stored_len as u64;
        let fits = match codec {
            Codec::Raw => stored == raw && f.crc == 0,
            Codec::Zstd => stored > 0 && stored < raw,
            Codec::Zero => stored == 0 && f.crc == 0,
        };
        if !fits {
            return Err(FormatError::corrupt(
                at + 8,
                format!(
                    "a {} frame of {raw} bytes of pages cannot store {stored} bytes with checksum {:08x}",
                    codec.as_str(),
                    f.crc
                ),
            ));
        }
        Ok(f)
    }

    /// Bytes of pages the frame holds.
    pub fn raw_len(&self, page_size: u32) -> u64 {
        self.page_count as u64 * page_size as u64
    }
}

/// The last 64 bytes of a version file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Footer {
    pub index_offset: u64,
    pub run_count: u64,
    pub page_count: u64,
    pub file_length: u64,
    /// Entries in the frame table (format 6 on); 0: the data section holds every page raw,
    /// as before format 6.
    pub frame_count: u64,
    /// CRC-32C of header, region table, index, page-CRC table, commit stats (v2) and footer
    /// bytes 0..60.
    pub meta_crc: u32,
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
fn put(b: &mut [u8], at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
}

impl Header {
    /// The header's bytes: [`header_len_for`] its format version.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; header_len_for(self.format_version)];
        put(&mut b, 0, &MAGIC);
        put(&mut b, 8, &self.format_version.to_le_bytes());
        b[10] = self.kind.code();
        put(&mut b, 12, &self.page_size.to_le_bytes());
        put(&mut b, 16, &self.version.to_le_bytes());
        put(&mut b, 24, &self.parent.to_le_bytes());
        put(&mut b, 32, &self.chain_depth.to_le_bytes());
        put(&mut b, 36, &self.region_count.to_le_bytes());
        put(&mut b, 40, &self.created_unix_ns.to_le_bytes());
        put(&mut b, 48, &self.data_offset.to_le_bytes());
        if self.format_version >= 5 {
            put(&mut b, 56, &self.tag.to_le_bytes());
        }
        if self.format_version >= 3 {
            put(&mut b, 64, &self.store_id.unwrap_or_default());
            put(&mut b, 80, &self.parent_meta_crc.to_le_bytes());
        }
        b
    }

    /// The format version of a file whose first 64 bytes are `b`, to know how long its
    /// header is; every check is [`decode`](Self::decode)'s.
    pub fn peek_format_version(b: &[u8]) -> u16 {
        if b.len() < 10 {
            return 0;
        }
        u16_at(b, 8)
    }

    /// Decode and check every field that can be checked without the rest of the file.
    pub fn decode(b: &[u8]) -> Result<Header, FormatError> {
        if b.len() < HEADER_LEN_V1 {
            return Err(FormatError::corrupt(
                0,
                format!("file is shorter than the {HEADER_LEN_V1}-byte header"),
            ));
        }
        if b[0..8] != MAGIC {
            return Err(FormatError::corrupt(
                0,
                "bad magic: not an ickpt version file",
            ));
        }
        let format_version = u16_at(b, 8);
        if format_version == 0 {
            return Err(FormatError::corrupt(8, "format version 0"));
        }
        if format_version > FORMAT_VERSION {
            return Err(FormatError::UnsupportedVersion {
                found: format_version,
                supported: FORMAT_VERSION,
            });
        }
        let header_len = header_len_for(format_version);
        if b.len() < header_len {
            return Err(FormatError::corrupt(
                0,
                format!("file is shorter than the {header_len}-byte header"),
            ));
        }
        let kind = match b[10] {
            0 => Kind::Full,
            1 => Kind::Incremental,
            k => return Err(FormatError::corrupt(10, format!("unknown kind {k}"))),
        };
        // Bytes 56..64 hold the tag from format 5 on.
        let tag_bytes = if format_version >= 5 { 0..0 } else { 56..64 };
        let reserved = [11..12, tag_bytes, 84..header_len.max(84)];
        if let Some(at) = reserved.into_iter().flatten().find(|&i| b[i] != 0) {
            return Err(FormatError::corrupt(
                at as u64,
                "reserved header bytes are not zero",
            ));
        }
        let page_size = u32_at(b, 12);
        if !page_size.is_power_of_two()
            || !(limits::MIN_PAGE_SIZE..=limits::MAX_PAGE_SIZE).contains(&page_size)
        {
            return Err(FormatError::corrupt(
                12,
                format!("implausible page size {page_size}"),
            ));
        }
        let v3 = format_version >= 3;
        let h = Header {
            format_version,
            kind,
            page_size,
            version: u64_at(b, 16),
            parent: u64_at(b, 24),
            chain_depth: u32_at(b, 32),
            region_count: u32_at(b, 36),
            created_unix_ns: u64_at(b, 40),
            data_offset: u64_at(b, 48),
            store_id: v3.then(|| b[64..80].try_into().expect("16 bytes")),
            parent_meta_crc: if v3 { u32_at(b, 80) } else { 0 },
            tag: if format_version >= 5 {
                u64_at(b, 56)
            } else {
                0
            },
        };
        if h.version == 0 || h.version > limits::MAX_VERSION {
            return Err(FormatError::corrupt(
                16,
                format!("implausible version number {}", h.version),
            ));
        }
        if h.region_count > limits::MAX_REGIONS {
            return Err(FormatError::corrupt(
                36,
                format!(
                    "{} regions: more than the {} a version may hold",
                    h.region_count,
                    limits::MAX_REGIONS
                ),
            ));
        }
        match h.kind {
            Kind::Full if h.parent != 0 || h.chain_depth != 0 || h.parent_meta_crc != 0 => {
                return Err(FormatError::corrupt(24, "full version with a parent"));
            }
            Kind::Incremental if h.parent == 0 || h.parent >= h.version || h.chain_depth == 0 => {
                return Err(FormatError::corrupt(
                    24,
                    "incremental version without an older parent",
                ));
            }
            _ => {}
        }
        if h.data_offset != Self::data_offset_for(format_version, h.region_count, h.page_size) {
            return Err(FormatError::corrupt(
                48,
                "data offset does not follow the region table",
            ));
        }
        Ok(h)
    }

    /// The region table's end, rounded up to a page so page data is page-aligned in the file.
    pub fn data_offset_for(format_version: u16, region_count: u32, page_size: u32) -> u64 {
        let end =
            header_len_for(format_version) as u64 + region_count as u64 * REGION_ENTRY_LEN as u64;
        end.div_ceil(page_size as u64) * page_size as u64
    }

    /// Bytes of header this file has.
    pub fn byte_len(&self) -> usize {
        header_len_for(self.format_version)
    }
}

impl RegionEntry {
    pub fn encode(&self) -> [u8; REGION_ENTRY_LEN] {
        let mut b = [0u8; REGION_ENTRY_LEN];
        put(&mut b, 0, &self.id.to_le_bytes());
        put(&mut b, 8, &self.born.to_le_bytes());
        put(&mut b, 16, &self.length.to_le_bytes());
        put(&mut b, 24, &self.page_offset.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8], at: u64, header: &Header) -> Result<RegionEntry, FormatError> {
        let r = RegionEntry {
            id: u64_at(b, 0),
            born: u64_at(b, 8),
            length: u64_at(b, 16),
            page_offset: u32_at(b, 24),
        };
        if u32_at(b, 28) != 0 {
            return Err(FormatError::corrupt(
                at + 28,
                "reserved region bytes are not zero",
            ));
        }
        if r.born == 0 || r.born > header.version {
            return Err(FormatError::corrupt(
                at + 8,
                "region born after this version",
            ));
        }
        if r.page_offset >= header.page_size {
            return Err(FormatError::corrupt(
                at + 24,
                "region page offset beyond a page",
            ));
        }
        // A region must fit one version, which stores it whole when it is born.
        if r.length == 0 || r.page_count(header.page_size) > limits::MAX_PAGES {
            return Err(FormatError::corrupt(
                at + 16,
                format!(
                    "implausible region length {} (more than {} pages)",
                    r.length,
                    limits::MAX_PAGES
                ),
            ));
        }
        Ok(r)
    }
}

impl Run {
    pub fn encode(&self) -> [u8; RUN_ENTRY_LEN] {
        let mut b = [0u8; RUN_ENTRY_LEN];
        put(&mut b, 0, &self.region_index.to_le_bytes());
        put(&mut b, 4, &self.page_count.to_le_bytes());
        put(&mut b, 8, &self.first_page.to_le_bytes());
        put(&mut b, 16, &self.data_offset.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Run {
        Run {
            region_index: u32_at(b, 0),
            page_count: u32_at(b, 4),
            first_page: u64_at(b, 8),
            data_offset: u64_at(b, 16),
        }
    }
}

impl CommitStats {
    pub fn encode(&self) -> [u8; STATS_LEN] {
        let mut b = [0u8; STATS_LEN];
        b[0] = self.mode.code();
        b[1] = self.flush_order.code();
        // A code the reader rejects would make the whole version unreadable; stats are not
        // worth that.
        debug_assert!((self.backend as usize) < BACKEND_NAMES.len());
        b[2] = if (self.backend as usize) < BACKEND_NAMES.len() {
            self.backend
        } else {
            0
        };
        put(&mut b, 8, &self.commit_ns.to_le_bytes());
        put(&mut b, 16, &self.wait_ns.to_le_bytes());
        put(&mut b, 24, &self.peak_cow_bytes.to_le_bytes());
        put(&mut b, 32, &self.cow_limit_bytes.to_le_bytes());
        put(&mut b, 40, &self.cow_pages.to_le_bytes());
        put(&mut b, 48, &self.wait_pages.to_le_bytes());
        put(&mut b, 56, &self.avoided_pages.to_le_bytes());
        put(&mut b, 64, &self.after_previous.to_le_bytes());
        put(&mut b, 72, &self.previous_version.to_le_bytes());
        let p = &self.phases;
        put(&mut b, 80, &p.collect_ns.to_le_bytes());
        put(&mut b, 88, &p.copy_ns.to_le_bytes());
        put(&mut b, 96, &p.crc_ns.to_le_bytes());
        put(&mut b, 104, &p.release_ns.to_le_bytes());
        put(&mut b, 112, &p.write_ns.to_le_bytes());
        b[120] = p.attempts;
        let c = &self.precopy;
        debug_assert!((c.strategy as usize) < PRECOPY_NAMES.len());
        b[121] = c.strategy;
        put(&mut b, 128, &c.pages.to_le_bytes());
        put(&mut b, 136, &c.conflicts.to_le_bytes());
        put(&mut b, 144, &c.copies.to_le_bytes());
        put(&mut b, 152, &c.rewritten_bytes.to_le_bytes());
        b
    }

    /// Decode the block that starts at file offset `at` in a file of `format_version`
    /// (`previous_version` is reserved, and zero, before version 3).
    pub fn decode(b: &[u8], at: u64, format_version: u16) -> Result<CommitStats, FormatError> {
        let len = stats_len_for(format_version);
        if len == 0 || b.len() < len {
            return Err(FormatError::corrupt(at, "commit stats block is short"));
        }
        let mode = match b[0] {
            0 => CommitMode::Sync,
            1 => CommitMode::Async,
            m => return Err(FormatError::corrupt(at, format!("unknown commit mode {m}"))),
        };
        let flush_order = match b[1] {
            0 => FlushOrder::Address,
            1 => FlushOrder::Adaptive,
            o => {
                return Err(FormatError::corrupt(
                    at + 1,
                    format!("unknown flush order {o}"),
                ))
            }
        };
        let backend = b[2];
        if backend as usize >= BACKEND_NAMES.len() {
            return Err(FormatError::corrupt(
                at + 2,
                format!("unknown backend {backend}"),
            ));
        }
        let reserved_tail = match format_version {
            2 => 72..80,
            3 => 80..80,
            4..=6 => 121..128,
            _ => 122..128,
        };
        if format_version >= 7 && b[121] as usize >= PRECOPY_NAMES.len() {
            return Err(FormatError::corrupt(
                at + 121,
                format!("unknown pre-copy strategy {}", b[121]),
            ));
        }
        if let Some(i) = (3..8).chain(reserved_tail).find(|&i| b[i] != 0) {
            return Err(FormatError::corrupt(
                at + i as u64,
                "reserved commit stats bytes are not zero",
            ));
        }
        Ok(CommitStats {
            mode,
            flush_order,
            backend,
            commit_ns: u64_at(b, 8),
            wait_ns: u64_at(b, 16),
            peak_cow_bytes: u64_at(b, 24),
            cow_limit_bytes: u64_at(b, 32),
            cow_pages: u64_at(b, 40),
            wait_pages: u64_at(b, 48),
            avoided_pages: u64_at(b, 56),
            after_previous: u64_at(b, 64),
            previous_version: u64_at(b, 72),
            phases: if format_version >= 4 {
                StoredPhases {
                    collect_ns: u64_at(b, 80),
                    copy_ns: u64_at(b, 88),
                    crc_ns: u64_at(b, 96),
                    release_ns: u64_at(b, 104),
                    write_ns: u64_at(b, 112),
                    attempts: b[120],
                }
            } else {
                StoredPhases::default()
            },
            precopy: if format_version >= 7 {
                StoredPrecopy {
                    strategy: b[121],
                    pages: u64_at(b, 128),
                    conflicts: u64_at(b, 136),
                    copies: u64_at(b, 144),
                    rewritten_bytes: u64_at(b, 152),
                }
            } else {
                StoredPrecopy::default()
            },
        })
    }
}

impl Footer {
    /// Encode bytes 0..60; the caller appends the CRC it computed over everything it covers.
    pub fn encode_without_crc(&self) -> [u8; FOOTER_LEN - 4] {
        let mut b = [0u8; FOOTER_LEN - 4];
        put(&mut b, 0, &FOOTER_MAGIC);
        put(&mut b, 8, &self.index_offset.to_le_bytes());
        put(&mut b, 16, &self.run_count.to_le_bytes());
        put(&mut b, 24, &self.page_count.to_le_bytes());
        put(&mut b, 32, &self.file_length.to_le_bytes());
        put(&mut b, 40, &self.frame_count.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8], at: u64) -> Result<Footer, FormatError> {
        if b[0..8] != FOOTER_MAGIC {
            return Err(FormatError::corrupt(
                at,
                "footer magic missing: file truncated or not fully written",
            ));
        }
        if b[48..60].iter().any(|&x| x != 0) {
            return Err(FormatError::corrupt(
                at + 48,
                "reserved footer bytes are not zero",
            ));
        }
        Ok(Footer {
            index_offset: u64_at(b, 8),
            run_count: u64_at(b, 16),
            page_count: u64_at(b, 24),
            file_length: u64_at(b, 32),
            frame_count: u64_at(b, 40),
            meta_crc: u32_at(b, 60),
        })
    }
}
