//! The ickpt on-disk format, version 6 (reads versions 1 to 5 too): one self-describing file
//! per checkpoint version, and the small global-commit records of coordinated jobs.
//!
//! `docs/FORMAT.md` holds the byte diagram; the structs in [`layout`] mirror it field for field.
//! This crate only turns bytes into checked values and back. It never touches memory protection
//! and never trusts a length or offset before checking it against the file's size.
#![forbid(unsafe_code)]

pub mod delta;
mod delta_file;
mod error;
mod frames;
mod global;
pub mod layout;
mod reader;
mod verify;
mod writer;

pub use delta_file::{DeltaFile, MergeError, RegionDelta, DELTA_FORMAT, DELTA_MAGIC};
pub use error::FormatError;
pub use frames::{
    format_error_in, is_zero, is_zero_page, zero_page_crc, zero_where_not, Compress, FrameEncoder,
    PageView, Scratch,
};
pub use global::{
    global_name, numbered_name, parse_global_name, parse_numbered_name, GlobalRecord,
    GLOBAL_FORMAT, GLOBAL_MAGIC, GLOBAL_RECORD_LEN,
};
pub use layout::{
    backend_code, backend_name, has_frames, header_len_for, limits, stats_len_for, Codec,
    CommitMode, CommitStats, FlushOrder, Footer, Frame, Header, Kind, RegionEntry, Run,
    StoredPhases, StoredPrecopy, FOOTER_LEN, FOOTER_MAGIC, FORMAT_VERSION, FRAME_ENTRY_LEN,
    HEADER_LEN, HEADER_LEN_V1, MAGIC, PRECOPY_NAMES, REGION_ENTRY_LEN, RUN_ENTRY_LEN, STATS_LEN,
    STATS_LEN_V2, STATS_LEN_V4,
};
pub use reader::{read_each_piece, read_meta, Piece, PlacedFrame, ReadAt, VersionMeta};
pub use verify::{check_pages, page_damage, verify_data, PageDamage, VerifyProgress};
pub use writer::{NewVersion, VersionLayout};

/// CRC-32C (Castagnoli), hardware-accelerated where the CPU has it.
pub fn crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// Continue a CRC-32C over more bytes.
pub fn crc_append(crc: u32, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, bytes)
}
