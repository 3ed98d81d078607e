//! Sample data shared by the format tests.
#![allow(dead_code)]

use ickpt_format::{
    CommitMode, CommitStats, FlushOrder, Kind, NewVersion, RegionEntry, StoredPhases, StoredPrecopy,
};

pub const PS: usize = 4096;
pub const STORE: [u8; 16] = *b"sample-store-id!";

/// Header fields of version 1, full, of the sample store.
pub fn full_version() -> NewVersion {
    NewVersion {
        kind: Kind::Full,
        page_size: PS as u32,
        version: 1,
        parent: 0,
        chain_depth: 0,
        parent_meta_crc: 0,
        tag: 0,
        store_id: STORE,
        created_unix_ns: 1234,
    }
}

/// Header fields of version `version`, an increment of `version - 1` at depth `depth`.
pub fn increment(version: u64, depth: u32, parent_meta_crc: u32) -> NewVersion {
    NewVersion {
        kind: Kind::Incremental,
        version,
        parent: version - 1,
        chain_depth: depth,
        parent_meta_crc,
        tag: 0,
        ..full_version()
    }
}

/// Two regions: a page-aligned one of two pages, and 100 bytes 17 bytes into a page, born in
/// version `second_born`.
pub fn two_regions(second_born: u64) -> Vec<RegionEntry> {
    vec![
        RegionEntry {
            id: 3,
            born: 1,
            length: (2 * PS) as u64,
            page_offset: 0,
        },
        RegionEntry {
            id: 9,
            born: second_born,
            length: 100,
            page_offset: 17,
        },
    ]
}

/// Non-zero in every field, so a flipped byte of the block is never a flip of a default.
pub fn busy_stats() -> CommitStats {
    CommitStats {
        mode: CommitMode::Async,
        flush_order: FlushOrder::Adaptive,
        backend: 2,
        commit_ns: 1_200_000_000,
        wait_ns: 35_000_000,
        peak_cow_bytes: 12 * PS as u64,
        cow_limit_bytes: 256 * PS as u64,
        cow_pages: 12,
        wait_pages: 4,
        avoided_pages: 40,
        after_previous: 9,
        previous_version: 6,
        phases: StoredPhases {
            collect_ns: 1_100_000,
            copy_ns: 20_000_000,
            crc_ns: 3_000_000,
            release_ns: 400_000,
            write_ns: 90_000_000,
            attempts: 2,
        },
        precopy: StoredPrecopy {
            strategy: 3,
            pages: 70,
            conflicts: 5,
            copies: 81,
            rewritten_bytes: 16 * PS as u64,
        },
    }
}

/// Recompute `f`'s `meta_crc` after a test changed bytes it covers.
#[allow(dead_code)]
pub fn reseal(f: &mut [u8]) {
    let data_offset = u64::from_le_bytes(f[48..56].try_into().unwrap()) as usize;
    let footer_at = f.len() - ickpt_format::FOOTER_LEN;
    let index_offset =
        u64::from_le_bytes(f[footer_at + 8..footer_at + 16].try_into().unwrap()) as usize;
    let c = ickpt_format::crc_append(
        ickpt_format::crc(&f[..data_offset]),
        &f[index_offset..f.len() - 4],
    );
    let n = f.len();
    f[n - 4..].copy_from_slice(&c.to_le_bytes());
}

/// Flip the low and the high bit of every byte of `f` in turn: `check` must fail on each.
#[allow(dead_code)]
pub fn every_flip_is_detected<E>(f: &[u8], check: impl Fn(&[u8]) -> Result<(), E>) {
    for at in 0..f.len() {
        for bit in [0x01u8, 0x80] {
            let mut g = f.to_vec();
            g[at] ^= bit;
            assert!(
                check(&g).is_err(),
                "flipping bit {bit:#x} at offset {at} went unnoticed"
            );
        }
    }
}
