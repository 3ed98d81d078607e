//! Full data check of a version: every page against its stored CRC.

use crate::reader::{ReadAt, VersionMeta};
use crate::FormatError;
use std::sync::Arc;

/// Called with (bytes checked so far, bytes to check) so long checks can show progress.
pub type VerifyProgress<'a> = &'a mut dyn FnMut(u64, u64);

/// Check every stored page of `meta` against its CRC: the first failure, if any.
pub fn verify_data(
    meta: &VersionMeta,
    src: &dyn ReadAt,
    progress: VerifyProgress<'_>,
) -> Result<(), FormatError> {
    match page_damage(meta, src, progress).first.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// Failures kept with their messages: enough to name the damage, bounded whatever the file.
const FIRST_KEPT: usize = 8;

/// The pages of a version that fail their check, by index in its page-CRC table (the order
/// of [`VersionMeta::runs_with_crcs`]): what a restore reading them would refuse.
#[derive(Debug, Clone, Default)]
pub struct PageDamage {
    /// Runs of damaged pages: (first index, pages), ascending and apart.
    pub runs: Vec<(u64, u64)>,
    /// The first few failures, with what is wrong: (index, error).
    pub first: Vec<(u64, FormatError)>,
}

impl PageDamage {
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Damaged pages in all.
    pub fn pages(&self) -> u64 {
        self.runs.iter().map(|&(_, n)| n).sum()
    }

    /// The first damaged index in `from..from + count`, if any.
    pub fn first_in(&self, from: u64, count: u64) -> Option<u64> {
        let end = from + count;
        // The first run ending after `from`.
        let i = self.runs.partition_point(|&(s, n)| s + n <= from);
        let &(s, _) = self.runs.get(i)?;
        (s < end).then_some(s.max(from))
    }

    /// What is wrong with page `index`: its own error when it is among the first kept, a
    /// general one otherwise.
    pub fn error_of(&self, index: u64) -> Option<FormatError> {
        self.first_in(index, 1)?;
        Some(
            self.first
                .iter()
                .find(|(i, _)| *i == index)
                .map(|(_, e)| e.clone())
                .unwrap_or_else(|| {
                    FormatError::corrupt(
                        0,
                        format!("page {index} of the page-CRC table fails its check"),
                    )
                }),
        )
    }

    fn add(&mut self, index: u64, e: FormatError) {
        match self.runs.last_mut() {
            Some((s, n)) if *s + *n == index => *n += 1,
            _ => self.runs.push((index, 1)),
        }
        if self.first.len() < FIRST_KEPT {
            self.first.push((index, e));
        }
    }
}

/// Check every stored page of `meta` against its CRC, reading in chunks of at most 8 MiB,
/// and go on past failures: every damaged page is found. A chunk that cannot be read whole
/// (a damaged frame, an I/O error) is read again page by page, so the damage is put on the
/// pages it covers and no others.
pub fn page_damage(
    meta: &VersionMeta,
    src: &dyn ReadAt,
    progress: VerifyProgress<'_>,
) -> PageDamage {
    let ps = meta.page_size() as usize;
    let total = meta.data_bytes();
    // Pages at the offsets the runs give, whatever the frames store.
    let view = crate::PageView::new(meta, src);
    let chunk_pages = ((8 << 20) / ps).max(1);
    let mut buf = vec![0u8; chunk_pages * ps];
    let mut done = 0u64;
    let mut index = 0u64;
    let mut damage = PageDamage::default();
    let read_error = |e: std::io::Error, offset: u64| {
        crate::format_error_in(&e).unwrap_or(FormatError::Io {
            offset,
            source: Arc::new(e),
        })
    };
    for (run, crcs) in meta.runs_with_crcs() {
        let region = meta.regions[run.region_index as usize].id;
        let mut page = 0usize;
        while page < crcs.len() {
            let n = (crcs.len() - page).min(chunk_pages);
            let offset = run.data_offset + (page * ps) as u64;
            let b = &mut buf[..n * ps];
            let whole = view.read_exact_at(b, offset);
            for k in 0..n {
                let at = offset + (k * ps) as u64;
                let bytes = &mut b[k * ps..(k + 1) * ps];
                let read = match &whole {
                    Ok(()) => Ok(()),
                    Err(_) => view.read_exact_at(bytes, at).map_err(|e| read_error(e, at)),
                };
                let checked = read.and_then(|()| {
                    check_pages(
                        bytes,
                        ps,
                        &crcs[page + k..page + k + 1],
                        at,
                        run.first_page + (page + k) as u64,
                        region,
                    )
                });
                if let Err(e) = checked {
                    damage.add(index + (page + k) as u64, e);
                }
            }
            page += n;
            done += (n * ps) as u64;
            progress(done, total);
        }
        index += crcs.len() as u64;
    }
    damage
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
