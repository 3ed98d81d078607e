//! Checksums recomputed over mutated bytes. A random mutation of a version file almost
//! always breaks `meta_crc` (and a mutated page its page CRC), so without this nearly every
//! input would stop at the first checksum and the rules behind it would never be reached.

use ickpt_format::{crc, crc_append, limits, FOOTER_LEN, HEADER_LEN_V1, RUN_ENTRY_LEN};

/// What [`reseal`] could recompute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sealed {
    /// `meta_crc` covers the bytes `read_meta` will check it over.
    pub meta: bool,
    /// Every page the footer counts has its CRC recomputed.
    pub pages: bool,
}

fn u32_at(f: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(f[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(f: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(f[at..at + 8].try_into().expect("8 bytes"))
}

/// Where a field's value lands in `f`, when it is an offset inside it.
fn offset_in(f: &[u8], v: u64) -> Option<usize> {
    usize::try_from(v).ok().filter(|&v| v <= f.len())
}

/// Recompute the page CRCs (when `pages`) and then `meta_crc` of version file `f` in place,
/// from the same fields `read_meta` reads: `data_offset` (header byte 48, in every format
/// version) and the footer's `index_offset`, `run_count` and `page_count`, each
/// bounds-checked. What cannot be placed inside `f` is left as it is, so the reader still
/// meets every shape of damage, only not a stale checksum over it.
pub fn reseal(f: &mut [u8], pages: bool) -> Sealed {
    let mut sealed = Sealed::default();
    if f.len() < HEADER_LEN_V1 + FOOTER_LEN {
        return sealed;
    }
    let footer_at = f.len() - FOOTER_LEN;
    if pages {
        sealed.pages = reseal_pages(f, footer_at);
    }
    // Read after the page CRCs: on a nonsensical layout their table may overlap the header.
    let data_offset = offset_in(f, u64_at(f, 48));
    let index_offset = offset_in(f, u64_at(f, footer_at + 8));
    let meta_end = f.len() - 4;
    if let (Some(d), Some(i)) = (data_offset, index_offset) {
        if d <= meta_end && i <= meta_end {
            let c = crc_append(crc(&f[..d]), &f[i..meta_end]);
            f[meta_end..].copy_from_slice(&c.to_le_bytes());
            sealed.meta = true;
        }
    }
    sealed
}

/// Page `n` is `page_size` bytes at `data_offset + n × page_size`, its CRC the `n`th u32
/// after the run index; both must lie inside the file. True when all `page_count` fit.
fn reseal_pages(f: &mut [u8], footer_at: usize) -> bool {
    let page_size = u32_at(f, 12);
    if !page_size.is_power_of_two() || page_size > limits::MAX_PAGE_SIZE {
        return false;
    }
    let ps = page_size as usize;
    let (Some(data_offset), Some(index_offset)) = (
        offset_in(f, u64_at(f, 48)),
        offset_in(f, u64_at(f, footer_at + 8)),
    ) else {
        return false;
    };
    let page_count = u64_at(f, footer_at + 24);
    let table = u64_at(f, footer_at + 16)
        .checked_mul(RUN_ENTRY_LEN as u64)
        .and_then(|r| r.checked_add(index_offset as u64))
        .and_then(|t| offset_in(f, t));
    let Some(table) = table.filter(|&t| t <= footer_at) else {
        return false;
    };
    let fit_data = f.len().saturating_sub(data_offset) / ps;
    let fit_table = (footer_at - table) / 4;
    let n = page_count.min(fit_data.min(fit_table) as u64) as usize;
    for k in 0..n {
        let at = data_offset + k * ps;
        let c = crc(&f[at..at + ps]);
        f[table + 4 * k..table + 4 * k + 4].copy_from_slice(&c.to_le_bytes());
    }
    n as u64 == page_count
}
