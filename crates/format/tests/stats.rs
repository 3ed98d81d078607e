//! The commit-stats block (format version 2 on; `previous_version` from 3, the phases from
//! 4), and files of versions 1, 2 and 3 still reading.

use ickpt_format::{
    backend_code, backend_name, crc, crc_append, read_meta, verify_data, CommitMode, CommitStats,
    FlushOrder, Footer, FormatError, Header, Kind, RegionEntry, Run, StoredPhases, StoredPrecopy,
    VersionLayout, FOOTER_LEN, FORMAT_VERSION, HEADER_LEN, HEADER_LEN_V1, STATS_LEN, STATS_LEN_V2,
};
use proptest::prelude::*;

mod common;
use common::{busy_stats, full_version, reseal, two_regions, PS};

fn regions() -> Vec<RegionEntry> {
    two_regions(1)
}

/// (region index, page, fill) of every page a full version of `regions()` stores.
const PAGES: [(u32, u64, u8); 3] = [(0, 0, 0x11), (0, 1, 0x22), (1, 0, 0x33)];

fn page(fill: u8) -> Vec<u8> {
    (0..PS).map(|i| fill ^ (i as u8)).collect()
}

/// A version in an older format (1, 2 or 3), encoded the way ickpt wrote it then: formats 1
/// and 2 have a 64-byte header with no store identity or parent checksum; format 1 has no
/// stats block, so its trailer is the run index, the page-CRC table and the footer; formats
/// 2 and 3 have an 80-byte block without the phases.
fn legacy_file(format_version: u16, stats: CommitStats) -> Vec<u8> {
    assert!((1..=3).contains(&format_version));
    let regions = regions();
    let header = Header {
        format_version,
        kind: Kind::Full,
        page_size: PS as u32,
        version: 1,
        parent: 0,
        chain_depth: 0,
        region_count: regions.len() as u32,
        created_unix_ns: 1234,
        data_offset: Header::data_offset_for(format_version, regions.len() as u32, PS as u32),
        store_id: (format_version >= 3).then_some([7; 16]),
        parent_meta_crc: 0,
        tag: 0,
    };
    let mut f = header.encode();
    let header_len = if format_version >= 3 {
        HEADER_LEN
    } else {
        HEADER_LEN_V1
    };
    assert_eq!(f.len(), header_len);
    for r in &regions {
        f.extend_from_slice(&r.encode());
    }
    f.resize(header.data_offset as usize, 0);
    let prefix_len = f.len();
    let mut runs: Vec<Run> = Vec::new();
    let mut crcs = Vec::new();
    for (region_index, p, fill) in PAGES {
        let data_offset = f.len() as u64;
        match runs.last_mut() {
            Some(r)
                if r.region_index == region_index && r.first_page + r.page_count as u64 == p =>
            {
                r.page_count += 1
            }
            _ => runs.push(Run {
                region_index,
                page_count: 1,
                first_page: p,
                data_offset,
            }),
        }
        let bytes = page(fill);
        crcs.push(crc(&bytes));
        f.extend_from_slice(&bytes);
    }
    let index_offset = f.len() as u64;
    let mut trailer = Vec::new();
    for r in &runs {
        trailer.extend_from_slice(&r.encode());
    }
    for c in &crcs {
        trailer.extend_from_slice(&c.to_le_bytes());
    }
    if format_version >= 2 {
        trailer.extend_from_slice(&stats.encode()[..STATS_LEN_V2]);
    }
    let footer = Footer {
        index_offset,
        run_count: runs.len() as u64,
        page_count: crcs.len() as u64,
        file_length: index_offset + trailer.len() as u64 + FOOTER_LEN as u64,
        frame_count: 0,
        meta_crc: 0,
    };
    trailer.extend_from_slice(&footer.encode_without_crc());
    let meta_crc = crc_append(crc(&f[..prefix_len]), &trailer);
    trailer.extend_from_slice(&meta_crc.to_le_bytes());
    f.extend_from_slice(&trailer);
    f
}

fn v1_file() -> Vec<u8> {
    legacy_file(1, CommitStats::default())
}

/// Format 2's stats block had no `previous_version` (bytes 72..80 were reserved) and no
/// phases.
fn v2_stats() -> CommitStats {
    CommitStats {
        previous_version: 0,
        ..v3_stats()
    }
}

