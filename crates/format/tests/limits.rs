//! Crafted files that claim enormous counts are refused before anything is sized by them:
//! outside testing aborted `verify`, `ls` and restore with a sparse 8 KiB-on-disk file whose
//! header claimed 2^32 regions.

use ickpt_format::{
    crc, limits, read_meta, Footer, Header, Kind, ReadAt, RegionEntry, Run, VersionLayout,
    FOOTER_LEN, FORMAT_VERSION, HEADER_LEN, STATS_LEN,
};

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

mod common;
use common::{full_version, PS, STORE};

/// A sparse file: `head` at offset 0, `mid.1` at `mid.0`, `tail` ending at `len`, zeros
/// between (as a file system reads a hole), without holding the hole in memory.
struct Sparse {
    head: Vec<u8>,
    mid: (u64, Vec<u8>),
    tail: Vec<u8>,
    len: u64,
    /// Bytes the reader asked for: the work a crafted file made it do.
    read: std::cell::Cell<u64>,
}

impl ReadAt for Sparse {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let end = offset + buf.len() as u64;
        if end > self.len {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.read.set(self.read.get() + buf.len() as u64);
        buf.fill(0);
        let tail_at = self.len - self.tail.len() as u64;
        for (at, piece) in [
            (0, &self.head),
            (self.mid.0, &self.mid.1),
            (tail_at, &self.tail),
        ] {
            let (lo, hi) = (offset.max(at), end.min(at + piece.len() as u64));
            if lo < hi {
                buf[(lo - offset) as usize..(hi - offset) as usize]
                    .copy_from_slice(&piece[(lo - at) as usize..(hi - at) as usize]);
            }
        }
        Ok(())
    }
}

/// Heap bytes in use, and the most since the last `reset_peak`: what a crafted file made
/// the reader hold (other tests of this binary allocate little meanwhile).
struct Counting;
static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; the counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = IN_USE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: the caller's layout contract is passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        IN_USE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn header(region_count: u32) -> Header {
    Header {
        format_version: FORMAT_VERSION,
        kind: Kind::Full,
        page_size: PS as u32,
        version: 1,
        parent: 0,
        chain_depth: 0,
        region_count,
        created_unix_ns: 0,
        data_offset: Header::data_offset_for(FORMAT_VERSION, region_count, PS as u32),
        store_id: Some(STORE),
        parent_meta_crc: 0,
        tag: 0,
    }
}

fn sparse(h: &Header, footer: Footer) -> Sparse {
    let mut tail = footer.encode_without_crc().to_vec();
    tail.extend_from_slice(&[0; 4]);
    let mut head = h.encode();
    // One real region of the largest size, so the counts below are the first thing to fail.
    head.extend_from_slice(
        &RegionEntry {
            id: 1,
            born: 1,
            length: limits::MAX_PAGES * PS as u64,
            page_offset: 0,
        }
        .encode(),
    );
    Sparse {
        head,
        mid: (0, Vec::new()),
        tail,
        len: footer.file_length,
        read: std::cell::Cell::new(0),
    }
}

#[test]
fn a_huge_region_count_is_refused_before_the_table_is_read() {
    for count in [limits::MAX_REGIONS + 1, u32::MAX] {
        let h = header(count);
        let len = h.data_offset + FOOTER_LEN as u64;
        let f = sparse(
            &h,
            Footer {
                index_offset: h.data_offset,
                run_count: 0,
                page_count: 0,
                file_length: len,
                frame_count: 0,
                meta_crc: 0,
            },
        );
        let e = read_meta(&f, len).unwrap_err();
        assert!(e.to_string().contains("regions"), "{e}");
        assert_eq!(e.offset(), Some(36));
    }
}

#[test]
fn a_huge_page_count_is_refused_before_the_index_is_read() {
    let h = header(1);
    let pages = limits::MAX_PAGES + 1;
    let index_offset = h.data_offset + pages * PS as u64;
    let len = index_offset + pages * 4 + STATS_LEN as u64 + FOOTER_LEN as u64;
    let f = sparse(
        &h,
        Footer {
            index_offset,
            run_count: 0,
            page_count: pages,
            file_length: len,
            frame_count: 0,
            meta_crc: 0,
        },
    );
    let e = read_meta(&f, len).unwrap_err();
    assert!(e.to_string().contains("pages"), "{e}");
}

#[test]
fn a_sparse_index_costs_a_bounded_read_and_no_table() {
    // Review: a file of 1.1 TB claimed and 8 KiB on disk, whose index and page-CRC table are
    // holes, made read_meta zero-fill 7 GiB and take a minute. The index now streams and each
    // run is checked as it arrives: the hole's first (all-zero) run fails at once.
    let h = header(1);
    let pages = limits::MAX_PAGES;
    let index_offset = h.data_offset + pages * PS as u64;
    let len = index_offset + pages * (24 + 4) + STATS_LEN as u64 + FOOTER_LEN as u64;
    let f = sparse(
        &h,
        Footer {
            index_offset,
            run_count: pages,
            page_count: pages,
            file_length: len,
            frame_count: 0,
            meta_crc: 1,
        },
    );
    let e = read_meta(&f, len).unwrap_err();
    assert!(
        e.to_string().contains("run pages outside its region"),
        "{e}"
    );
    assert_eq!(e.offset(), Some(index_offset + 4));
    assert!(f.read.get() <= 2 << 20, "read {} bytes", f.read.get());
}

