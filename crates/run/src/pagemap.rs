//! Words of this process's `/proc/self/pagemap`, one per page: whether a page is backed
//! (present or swapped out; a page never backed reads as zeros), and whether a page of a
//! file mapping was written (it is anonymous now, as RELRO is after relocation).

use std::os::unix::fs::FileExt;

const PRESENT_OR_SWAPPED: u64 = 3 << 62;
const FILE_PAGE: u64 = 1 << 61;

/// Read the words of the pages from address `start` into `buf` (8 bytes a page, as many as
/// it holds); false when pagemap could not be read.
pub fn read(pagemap: &std::fs::File, start: u64, buf: &mut [u8]) -> bool {
    pagemap.read_exact_at(buf, start / 4096 * 8).is_ok()
}

/// The word of page `i` in what `read` filled.
pub fn word(buf: &[u8], i: usize) -> u64 {
    u64::from_ne_bytes(buf[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
}

pub fn backed(word: u64) -> bool {
    word & PRESENT_OR_SWAPPED != 0
}

/// A page of a file mapping that is no longer the file's.
pub fn written_file_page(word: u64) -> bool {
    backed(word) && word & FILE_PAGE == 0
}