/// Format 3's stats block had no phases.
fn v3_stats() -> CommitStats {
    CommitStats {
        phases: StoredPhases::default(),
        ..v6_stats()
    }
}

/// Formats 4 to 6 had no pre-copy figures.
fn v6_stats() -> CommitStats {
    CommitStats {
        precopy: StoredPrecopy::default(),
        ..busy_stats()
    }
}

/// The same version written by this crate's writer (the current format) with `stats`.
fn current_file(stats: CommitStats) -> Vec<u8> {
    let mut l = VersionLayout::new(full_version(), regions());
    let mut data = Vec::new();
    for (region_index, p, fill) in PAGES {
        let bytes = page(fill);
        l.push_page(region_index, p, crc(&bytes));
        data.extend_from_slice(&bytes);
    }
    l.set_stats(stats);
    let mut f = l.prefix();
    f.extend_from_slice(&data);
    f.extend_from_slice(&l.trailer());
    f
}

/// Recompute meta_crc after editing metadata, so only the check under test can object.
/// Where the stats block of `f`, a file of the current format, starts.
fn stats_offset(f: &[u8]) -> usize {
    stats_offset_v(f, FORMAT_VERSION)
}

fn stats_offset_v(f: &[u8], format_version: u16) -> usize {
    f.len() - FOOTER_LEN - ickpt_format::stats_len_for(format_version)
}

fn arb_stats() -> impl Strategy<Value = CommitStats> {
    let phases = (any::<[u64; 5]>(), any::<u8>()).prop_map(|(p, attempts)| StoredPhases {
        collect_ns: p[0],
        copy_ns: p[1],
        crc_ns: p[2],
        release_ns: p[3],
        write_ns: p[4],
        attempts,
    });
    let precopy = (0u8..4, any::<[u64; 4]>()).prop_map(|(strategy, p)| StoredPrecopy {
        strategy,
        pages: p[0],
        conflicts: p[1],
        copies: p[2],
        rewritten_bytes: p[3],
    });
    (
        any::<bool>(),
        any::<bool>(),
        0u8..4,
        any::<[u64; 9]>(),
        phases,
        precopy,
    )
        .prop_map(|(a, ad, backend, v, phases, precopy)| CommitStats {
            mode: if a {
                CommitMode::Async
            } else {
                CommitMode::Sync
            },
            flush_order: if ad {
                FlushOrder::Adaptive
            } else {
                FlushOrder::Address
            },
            backend,
            commit_ns: v[0],
            wait_ns: v[1],
            peak_cow_bytes: v[2],
            cow_limit_bytes: v[3],
            cow_pages: v[4],
            wait_pages: v[5],
            avoided_pages: v[6],
            after_previous: v[7],
            previous_version: v[8],
            phases,
            precopy,
        })
}

proptest! {
    #[test]
    fn stats_round_trip(s in arb_stats()) {
        let b = s.encode();
        prop_assert_eq!(CommitStats::decode(&b, 0, FORMAT_VERSION).unwrap(), s);
    }
}

#[test]
fn stats_round_trip_through_a_file() {
    let f = current_file(busy_stats());
    let m = read_meta(&f, f.len() as u64).unwrap();
    assert_eq!(m.header.format_version, FORMAT_VERSION);
    assert_eq!(m.stats, Some(busy_stats()));
    verify_data(&m, &f, &mut |_, _| {}).unwrap();
}

#[test]
fn a_v3_file_reads_with_its_stats_and_no_phases() {
    let f = legacy_file(3, v3_stats());
    let m = read_meta(&f, f.len() as u64).unwrap();
    assert_eq!(m.header.format_version, 3);
    assert_eq!(m.header.store_id, Some([7; 16]));
    assert_eq!(m.stats, Some(v3_stats()));
    assert_eq!(m.stats.unwrap().phases.attempts, 0, "phases unrecorded");
    verify_data(&m, &f, &mut |_, _| {}).unwrap();
    // The same version in format 4 is the phases' 48 bytes longer.
    assert_eq!(
        current_file(v3_stats()).len(),
        f.len() + STATS_LEN - STATS_LEN_V2
    );
}

