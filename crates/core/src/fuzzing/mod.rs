//! The bodies of the fuzz targets. `fuzz/` (cargo-fuzz, nightly) calls them from libFuzzer,
//! and `tests/fuzz_corpus.rs` (stable, `make test`) replays the checked-in corpus through
//! them, so CI runs exactly what was fuzzed. Not API: no stability promise.
//!
//! Each takes arbitrary bytes. An error from the reader is a fine outcome; a panic is a
//! finding: either the reader broke (overflow, out-of-bounds slice, allocation abort) or a
//! property asserted here failed.

mod mem_store;
mod reseal;

pub use mem_store::MemStore;
pub use reseal::{reseal, Sealed};

use crate::read::catalog::{Catalog, OpenVersion};
use crate::read::reverse_scan::{reverse_scan, Sink};
use crate::store::{version_name, StoreId};
use ickpt_format::{
    crc, crc_append, header_len_for, limits, read_meta, verify_data, FormatError, GlobalRecord,
    Header, Kind, PageView, ReadAt, VersionMeta, FOOTER_LEN, FRAME_ENTRY_LEN, HEADER_LEN, MAGIC,
    REGION_ENTRY_LEN, RUN_ENTRY_LEN,
};
use std::collections::{BTreeMap, HashSet};

/// Target `global_record`: a flag byte, the number in the record's file name (8 bytes,
/// little-endian), then the record file. With the flag's low bit set the record's checksum is
/// recomputed first, so mutations reach the rules behind it. `GlobalRecord::decode` never
/// panics; a record it accepts encodes back to exactly its bytes and obeys docs/FORMAT.md.
pub fn global_record_target(data: &[u8]) {
    let Some((&flag, rest)) = data.split_first() else {
        return;
    };
    if rest.len() < 8 {
        return;
    }
    let (name, record) = rest.split_at(8);
    let global = u64::from_le_bytes(name.try_into().expect("8 bytes"));
    let mut bytes = record.to_vec();
    if flag & 1 == 1 && bytes.len() >= 60 {
        let c = crc(&bytes[..56]);
        bytes[56..60].copy_from_slice(&c.to_le_bytes());
    }
    if let Ok(r) = GlobalRecord::decode(&bytes, global) {
        assert_eq!(
            &r.encode()[..],
            &bytes[..],
            "an accepted record encodes to its bytes"
        );
        assert_eq!(r.global, global, "the record is the one its name says");
        assert!((1..=limits::MAX_VERSION).contains(&r.version));
    }
}

