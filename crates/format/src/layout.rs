//! Field-for-field mirror of the byte diagram in `docs/FORMAT.md`. All integers little-endian.

use crate::FormatError;

/// First 8 bytes of every version file. The high byte and CR LF catch 7-bit and
/// line-ending mangling, as PNG's signature does.
pub const MAGIC: [u8; 8] = *b"\x89ICKPT\r\n";
/// First 8 bytes of the footer, the last 64 bytes of the file.
pub const FOOTER_MAGIC: [u8; 8] = *b"ICKPTEND";
/// The format version this crate writes, and the newest it reads.
pub const FORMAT_VERSION: u16 = 2;

pub const HEADER_LEN: usize = 64;
pub const REGION_ENTRY_LEN: usize = 32;
pub const RUN_ENTRY_LEN: usize = 24;
pub const FOOTER_LEN: usize = 64;
pub const STATS_LEN: usize = 80;

/// Bytes of commit-stats block a file of `format_version` carries: v1 files have none.
pub(crate) fn stats_len_for(format_version: u16) -> usize {
    if format_version >= 2 {
        STATS_LEN
    } else {
        0
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
        }
    }
}

/// Bytes 0..64 of a version file.
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
    pub fn page_count(&self, page_size: u32) -> u64 {
        (self.page_offset as u64 + self.length).div_ceil(page_size as u64)
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

/// The last 64 bytes of a version file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Footer {
    pub index_offset: u64,
    pub run_count: u64,
    pub page_count: u64,
    pub file_length: u64,
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
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
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
        b
    }

    /// Decode and check every field that can be checked without the rest of the file.
    pub fn decode(b: &[u8]) -> Result<Header, FormatError> {
        if b.len() < HEADER_LEN {
            return Err(FormatError::corrupt(
                0,
                "file is shorter than the 64-byte header",
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
        let kind = match b[10] {
            0 => Kind::Full,
            1 => Kind::Incremental,
            k => return Err(FormatError::corrupt(10, format!("unknown kind {k}"))),
        };
        if b[11] != 0 || u64_at(b, 56) != 0 {
            return Err(FormatError::corrupt(
                11,
                "reserved header bytes are not zero",
            ));
        }
        let page_size = u32_at(b, 12);
        if !page_size.is_power_of_two() || !(512..=(1 << 30)).contains(&page_size) {
            return Err(FormatError::corrupt(
                12,
                format!("implausible page size {page_size}"),
            ));
        }
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
        };
        if h.version == 0 {
            return Err(FormatError::corrupt(16, "version number 0"));
        }
        match h.kind {
            Kind::Full if h.parent != 0 || h.chain_depth != 0 => {
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
        if h.data_offset != Self::data_offset_for(h.region_count, h.page_size) {
            return Err(FormatError::corrupt(
                48,
                "data offset does not follow the region table",
            ));
        }
        Ok(h)
    }

    /// The region table's end, rounded up to a page so page data is page-aligned in the file.
    pub fn data_offset_for(region_count: u32, page_size: u32) -> u64 {
        let end = (HEADER_LEN + region_count as usize * REGION_ENTRY_LEN) as u64;
        end.div_ceil(page_size as u64) * page_size as u64
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
        if r.length == 0 || r.length > (1u64 << 56) {
            return Err(FormatError::corrupt(at + 16, "implausible region length"));
        }
        if r.page_offset >= header.page_size {
            return Err(FormatError::corrupt(
                at + 24,
                "region page offset beyond a page",
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
        b
    }

    /// Decode the block that starts at file offset `at`.
    pub fn decode(b: &[u8], at: u64) -> Result<CommitStats, FormatError> {
        if b.len() < STATS_LEN {
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
        if let Some(i) = (3..8).chain(72..80).find(|&i| b[i] != 0) {
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
        b
    }

    pub fn decode(b: &[u8], at: u64) -> Result<Footer, FormatError> {
        if b[0..8] != FOOTER_MAGIC {
            return Err(FormatError::corrupt(
                at,
                "footer magic missing: file truncated or not fully written",
            ));
        }
        if b[40..60].iter().any(|&x| x != 0) {
            return Err(FormatError::corrupt(
                at + 40,
                "reserved footer bytes are not zero",
            ));
        }
        Ok(Footer {
            index_offset: u64_at(b, 8),
            run_count: u64_at(b, 16),
            page_count: u64_at(b, 24),
            file_length: u64_at(b, 32),
            meta_crc: u32_at(b, 60),
        })
    }
}