#[test]
fn a_v2_file_reads_with_its_stats() {
    let f = legacy_file(2, v2_stats());
    let m = read_meta(&f, f.len() as u64).unwrap();
    assert_eq!(m.header.format_version, 2);
    assert_eq!(m.header.store_id, None);
    assert_eq!(m.header.parent_meta_crc, 0);
    assert_eq!(m.stats, Some(v2_stats()));
    verify_data(&m, &f, &mut |_, _| {}).unwrap();
    // In format 2, the bytes format 3 gives to previous_version were reserved.
    let mut g = f.clone();
    let at = stats_offset_v(&g, 2) + 72;
    g[at] = 1;
    reseal(&mut g);
    let e = read_meta(&g, g.len() as u64).unwrap_err();
    assert_eq!(e.offset(), Some(at as u64), "{e}");
}

#[test]
fn default_stats_are_sync_address_unknown_and_encode_to_zeros() {
    let d = CommitStats::default();
    assert_eq!(d.mode, CommitMode::Sync);
    assert_eq!(d.flush_order, FlushOrder::Address);
    assert_eq!(backend_name(d.backend), "unknown");
    assert_eq!(d.encode(), [0u8; STATS_LEN]);
    // A layout nobody set stats on writes the default.
    let l = VersionLayout::new(full_version(), vec![]);
    let mut f = l.prefix();
    f.extend_from_slice(&l.trailer());
    assert_eq!(
        read_meta(&f, f.len() as u64).unwrap().stats,
        Some(CommitStats::default())
    );
}

#[test]
fn names_and_codes() {
    for (code, name) in [
        (0, "unknown"),
        (1, "mprotect"),
        (2, "uffd"),
        (3, "uffd-async"),
    ] {
        assert_eq!(backend_name(code), name);
        assert_eq!(backend_code(name), code);
    }
    assert_eq!(backend_code("auto"), 0);
    assert_eq!(backend_name(200), "unknown");
    for m in [CommitMode::Sync, CommitMode::Async] {
        assert_eq!(CommitMode::parse(m.as_str()), Some(m));
    }
    for o in [FlushOrder::Address, FlushOrder::Adaptive] {
        assert_eq!(FlushOrder::parse(o.as_str()), Some(o));
    }
    assert_eq!(CommitMode::parse("Sync"), None);
    assert_eq!(FlushOrder::parse(""), None);
}

#[test]
fn unknown_codes_and_reserved_bytes_are_rejected_with_their_offset() {
    let good = busy_stats().encode();
    for (byte, value, what) in [
        (0usize, 2u8, "commit mode"),
        (1, 2, "flush order"),
        (2, 4, "backend"),
        (2, 0xff, "backend"),
        (3, 1, "reserved"),
        (7, 0x80, "reserved"),
        (121, 4, "pre-copy strategy"),
        (122, 1, "reserved"),
        (127, 0x80, "reserved"),
    ] {
        let mut b = good;
        b[byte] = value;
        let e = CommitStats::decode(&b, 1000, FORMAT_VERSION).unwrap_err();
        assert_eq!(e.offset(), Some(1000 + byte as u64), "{e}");
        assert!(e.to_string().contains(what), "{e}");

        // The same in a file whose checksum is right: read_meta names the file offset.
        let mut f = current_file(busy_stats());
        let at = stats_offset(&f);
        f[at + byte] = value;
        reseal(&mut f);
        let e = read_meta(&f, f.len() as u64).unwrap_err();
        assert!(matches!(e, FormatError::Corrupt { .. }), "{e}");
        assert_eq!(e.offset(), Some((at + byte) as u64), "{e}");
    }
}

#[test]
fn a_v1_file_reads_with_no_stats() {
    let f = v1_file();
    let m = read_meta(&f, f.len() as u64).unwrap();
    assert_eq!(m.header.format_version, 1);
    assert_eq!(m.stats, None);
    assert_eq!(m.runs.len(), 2);
    assert_eq!(m.page_crcs.len(), 3);
    verify_data(&m, &f, &mut |_, _| {}).unwrap();
    // v1 is the v2 file minus the block, with the older version number.
    let v2 = legacy_file(2, CommitStats::default());
    assert_eq!(v2.len(), f.len() + STATS_LEN_V2);
}

// One test a format version, not one for all three: each flips every byte of a file, which
// takes seconds, and the test threads then share them out (24 s in a row on 2 cores).
#[test]
fn every_flipped_byte_of_a_v1_file_is_detected() {
    every_flip_detected(&v1_file());
}

#[test]
fn every_flipped_byte_of_a_v2_file_is_detected() {
    every_flip_detected(&legacy_file(2, v2_stats()));
}

