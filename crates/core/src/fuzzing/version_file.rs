//! The `read_meta` and `read_meta_resealed` targets: one version file read as the catalog
//! reads it, which when accepted must be exactly what docs/FORMAT.md describes.

use super::{reseal, Sealed};
use ickpt_format::{
    crc, crc_append, header_len_for, limits, read_meta, verify_data, FormatError, Kind, PageView,
    ReadAt, VersionMeta, FOOTER_LEN, FRAME_ENTRY_LEN, REGION_ENTRY_LEN, RUN_ENTRY_LEN,
};
use std::collections::HashSet;

/// Target `read_meta`: the bytes are a version file as found on disk.
pub fn read_meta_target(data: &[u8]) {
    check_file(data, Sealed::default());
}

/// Target `read_meta_resealed`: the bytes are a version file whose checksums are
/// recomputed before it is read ([`reseal`]). `meta_crc` is overwritten, so its bytes carry
/// the one choice: page CRCs are recomputed too when the file's last byte is odd.
pub fn read_meta_resealed_target(data: &[u8]) {
    let mut f = data.to_vec();
    let pages = f.last().is_some_and(|b| b & 1 == 1);
    let sealed = reseal(&mut f, pages);
    check_file(&f, sealed);
}

/// Read `f` as a version file; when it passes, it must be exactly what the format describes,
/// and `verify_data` must accept it exactly when every page matches its CRC.
fn check_file(f: &[u8], sealed: Sealed) {
    let len = f.len() as u64;
    let meta = match read_meta(&f, len) {
        Ok(meta) => meta,
        Err(e) => {
            // The reseal covered the very ranges the reader checks, so the checksum cannot
            // be what failed; if it is, the two disagree on where metadata lies.
            if sealed.meta {
                assert!(
                    !matches!(e, FormatError::Corrupt { offset, .. } if offset == len - 4),
                    "resealed file still fails its metadata checksum: {e}"
                );
            }
            return;
        }
    };
    check_canonical(&meta, f);
    let ps = meta.page_size() as usize;
    let view = PageView::new(&meta, &f);
    let mut page = vec![0u8; ps];
    let pages_match = meta.runs_with_crcs().all(|(run, crcs)| {
        crcs.iter().enumerate().all(|(i, &c)| {
            let at = run.data_offset + (i * ps) as u64;
            view.read_exact_at(&mut page, at).is_ok() && crc(&page) == c
        })
    });
    let mut last = 0;
    let verified = verify_data(&meta, &f, &mut |done, total| {
        assert!(
            last <= done && done <= total,
            "progress {last} -> {done} of {total}"
        );
        last = done;
    });
    assert_eq!(
        verified.is_ok(),
        pages_match,
        "verify_data says {verified:?}, the pages say {pages_match}"
    );
    assert!(verified.is_err() || last == meta.data_bytes());
    assert!(
        !sealed.pages || pages_match,
        "resealed pages fail their CRCs"
    );
}

