//! Every byte of a version file is covered by a check: flipping any one of them makes the
//! file fail `read_meta` or `verify_data`, never yield different pages silently.

use ickpt_format::{
    limits, read_meta, verify_data, RegionEntry, VersionLayout, FORMAT_VERSION, HEADER_LEN,
    STATS_LEN,
};

mod common;
use common::{busy_stats as sample_stats, increment, two_regions, PS, STORE};

fn small_version() -> Vec<u8> {
    let regions = two_regions(2);
    let mut l = VersionLayout::new(increment(2, 1, 0xC0FFEE), regions);
    let mut data = Vec::new();
    for (region, page, fill) in [(0u32, 1u64, 0xA1u8), (1, 0, 0xB2)] {
        let page_bytes: Vec<u8> = (0..PS).map(|i| fill ^ (i as u8)).collect();
        l.push_page(region, page, ickpt_format::crc(&page_bytes));
        data.extend_from_slice(&page_bytes);
    }
    l.set_stats(sample_stats());
    let mut file = l.prefix();
    file.extend_from_slice(&data);
    file.extend_from_slice(&l.trailer());
    file
}

fn check(file: &[u8]) -> Result<(), String> {
    let meta = read_meta(&file, file.len() as u64).map_err(|e| e.to_string())?;
    verify_data(&meta, &file, &mut |_, _| {}).map_err(|e| e.to_string())
}

#[test]
fn intact_file_passes_and_reads_back() {
    let f = small_version();
    check(&f).unwrap();
    let m = read_meta(&f, f.len() as u64).unwrap();
    assert_eq!(m.header.version, 2);
    assert_eq!(m.runs.len(), 2);
    assert_eq!(m.runs[0].first_page, 1);
    assert_eq!(m.region_by_id(9).unwrap().1.page_offset, 17);
    assert_eq!(m.header.format_version, FORMAT_VERSION);
    assert_eq!(m.header.store_id, Some(STORE));
    assert_eq!(m.header.parent_meta_crc, 0xC0FFEE);
    assert_eq!(
        &f[64..80],
        &STORE,
        "the identity follows the v2 header fields"
    );
    assert_eq!(m.header.byte_len(), HEADER_LEN);
    assert_eq!(m.stats, Some(sample_stats()));
    // The block sits between the page-CRC table and the footer.
    let stats_at = m.footer.index_offset as usize + 2 * 24 + 2 * 4;
    assert_eq!(stats_at + STATS_LEN, f.len() - 64);
    assert_eq!(
        &f[stats_at..stats_at + STATS_LEN],
        &sample_stats().encode()[..]
    );
}

#[test]
fn flipping_any_byte_is_detected() {
    let f = small_version();
    common::every_flip_is_detected(&f, check);
}

#[test]
fn truncation_and_extension_are_detected() {
    let f = small_version();
    for len in [0, 1, 63, 64, 4096, f.len() / 2, f.len() - 64, f.len() - 1] {
        let err = check(&f[..len]).unwrap_err();
        assert!(!err.is_empty());
    }
    let mut longer = f.clone();
    longer.extend_from_slice(&[0; 4096]);
    assert!(check(&longer).is_err());
}

#[test]
fn errors_name_an_offset() {
    let mut f = small_version();
    let data_at = 4096 + 10; // inside the first stored page
    f[data_at] ^= 1;
    let meta = read_meta(&f, f.len() as u64).unwrap();
    let e = verify_data(&meta, &f, &mut |_, _| {}).unwrap_err();
    assert_eq!(e.offset(), Some(4096));
    assert!(e.to_string().contains("page 1 of region 3"), "{e}");
}

/// An incremental version storing one page of a region that claims `length` bytes.
fn one_page_of(length: u64, page: u64) -> Vec<u8> {
    let regions = vec![RegionEntry {
        id: 1,
        born: 1,
        length,
        page_offset: 0,
    }];
    let mut l = VersionLayout::new(increment(2, 1, 0), regions);
    let data = vec![7u8; PS];
    l.push_page(0, page, ickpt_format::crc(&data));
    let mut f = l.prefix();
    f.extend_from_slice(&data);
    f.extend_from_slice(&l.trailer());
    f
}

#[test]
fn a_region_larger_than_a_version_can_hold_is_rejected() {
    // Outside testing: a region of 2^56 bytes in an increment (which need not store it
    // whole) made a restore allocate terabytes. A region must fit the version that stores
    // it whole, so the reader refuses it before anything is sized by it.
    let f = one_page_of(1 << 56, 0);
    let e = read_meta(&f, f.len() as u64).unwrap_err();
    assert!(e.to_string().contains("implausible region length"), "{e}");
    assert_eq!(e.offset(), Some((HEADER_LEN + 16) as u64));
}

#[test]
fn the_largest_region_and_its_last_page_read_without_allocating_per_page() {
    let pages = limits::MAX_PAGES;
    let f = one_page_of(pages * PS as u64, pages - 1);
    let m = read_meta(&f, f.len() as u64).unwrap();
    assert_eq!(m.runs[0].first_page, pages - 1);
    verify_data(&m, &f, &mut |_, _| {}).unwrap();
}

#[test]
fn a_page_stored_twice_is_rejected() {
    let regions = vec![RegionEntry {
        id: 1,
        born: 1,
        length: (4 * PS) as u64,
        page_offset: 0,
    }];
    let mut l = VersionLayout::new(increment(2, 1, 0), regions);
    let page = vec![1u8; PS];
    for p in [2u64, 0, 2] {
        l.push_page(0, p, ickpt_format::crc(&page));
    }
    let mut f = l.prefix();
    for _ in 0..3 {
        f.extend_from_slice(&page);
    }
    f.extend_from_slice(&l.trailer());
    let e = read_meta(&f, f.len() as u64).unwrap_err();
    assert!(e.to_string().contains("stored twice"), "{e}");
}