#[test]
fn every_flipped_byte_of_a_v3_file_is_detected() {
    every_flip_detected(&legacy_file(3, v3_stats()));
}

fn every_flip_detected(f: &[u8]) {
    for at in 0..f.len() {
        for bit in [0x01u8, 0x80] {
            let mut g = f.to_vec();
            g[at] ^= bit;
            let r = read_meta(&g, g.len() as u64).and_then(|m| verify_data(&m, &g, &mut |_, _| {}));
            assert!(
                r.is_err(),
                "flipping bit {bit:#x} at offset {at} went unnoticed"
            );
        }
    }
}

#[test]
fn the_block_must_match_the_format_version() {
    // A v2 file relabelled v1 has 80 bytes the v1 trailer rule does not allow.
    let mut f = legacy_file(2, v2_stats());
    f[8..10].copy_from_slice(&1u16.to_le_bytes());
    reseal(&mut f);
    let e = read_meta(&f, f.len() as u64).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");

    // A v1 file relabelled v2 lacks the block.
    let mut f = v1_file();
    f[8..10].copy_from_slice(&2u16.to_le_bytes());
    reseal(&mut f);
    let e = read_meta(&f, f.len() as u64).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");

    // A v2 file relabelled v3 lacks the longer header's fields: its region table sits where
    // the v3 header's store identity is, and its data offset does not follow.
    let mut f = legacy_file(2, v2_stats());
    f[8..10].copy_from_slice(&3u16.to_le_bytes());
    reseal(&mut f);
    assert!(read_meta(&f, f.len() as u64).is_err());

    // A v3 file relabelled v4 lacks the phases' bytes, and the reverse has 48 too many.
    let mut f = legacy_file(3, v3_stats());
    f[8..10].copy_from_slice(&4u16.to_le_bytes());
    reseal(&mut f);
    let e = read_meta(&f, f.len() as u64).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    let mut f = current_file(busy_stats());
    f[8..10].copy_from_slice(&3u16.to_le_bytes());
    reseal(&mut f);
    let e = read_meta(&f, f.len() as u64).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");

    // A v4 file has no tag: bytes 56..64 are reserved there.
    let mut f = current_file(busy_stats());
    f[8..10].copy_from_slice(&4u16.to_le_bytes());
    f[60] = 1;
    reseal(&mut f);
    let e = read_meta(&f, f.len() as u64).unwrap_err();
    assert!(e.to_string().contains("reserved header bytes"), "{e}");

    // A v5 file has no frame table: footer bytes 40..48 are reserved there.
    let mut f = current_file(busy_stats());
    f[8..10].copy_from_slice(&5u16.to_le_bytes());
    let n = f.len();
    f[n - 64 + 40] = 1;
    reseal(&mut f);
    let e = read_meta(&f, f.len() as u64).unwrap_err();
    assert!(e.to_string().contains("reserved footer bytes"), "{e}");

    // A v7 file relabelled v6 has the pre-copy figures' 32 bytes too many.
    let mut f = current_file(busy_stats());
    f[8..10].copy_from_slice(&6u16.to_le_bytes());
    reseal(&mut f);
    let e = read_meta(&f, f.len() as u64).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");

    // Version 8 is from the future.
    let mut f = current_file(busy_stats());
    f[8..10].copy_from_slice(&8u16.to_le_bytes());
    reseal(&mut f);
    let e = read_meta(&f, f.len() as u64).unwrap_err();
    assert!(
        matches!(
            e,
            FormatError::UnsupportedVersion {
                found: 8,
                supported: 7
            }
        ),
        "{e}"
    );
}

#[test]
fn a_tag_is_read_back_as_written() {
    for tag in [0, 1, 0x0123_4567_89AB_CDEF, u64::MAX] {
        let mut v = full_version();
        v.tag = tag;
        let mut l = VersionLayout::new(v, regions());
        let mut data = Vec::new();
        for (region_index, p, fill) in PAGES {
            let bytes = page(fill);
            l.push_page(region_index, p, crc(&bytes));
            data.extend_from_slice(&bytes);
        }
        let mut f = l.prefix();
        f.extend_from_slice(&data);
        f.extend_from_slice(&l.trailer());
        let m = read_meta(&f, f.len() as u64).unwrap();
        assert_eq!(m.header.tag, tag);
        assert_eq!(m.header.format_version, FORMAT_VERSION);
    }
}