/// A file `read_meta` accepted encodes back to its own bytes, part by part, and obeys every
/// rule of docs/FORMAT.md: no byte is ignored, no rule skipped.
fn check_canonical(m: &VersionMeta, f: &[u8]) {
    let h = &m.header;
    let ps = h.page_size as u64;
    let hl = h.byte_len();
    assert_eq!(hl, header_len_for(h.format_version));
    assert_eq!(h.encode(), f[..hl], "header");
    assert!((1..=ickpt_format::FORMAT_VERSION).contains(&h.format_version));
    assert!(ps.is_power_of_two());
    assert!((limits::MIN_PAGE_SIZE..=limits::MAX_PAGE_SIZE).contains(&h.page_size));
    assert!((1..=limits::MAX_VERSION).contains(&h.version));
    assert_eq!(h.store_id.is_some(), h.format_version >= 3);
    match h.kind {
        Kind::Full => assert!(h.parent == 0 && h.chain_depth == 0 && h.parent_meta_crc == 0),
        Kind::Incremental => assert!(h.parent >= 1 && h.parent < h.version && h.chain_depth >= 1),
    }
    assert!(h.region_count <= limits::MAX_REGIONS);
    assert_eq!(m.regions.len(), h.region_count as usize);
    let table_end = hl + m.regions.len() * REGION_ENTRY_LEN;
    assert_eq!(h.data_offset, (table_end as u64).div_ceil(ps) * ps);
    let data_offset = h.data_offset as usize;

    let mut ids = HashSet::new();
    for (i, r) in m.regions.iter().enumerate() {
        let at = hl + i * REGION_ENTRY_LEN;
        assert_eq!(r.encode(), f[at..at + REGION_ENTRY_LEN], "region {i}");
        assert!(ids.insert(r.id), "region id {} twice", r.id);
        assert!((1..=h.version).contains(&r.born));
        assert!(r.length >= 1 && r.page_offset < h.page_size);
        let pages = r.page_count(h.page_size);
        assert!(pages <= limits::MAX_PAGES);
        // Wide enough that no sum wraps: the pages must really cover the region.
        let end = r.page_offset as u128 + r.length as u128;
        assert!(pages as u128 * ps as u128 >= end && (pages as u128 - 1) * (ps as u128) < end);
    }
    assert!(f[table_end..data_offset].iter().all(|&b| b == 0), "padding");

    let ft = &m.footer;
    let footer_at = f.len() - FOOTER_LEN;
    assert_eq!(ft.file_length, f.len() as u64);
    assert_eq!(ft.encode_without_crc(), f[footer_at..f.len() - 4], "footer");
    assert_eq!(ft.meta_crc.to_le_bytes(), f[f.len() - 4..]);
    let index_offset = ft.index_offset as usize;
    let computed = crc_append(crc(&f[..data_offset]), &f[index_offset..f.len() - 4]);
    assert_eq!(computed, ft.meta_crc, "meta_crc");
    assert_eq!(m.stored_bytes(), ft.index_offset - h.data_offset);
    if m.frames.is_empty() {
        assert_eq!(m.data_bytes(), m.stored_bytes());
    }
    assert!(ft.page_count <= limits::MAX_PAGES && ft.run_count <= ft.page_count);

    let mut at = index_offset;
    let mut next = h.data_offset;
    let mut stored = vec![0u64; m.regions.len()];
    let mut pages = HashSet::new();
    assert_eq!(m.runs.len() as u64, ft.run_count);
    for (run, crcs) in m.runs_with_crcs() {
        assert_eq!(run.encode(), f[at..at + RUN_ENTRY_LEN], "run at {at}");
        at += RUN_ENTRY_LEN;
        assert_eq!(run.data_offset, next, "runs tile the data section");
        assert_eq!(crcs.len(), run.page_count as usize);
        let r = &m.regions[run.region_index as usize];
        assert!(run.page_count >= 1);
        assert!(run.first_page + run.page_count as u64 <= r.page_count(h.page_size));
        for p in run.first_page..run.first_page + run.page_count as u64 {
            assert!(pages.insert((run.region_index, p)), "page {p} stored twice");
        }
        stored[run.region_index as usize] += run.page_count as u64;
        next += run.page_count as u64 * ps;
    }
    assert_eq!(next, h.data_offset + m.data_bytes(), "runs fill the pages");
    assert_eq!(m.page_crcs.len() as u64, ft.page_count);
    for c in &m.page_crcs {
        assert_eq!(c.to_le_bytes(), f[at..at + 4]);
        at += 4;
    }
    assert_eq!(m.frames.len() as u64, ft.frame_count);
    assert!(m.frames.is_empty() || ickpt_format::has_frames(h.format_version));
    let (mut page, mut offset) = (0u64, h.data_offset);
    for p in &m.frames {
        assert_eq!(
            p.frame.encode(),
            f[at..at + FRAME_ENTRY_LEN],
            "frame at {at}"
        );
        at += FRAME_ENTRY_LEN;
        assert_eq!((p.first_page, p.offset), (page, offset), "frames tile");
        assert!(p.frame.page_count >= 1);
        assert!(p.frame.raw_len(h.page_size) <= limits::MAX_FRAME_BYTES);
        page += p.frame.page_count as u64;
        offset += p.frame.stored_len as u64;
    }
    if !m.frames.is_empty() {
        assert_eq!(
            (page, offset),
            (ft.page_count, ft.index_offset),
            "frames fill"
        );
    }
    for (r, n) in m.regions.iter().zip(stored) {
        if h.kind == Kind::Full || r.born == h.version {
            assert_eq!(n, r.page_count(h.page_size), "region {} stored whole", r.id);
        }
    }
    match &m.stats {
        Some(s) => {
            assert!(h.format_version >= 2);
            let len = ickpt_format::stats_len_for(h.format_version);
            assert_eq!(s.encode()[..len], f[at..at + len], "commit stats");
            at += len;
        }
        None => assert_eq!(h.format_version, 1),
    }
    assert_eq!(at, footer_at, "nothing between the trailer and the footer");
}