#[test]
fn page_sizes_outside_4k_to_64k_are_refused() {
    for ps in [512u32, 2048, 1 << 17, 1 << 30] {
        let mut h = header(1);
        h.page_size = ps;
        h.data_offset = Header::data_offset_for(FORMAT_VERSION, 1, ps);
        let e = Header::decode(&h.encode()).unwrap_err();
        assert_eq!(e.offset(), Some(12), "{e}");
    }
    let mut h = header(1);
    h.page_size = 1 << 16;
    h.data_offset = Header::data_offset_for(FORMAT_VERSION, 1, 1 << 16);
    Header::decode(&h.encode()).unwrap();
    assert_eq!(h.encode().len(), HEADER_LEN);
}

#[test]
fn version_numbers_stop_far_below_overflow() {
    let mut h = header(0);
    h.version = limits::MAX_VERSION + 1;
    assert_eq!(Header::decode(&h.encode()).unwrap_err().offset(), Some(16));
    h.version = limits::MAX_VERSION;
    Header::decode(&h.encode()).unwrap();
}

#[test]
fn a_region_length_whose_end_overflows_is_refused() {
    // Found by fuzzing: page_offset + length wrapped around 2^64, so a region of almost
    // 2^64 bytes counted as one page and a full version storing that page was accepted
    // (with overflow checks, the count panicked).
    let region = RegionEntry {
        id: 1,
        born: 1,
        length: u64::MAX - 50,
        page_offset: 100,
    };
    let mut l = VersionLayout::new(full_version(), vec![region]);
    let page = vec![0x5Au8; PS];
    l.push_page(0, 0, crc(&page));
    let mut f = l.prefix();
    f.extend_from_slice(&page);
    f.extend_from_slice(&l.trailer());
    let e = read_meta(&f, f.len() as u64).unwrap_err();
    assert_eq!(e.offset(), Some(HEADER_LEN as u64 + 16), "{e}");
}

#[test]
fn a_page_crc_table_left_as_a_hole_is_refused_without_being_held() {
    // Outside testing: one real run of the largest size, its data and page-CRC table holes
    // (1.1 TB claimed): any four bytes are a CRC, so the table grew to 1 GiB before the
    // metadata checksum refused the file. It is now only checksummed until that matches.
    let h = header(1);
    let pages = limits::MAX_PAGES;
    let index_offset = h.data_offset + pages * PS as u64;
    let len = index_offset + 24 + pages * 4 + STATS_LEN as u64 + FOOTER_LEN as u64;
    let mut f = sparse(
        &h,
        Footer {
            index_offset,
            run_count: 1,
            page_count: pages,
            file_length: len,
            frame_count: 0,
            meta_crc: 1,
        },
    );
    let run = Run {
        region_index: 0,
        page_count: pages as u32,
        first_page: 0,
        data_offset: h.data_offset,
    };
    f.mid = (index_offset, run.encode().to_vec());
    let before = IN_USE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let e = read_meta(&f, len).unwrap_err();
    assert!(e.to_string().contains("metadata checksum mismatch"), "{e}");
    let held = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    assert!(held < 64 << 20, "the reader held {held} bytes");
}

/// A file whose bytes change between reads: the page-CRC table, read once under the metadata
/// checksum and again into memory, must not be taken unchecked the second time.
struct Changing {
    bytes: Vec<u8>,
    /// Where the CRC table starts, and how many reads have covered it so far.
    table_at: u64,
    table_reads: std::cell::Cell<u32>,
}

impl ReadAt for Changing {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let at = offset as usize;
        buf.copy_from_slice(&self.bytes[at..at + buf.len()]);
        let covers = offset <= self.table_at && self.table_at < offset + buf.len() as u64;
        if covers {
            self.table_reads.set(self.table_reads.get() + 1);
            if self.table_reads.get() == 2 {
                buf[(self.table_at - offset) as usize] ^= 1;
            }
        }
        Ok(())
    }
}

#[test]
fn a_page_crc_table_that_changes_between_reads_is_refused() {
    let mut l = VersionLayout::new(full_version(), common::two_regions(1));
    let mut data = Vec::new();
    for (region, page) in [(0u32, 0u64), (0, 1), (1, 0)] {
        let bytes = vec![region as u8 + page as u8; PS];
        l.push_page(region, page, crc(&bytes));
        data.extend_from_slice(&bytes);
    }
    let mut f = l.prefix();
    f.extend_from_slice(&data);
    let index_offset = f.len() as u64;
    f.extend_from_slice(&l.trailer());
    // Two runs (region 0's pages 0-1, region 1's page 0), written down rather than asked of
    // the reader under test.
    let runs = 2u64;
    let changing = Changing {
        table_at: index_offset + runs * 24,
        bytes: f,
        table_reads: std::cell::Cell::new(0),
    };
    let e = read_meta(&changing, changing.bytes.len() as u64).unwrap_err();
    assert!(
        e.to_string().contains("changed while the file was read"),
        "{e}"
    );
    assert_eq!(changing.table_reads.get(), 2);
}
