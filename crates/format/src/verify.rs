//! Full data check of a version: every page against its stored CRC.

use crate::reader::{ReadAt, VersionMeta};
use crate::FormatError;
use std::sync::Arc;

/// Called with (bytes checked so far, bytes to check) so long checks can show progress.
pub type VerifyProgress<'a> = &'a mut dyn FnMut(u64, u64);

/// Check every stored page of `meta` against its CRC, reading in chunks of at most 8 MiB.
pub fn verify_data(
    meta: &VersionMeta,
    src: &dyn ReadAt,
    progress: VerifyProgress<'_>,
) -> Result<(), FormatError> {
    let ps = meta.page_size() as usize;
    let total = meta.data_bytes();
    // Pages at the offsets the runs give, whatever the frames store.
    let view = crate::PageView::new(meta, src);
    let chunk_pages = (8 << 20) / ps;
    let mut buf = vec![0u8; chunk_pages.max(1) * ps];
    let mut done = 0u64;
    for (run, crcs) in meta.runs_with_crcs() {
        let mut page = 0usize;
        while page < crcs.len() {
            let n = (crcs.len() - page).min(chunk_pages.max(1));
            let offset = run.data_offset + (page * ps) as u64;
            let b = &mut buf[..n * ps];
            view.read_exact_at(b, offset).map_err(|e| {
                crate::format_error_in(&e).unwrap_or(FormatError::Io {
                    offset,
                    source: Arc::new(e),
                })
            })?;
            check_pages(
                b,
                ps,
                &crcs[page..page + n],
                offset,
                run.first_page + page as u64,
                meta.regions[run.region_index as usize].id,
            )?;
            page += n;
            done += (n * ps) as u64;
            progress(done, total);
        }
    }
    Ok(())
}

/// Check consecutive pages of one region against their stored CRCs: `bytes` holds them,
/// read from file offset `offset`, the first being page `first_page` of region `region_id`.
/// The one check `verify` and a restore share, so "verify OK" means a restore reads the same.
pub fn check_pages(
    bytes: &[u8],
    ps: usize,
    crcs: &[u32],
    offset: u64,
    first_page: u64,
    region_id: u64,
) -> Result<(), FormatError> {
    // A caller's slip here would pass pages nobody checked.
    assert_eq!(bytes.len(), crcs.len() * ps, "one CRC per whole page");
    for (i, (data, &stored)) in bytes.chunks_exact(ps).zip(crcs).enumerate() {
        let computed = crate::crc(data);
        if stored != computed {
            return Err(FormatError::corrupt(
                offset + (i * ps) as u64,
                format!(
                    "page {} of region {region_id} fails its checksum (stored {stored:08x}, computed {computed:08x})",
                    first_page + i as u64
                ),
            ));
        }
    }
    Ok(())
}