/// Target `delta_file`: a flag byte, then a delta file (a section save, what `ickpt_inject`
/// and `ickpt merge` read). With the flag's low bit set its trailer checksum is recomputed
/// first, so mutations reach the records. `DeltaFile::decode` never panics; a file it accepts
/// holds only words inside its regions, aligned and ascending, encodes to `encoded_len`
/// bytes, decodes back to itself, merges with itself into itself, and applies to memory of
/// its regions' lengths without a write outside them.
pub fn delta_file_target(data: &[u8]) {
    use ickpt_format::delta::{self, DeltaShape, WORD};
    use ickpt_format::DeltaFile;
    let Some((&flag, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if flag & 1 == 1 && bytes.len() >= 8 {
        let end = bytes.len() - 8;
        let c = crc(&bytes[..end]);
        bytes[end..end + 4].copy_from_slice(&c.to_le_bytes());
    }
    let Ok(d) = DeltaFile::decode(&bytes) else {
        return;
    };
    for r in &d.regions {
        let mut next = 0;
        for (off, _) in &r.words {
            assert!(
                *off >= next && off % WORD == 0 && *off < r.length,
                "a word outside region {}",
                r.id
            );
            next = off + WORD;
        }
        // Bounded: a region this large is a legal header, not memory to allocate here.
        if r.length <= 1 << 20 {
            let shape = DeltaShape {
                page_size: d.page_size,
                region_len: r.length,
            };
            let mut mem = vec![0u8; r.length as usize];
            delta::apply(&shape, &r.words, &mut mem);
        }
    }
    let again = d.encode();
    assert_eq!(
        again.len() as u64,
        d.encoded_len(),
        "encoded_len is encode's length"
    );
    assert!(
        DeltaFile::decode(&again).is_ok_and(|back| back == d),
        "decode(encode(d)) == d"
    );
    let twice = d.merge(&d).expect("a delta merges with itself");
    assert!(
        twice
            .regions
            .iter()
            .zip(&d.regions)
            .all(|(a, b)| a.words == b.words),
        "merging a delta with itself changes no word"
    );
}

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

/// How [`chain_restore_target`] builds its store, from the input's first byte (before the
/// first file). Zero, the default of an input that starts with a file, is the friendliest:
/// every checksum resealed, every file bound, the identity recorded, names from headers.
pub mod flag {
    /// Keep page CRCs as the input has them (meta_crc is resealed still).
    pub const KEEP_PAGE_CRCS: u8 = 1;
    /// Leave `store_id` and `parent_meta_crc` as they are instead of binding each file to
    /// the store and to the file its header names as parent.
    pub const UNBOUND: u8 = 2;
    /// Record no identity in the store: the catalog infers it from the files.
    pub const NO_IDENTITY: u8 = 4;
    /// Name the files v1, v2, … in input order instead of by the version their header
    /// claims, so names and contents can disagree.
    pub const NAME_BY_POSITION: u8 = 8;
    /// Restore only the regions at even positions of the newest version's table.
    pub const SOME_REGIONS: u8 = 16;
}

/// Most files one input makes: enough for chains, forks and strays.
const MAX_FILES: usize = 16;

/// Target `chain_restore`: the bytes are an optional flag byte ([`flag`]) followed by
/// version files, each starting with the file magic (real files concatenated are an
/// input). They become a store in memory, which the catalog surveys, verifies, chains and
/// restores from. The properties are the acceptance check's promises:
/// - `chain(v)` succeeds exactly when `survey` without page checks calls v restorable, and
///   the newest such v is `newest_restorable`;
/// - `survey` with page checks (`verify`) never calls restorable what it does not without;
/// - when `verify` calls v restorable, a reverse scan of `chain(v)` succeeds;
/// - a reverse scan that succeeds delivers each byte of each selected region exactly once,
///   inside the region, equal to the page the newest version of the chain holding it stored.
pub fn chain_restore_target(data: &[u8]) {
    let (store, flags) = input_store(data);
    check_store(&store, flags & flag::SOME_REGIONS != 0);
}

/// The store a [`chain_restore_target`] input stands for, and its flags.
pub fn input_store(data: &[u8]) -> (MemStore, u8) {
    let (flags, id, files) = store_files(data);
    let id = (flags & flag::NO_IDENTITY == 0).then_some(id);
    let files = files.into_iter().map(|(v, f)| (version_name(v), f));
    (MemStore::with_files(id, files), flags)
}

/// Split `data` at each file magic (the first [`MAX_FILES`] of them), name each piece, bind
/// and reseal it. Returns the flags, the store's identity (the first format-3 file's) and the
/// files by the version number they are named for; of two pieces for one number the later
/// wins.
fn store_files(data: &[u8]) -> (u8, StoreId, BTreeMap<u64, Vec<u8>>) {
    let mut starts: Vec<usize> = Vec::new();
    let mut at = 0;
    while starts.len() < MAX_FILES {
        match data[at..].windows(MAGIC.len()).position(|w| w == MAGIC) {
            Some(i) => {
                starts.push(at + i);
                at += i + MAGIC.len();
            }
            None => break,
        }
    }
    let flags = data[..starts.first().copied().unwrap_or(data.len())]
        .first()
        .copied()
        .unwrap_or(0);
    let mut files = BTreeMap::new();
    for (k, &s) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(data.len());
        let f = data[s..end].to_vec();
        let named = if flags & flag::NAME_BY_POSITION != 0 {
            k as u64 + 1
        } else if f.len() >= 24 {
            u64::from_le_bytes(f[16..24].try_into().expect("8 bytes"))
        } else {
            continue;
        };
        files.insert(named, f);
    }
    let bind = flags & flag::UNBOUND == 0;
    let pages = flags & flag::KEEP_PAGE_CRCS == 0;
    let id = files
        .values()
        .find_map(|f| store_id_of(f))
        .unwrap_or(StoreId(*b"fuzzed-store-id!"));
    // Ascending, so a parent (an older number) is sealed before the child records its CRC.
    let mut sealed_crc: BTreeMap<u64, u32> = BTreeMap::new();
    for (&v, f) in files.iter_mut() {
        if bind && store_id_of(f).is_some() {
            f[64..80].copy_from_slice(&id.0);
            if f[10] == 1 {
                let parent = u64::from_le_bytes(f[24..32].try_into().expect("8 bytes"));
                if let Some(c) = sealed_crc.get(&parent) {
                    f[80..84].copy_from_slice(&c.to_le_bytes());
                }
            }
        }
        reseal(f, pages);
        if f.len() >= 4 {
            let c = u32::from_le_bytes(f[f.len() - 4..].try_into().expect("4 bytes"));
            sealed_crc.insert(v, c);
        }
    }
    (flags, id, files)
}

/// The store identity a format-3 header carries, read as the catalog reads it: only when
/// the file is long enough to hold such a header.
fn store_id_of(f: &[u8]) -> Option<StoreId> {
    (f.len() >= HEADER_LEN && header_len_for(Header::peek_format_version(f)) == HEADER_LEN)
        .then(|| StoreId(f[64..80].try_into().expect("16 bytes")))
}

fn check_store(store: &MemStore, some_regions: bool) {
    let catalog = Catalog::new(store).expect("an in-memory store answers");
    let by_meta = catalog.survey().expect("an in-memory store lists");
    let mut last = 0;
    let report = crate::read::verify::verify_store(store, &mut |done, total| {
        assert!(
            last <= done && done <= total,
            "progress {last} -> {done} of {total}"
        );
        last = done;
    })
    .expect("an in-memory store lists");
    let view = report.restore_view();
    assert_eq!(
        by_meta.iter().map(|s| s.version).collect::<Vec<_>>(),
        view.versions
    );
    for m in &by_meta {
        let v = m.version;
        let verified = view.restorable.contains(&v);
        assert!(
            m.restorable() || !verified,
            "version {v}: verify passes what the metadata check refuses: {:?}",
            m.problem
        );
        match catalog.chain(v) {
            Err(e) => {
                assert!(
                    !m.restorable() && !verified,
                    "version {v}: chain fails ({e}) but survey calls it restorable"
                );
            }
            Ok(chain) => {
                assert!(
                    m.restorable(),
                    "version {v}: chain passes but survey says {:?}",
                    m.problem
                );
                restore(&catalog, &chain, verified, some_regions);
            }
        }
    }
    let newest = by_meta
        .iter()
        .rev()
        .find(|s| s.restorable())
        .map(|s| s.version);
    assert_eq!(catalog.newest_restorable().ok(), Some(newest));
}

/// Reverse-scan an accepted chain into a sink that checks where each byte lands.
fn restore(catalog: &Catalog<'_>, chain: &[OpenVersion], verified: bool, some_regions: bool) {
    let newest = &chain[0].meta;
    let v = chain[0].version;
    let ps = newest.page_size() as u64;
    // Each region of an accepted chain is stored whole by the version it was born in, so
    // what it claims is bounded by the files (and so is what this check allocates).
    let stored: u64 = chain.iter().map(|ov| ov.meta.data_bytes()).sum();
    let claimed: u64 = newest
        .regions
        .iter()
        .map(|r| r.page_count(ps as u32) * ps)
        .sum();
    assert!(
        claimed <= stored,
        "version {v}: accepted chain claims {claimed} bytes of regions, stores {stored}"
    );
    let selected = |i: usize| !some_regions || i % 2 == 0;
    let selected_ids: HashSet<u64> = newest
        .regions
        .iter()
        .enumerate()
        .filter_map(|(i, r)| selected(i).then_some(r.id))
        .collect();
    let mut got: Vec<Vec<Option<u8>>> = newest
        .regions
        .iter()
        .map(|r| vec![None; r.length as usize])
        .collect();
    let want = |r: &ickpt_format::RegionEntry| selected_ids.contains(&r.id);
    let mut sink = |i: usize, off: u64, bytes: &[u8]| -> Result<(), crate::ReadError> {
        assert!(selected(i), "region index {i} delivered but not selected");
        let region = &mut got[i];
        let end = off as usize + bytes.len();
        assert!(
            !bytes.is_empty() && end <= region.len(),
            "bytes {off}..{end} delivered to a region of {}",
            region.len()
        );
        for (slot, &b) in region[off as usize..end].iter_mut().zip(bytes) {
            assert!(slot.is_none(), "byte of region index {i} delivered twice");
            *slot = Some(b);
        }
        Ok(())
    };
    let result = reverse_scan(catalog, chain, &want, Sink::Copy(&mut sink), &mut |_, _| {});
    // The engine's way, straight into memory (filled with a byte no test file holds
    // everywhere), must end the same: the same error, or the same bytes.
    let mut memory: Vec<Vec<u8>> = newest
        .regions
        .iter()
        .map(|r| vec![0xa5; r.length as usize])
        .collect();
    let slots = memory
        .iter_mut()
        .enumerate()
        .map(|(i, m)| selected(i).then_some(&mut m[..]))
        .collect();
    let direct = reverse_scan::<crate::ReadError>(
        catalog,
        chain,
        &want,
        Sink::Memory(slots),
        &mut |_, _| {},
    );
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            assert!(
                !verified,
                "version {v}: verify passed but restore fails: {e}"
            );
            let other = direct.expect_err("restoring into memory fails too");
            assert_eq!(
                other.to_string(),
                e.to_string(),
                "the same error either way"
            );
            return;
        }
    };
    assert_eq!(
        direct.as_ref().ok(),
        Some(&report),
        "restoring into memory reads the same"
    );
    // Verify walks the pages a restore of the whole version reads: it passes what restores.
    assert!(
        verified || some_regions,
        "version {v}: restores, but verify says it does not"
    );
    let pages: u64 = report.pages_per_version.iter().map(|&(_, n)| n).sum();
    assert_eq!(pages, report.pages);
    let mut expect_pages = 0;
    for (i, r) in newest.regions.iter().enumerate() {
        if !selected(i) {
            assert!(got[i].iter().all(Option::is_none));
            continue;
        }
        expect_pages += r.page_count(ps as u32);
        let want = expected(catalog, chain, r);
        for (k, (g, w)) in got[i].iter().zip(&want).enumerate() {
            assert_eq!(
                *g,
                Some(*w),
                "version {v}: byte {k} of region {} is not the newest stored",
                r.id
            );
        }
        assert!(
            memory[i] == want,
            "version {v}: region {} restored into memory differs from the newest stored",
            r.id
        );
    }
    assert_eq!(report.pages, expect_pages, "each page read once");
}

