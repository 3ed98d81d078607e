//! The `chain_restore` target: a store of fuzzed version files surveyed, verified, chained
//! and restored, each answer checked against the others and against the bytes stored.

use super::input_store::{flag, input_store};
use super::MemStore;
use crate::read::catalog::{Catalog, OpenVersion};
use crate::read::reverse_scan::{reverse_scan, Sink};
use ickpt_format::{PageView, ReadAt};
use std::collections::HashSet;

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