/// What restoring `r` must give, worked out page by page without the scan: each page from
/// the newest version of the chain at or after the region's birth that stores it.
fn expected(
    catalog: &Catalog<'_>,
    chain: &[OpenVersion],
    r: &ickpt_format::RegionEntry,
) -> Vec<u8> {
    let ps = chain[0].meta.page_size() as u64;
    let mut out = vec![0u8; r.length as usize];
    let mut page = vec![0u8; ps as usize];
    for p in 0..r.page_count(ps as u32) {
        let at = chain
            .iter()
            .filter(|ov| ov.version >= r.born)
            .find_map(|ov| {
                let (index, _) = ov.meta.region_by_id(r.id)?;
                let run = ov.meta.runs.iter().find(|run| {
                    run.region_index as usize == index
                        && (run.first_page..run.first_page + run.page_count as u64).contains(&p)
                })?;
                Some((ov, run.data_offset + (p - run.first_page) * ps))
            });
        let (ov, at) = at.unwrap_or_else(|| {
            panic!(
                "restore succeeded, but page {p} of region {} is stored nowhere",
                r.id
            )
        });
        let file = catalog.reopen(ov).expect("in memory");
        PageView::new(&ov.meta, &*file)
            .read_exact_at(&mut page, at)
            .expect("restore succeeded, so the page reads");
        // Stored page p holds region bytes [p·ps − page_offset, (p+1)·ps − page_offset).
        let start = (p * ps) as i128 - r.page_offset as i128;
        for (k, &b) in page.iter().enumerate() {
            let pos = start + k as i128;
            if (0..r.length as i128).contains(&pos) {
                out[pos as usize] = b;
            }
        }
    }
    out
}
