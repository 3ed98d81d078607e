//! Format 6's frames: zero pages stored without data, other stretches compressed with zstd
//! when smaller. Every reader addresses pages through `PageView` as if stored raw; these
//! tests check that what it yields is exactly what was written, and that damaged or crafted
//! frames are refused.

use ickpt_format::{
    crc, limits, read_meta, verify_data, Codec, Frame, FrameEncoder, PageView, Piece, ReadAt,
    RegionEntry, VersionLayout, FRAME_ENTRY_LEN,
};
use proptest::prelude::*;

mod common;
use common::{busy_stats, full_version, reseal, PS};

/// Pages per batch, as the engine's 256 KiB batches hold.
const BATCH: usize = 64;

/// A full version of one region holding `pages`, written as the engine writes it: in batches,
/// each encoded by `enc` (None: raw, with no frames at all).
fn version_of(pages: &[Vec<u8>], enc: Option<&mut FrameEncoder>) -> Vec<u8> {
    let regions = vec![RegionEntry {
        id: 7,
        born: 1,
        length: (pages.len() * PS) as u64,
        page_offset: 0,
    }];
    let mut l = VersionLayout::new(full_version(), regions);
    let mut data = Vec::new();
    let mut enc = enc;
    for (b, batch) in pages.chunks(BATCH).enumerate() {
        let mut buf: Vec<u8> = batch.concat();
        let crcs: Vec<u32> = batch.iter().map(|p| crc(p)).collect();
        for (i, c) in crcs.iter().enumerate() {
            l.push_page(0, (b * BATCH + i) as u64, *c);
        }
        let len = buf.len();
        let n = match enc.as_deref_mut() {
            Some(e) => e.encode(&mut buf, len, PS, &crcs, |f| l.push_frame(f)),
            None => len,
        };
        data.extend_from_slice(&buf[..n]);
    }
    l.set_stats(busy_stats());
    let mut f = l.prefix();
    f.extend_from_slice(&data);
    f.extend_from_slice(&l.trailer());
    f
}

fn check(f: &[u8]) -> Result<(), String> {
    let m = read_meta(&f, f.len() as u64).map_err(|e| e.to_string())?;
    verify_data(&m, &f, &mut |_, _| {}).map_err(|e| e.to_string())
}

/// A page that compresses well, one that does not, and a zero page.
fn text_page(seed: u8) -> Vec<u8> {
    (0..PS)
        .map(|i| b"stencil "[(i + seed as usize) % 8])
        .collect()
}
fn noise_page(seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..PS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
fn zero_page() -> Vec<u8> {
    vec![0; PS]
}

/// Two compressible pages, two zero pages and one of noise: a zstd, a zero and a raw frame.
fn mixed() -> Vec<Vec<u8>> {
    vec![
        text_page(0),
        text_page(3),
        zero_page(),
        zero_page(),
        noise_page(5),
    ]
}

fn zstd1() -> FrameEncoder {
    FrameEncoder::new(Some(1), BATCH * PS).unwrap()
}

#[test]
fn a_mixed_version_stores_each_stretch_its_own_way_and_reads_back() {
    let pages = mixed();
    let f = version_of(&pages, Some(&mut zstd1()));
    let m = read_meta(&&f[..], f.len() as u64).unwrap();
    let codecs: Vec<(Codec, u32)> = m
        .frames
        .iter()
        .map(|p| (p.frame.codec, p.frame.page_count))
        .collect();
    assert_eq!(
        codecs,
        [(Codec::Zstd, 2), (Codec::Zero, 2), (Codec::Raw, 1)]
    );
    assert_eq!(m.zero_pages(), 2);
    assert_eq!(m.data_bytes(), 5 * PS as u64);
    assert!(
        m.stored_bytes() < (PS + PS / 4) as u64,
        "text compressed, zeros left out: {} bytes stored",
        m.stored_bytes()
    );
    check(&f).unwrap();
    let view = PageView::new(&m, &f);
    // Into zeros, and into memory holding other bytes (zero frames write their zeros).
    for fill in [0u8, 0xa5] {
        let mut all = vec![fill; 5 * PS];
        view.read_exact_at(&mut all, m.header.data_offset).unwrap();
        assert_eq!(all, pages.concat(), "over {fill:#x}");
    }
}

/// A buffer the caller keeps (the engine's lies in scratch memory), counting its uses.
struct Counted(Vec<u8>, std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl ickpt_format::Scratch for Counted {
    fn bytes(&mut self) -> &mut [u8] {
        self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &mut self.0
    }
}

/// An encoder compressing into the caller's buffer stores what one with its own buffer
/// stores, byte for byte, and compresses there.
#[test]
fn an_encoder_compresses_into_the_callers_buffer_alike() {
    let pages = mixed();
    let used = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let zstd = Box::new(zstd::bulk::Compressor::new(1).unwrap()) as Box<dyn ickpt_format::Compress>;
    let scratch = Box::new(Counted(vec![0; BATCH * PS], used.clone()));
    let mut enc = FrameEncoder::with_scratch(Some(zstd), scratch);
    let theirs = version_of(&pages, Some(&mut enc));
    assert_eq!(theirs, version_of(&pages, Some(&mut zstd1())));
    assert!(used.load(std::sync::atomic::Ordering::Relaxed) > 0);
}

#[test]
fn without_compression_zero_pages_are_still_left_out() {
    let pages = mixed();
    let mut enc = FrameEncoder::new(None, BATCH * PS).unwrap();
    let f = version_of(&pages, Some(&mut enc));
    let m = read_meta(&&f[..], f.len() as u64).unwrap();
    assert_eq!(m.stored_bytes(), 3 * PS as u64);
    assert_eq!(m.zero_pages(), 2);
    check(&f).unwrap();
}

#[test]
fn a_version_of_raw_frames_only_has_no_frame_table() {
    let pages = vec![noise_page(1), noise_page(2)];
    let f = version_of(&pages, Some(&mut zstd1()));
    let m = read_meta(&&f[..], f.len() as u64).unwrap();
    assert!(m.frames.is_empty());
    assert_eq!(m.footer.frame_count, 0);
    assert_eq!(f, version_of(&pages, None), "byte for byte the raw file");
}

#[test]
fn flipping_any_byte_of_a_framed_version_is_detected() {
    let f = version_of(&mixed(), Some(&mut zstd1()));
    common::every_flip_is_detected(&f, check);
}

#[test]
fn a_damaged_compressed_frame_names_its_pages() {
    let mut f = version_of(&mixed(), Some(&mut zstd1()));
    let m = read_meta(&&f[..], f.len() as u64).unwrap();
    let at = m.frames[0].offset as usize + 3;
    f[at] ^= 0x10;
    let e = check(&f).unwrap_err();
    assert!(
        e.contains("compressed frame of pages 0..2 fails its checksum"),
        "{e}"
    );
}

/// Where frame `i`'s entry lies in `f`.
fn frame_entry(f: &[u8], i: usize) -> usize {
    let m = read_meta(&f, f.len() as u64).unwrap();
    let stats = ickpt_format::STATS_LEN;
    f.len() - 64 - stats - (m.frames.len() - i) * FRAME_ENTRY_LEN
}

#[test]
fn crafted_frame_tables_are_refused() {
    let f = version_of(&mixed(), Some(&mut zstd1()));
    type Change = fn(&mut [u8]);
    let cases: [(&str, Change); 5] = [
        ("unknown codec 3", |e| e[4] = 3),
        ("reserved frame bytes", |e| e[6] = 1),
        ("cannot store", |e| {
            // A zstd frame as long as its pages.
            e[8..12].copy_from_slice(&((2 * PS) as u32).to_le_bytes())
        }),
        ("1 to 1048576 bytes of pages allowed", |e| {
            e[0..4].copy_from_slice(&0u32.to_le_bytes())
        }),
        ("frames hold more pages", |e| {
            e[0..4].copy_from_slice(&200u32.to_le_bytes())
        }),
    ];
    for (want, change) in cases {
        let mut g = f.clone();
        let at = frame_entry(&g, 0);
        change(&mut g[at..at + FRAME_ENTRY_LEN]);
        reseal(&mut g);
        let e = read_meta(&&g[..], g.len() as u64).unwrap_err().to_string();
        assert!(e.contains(want), "{want}: {e}");
    }
    // One page fewer in the zero frame: the frames no longer cover the version's pages.
    let mut g = f.clone();
    let at = frame_entry(&g, 1);
    g[at..at + 4].copy_from_slice(&1u32.to_le_bytes());
    reseal(&mut g);
    let e = read_meta(&&g[..], g.len() as u64).unwrap_err().to_string();
    assert!(e.contains("frames do not tile"), "{e}");
}

/// A full version of two text pages stored as one zstd frame holding `stored`.
fn two_pages_as(stored: &[u8]) -> Vec<u8> {
    let pages = [text_page(0), text_page(1)];
    let regions = vec![RegionEntry {
        id: 7,
        born: 1,
        length: (2 * PS) as u64,
        page_offset: 0,
    }];
    let mut l = VersionLayout::new(full_version(), regions);
    for (i, p) in pages.iter().enumerate() {
        l.push_page(0, i as u64, crc(p));
    }
    l.push_frame(Frame {
        page_count: 2,
        codec: Codec::Zstd,
        stored_len: stored.len() as u32,
        crc: crc(stored),
    });
    let mut f = l.prefix();
    f.extend_from_slice(stored);
    f.extend_from_slice(&l.trailer());
    f
}

#[test]
fn a_frame_that_decompresses_to_too_few_pages_is_refused() {
    // Claims both pages, holds only the first.
    let short = zstd::bulk::compress(&text_page(0), 1).unwrap();
    let e = check(&two_pages_as(&short)).unwrap_err();
    assert!(e.contains("compressed frame"), "{e}");
}

#[test]
fn a_frame_of_several_zstd_frames_is_refused() {
    // zstd's decoder takes frames back to back, skippable ones too; the format says one.
    let mut stored = 0x184D_2A50u32.to_le_bytes().to_vec();
    stored.extend_from_slice(&4u32.to_le_bytes());
    stored.extend_from_slice(b"junk");
    let pages = [text_page(0), text_page(1)].concat();
    stored.extend_from_slice(&zstd::bulk::compress(&pages, 1).unwrap());
    let e = check(&two_pages_as(&stored)).unwrap_err();
    assert!(e.contains("not exactly one zstd frame"), "{e}");
}

#[test]
fn frames_never_exceed_the_limit() {
    // 64 KiB pages: a batch of 64 would be 4 MiB, more than a frame may hold.
    let ps = limits::MAX_PAGE_SIZE as usize;
    let mut enc = FrameEncoder::new(Some(1), 64 * ps).unwrap();
    let mut buf = vec![1u8; 64 * ps];
    let crcs: Vec<u32> = buf.chunks(ps).map(crc).collect();
    let mut frames = Vec::new();
    let len = buf.len();
    enc.encode(&mut buf, len, ps, &crcs, |f| frames.push(f));
    assert!(frames.len() >= 4);
    assert!(frames
        .iter()
        .all(|f| f.raw_len(ps as u32) <= limits::MAX_FRAME_BYTES));
}

/// A page of one of four kinds.
fn any_page() -> impl Strategy<Value = Vec<u8>> {
    (0u8..4, any::<u64>()).prop_map(|(kind, seed)| match kind {
        0 => zero_page(),
        1 => noise_page(seed),
        2 => text_page(seed as u8),
        // Mostly zero with one word set: zero-looking to a careless check.
        _ => {
            let mut p = zero_page();
            let at = (seed as usize % (PS / 8)) * 8;
            p[at..at + 8].copy_from_slice(&(seed | 1).to_le_bytes());
            p
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever mix of pages and whatever level: every page reads back exactly, through
    /// single reads at any offset and scattered reads with gaps, and the file verifies.
    #[test]
    fn pages_read_back_exactly(
        pages in prop::collection::vec(any_page(), 1..150),
        level in prop::option::of(-5i32..4),
        reads in prop::collection::vec((any::<u64>(), 1usize..3 * PS, 0usize..2 * PS), 1..8),
    ) {
        let mut enc = FrameEncoder::new(level, BATCH * PS).unwrap();
        let f = version_of(&pages, Some(&mut enc));
        check(&f).map_err(TestCaseError::fail)?;
        let m = read_meta(&&f[..], f.len() as u64).unwrap();
        prop_assert!(m.stored_bytes() <= m.data_bytes());
        let want = pages.concat();
        let view = PageView::new(&m, &f);
        let start = m.header.data_offset;
        for (at, len, gap) in reads {
            let at = (at % want.len() as u64) as usize;
            let len = len.min(want.len() - at);
            let mut got = vec![0u8; len];
            view.read_exact_at(&mut got, start + at as u64).unwrap();
            prop_assert_eq!(&got[..], &want[at..at + len]);
            // The same stretch, its middle skipped.
            let gap = gap.min(len / 2);
            let a = (len - gap) / 2;
            let mut x = vec![0u8; a];
            let mut y = vec![0u8; len - a - gap];
            let mut pieces = [Piece::Keep(&mut x), Piece::Skip(gap), Piece::Keep(&mut y)];
            view.read_pieces_at(&mut pieces, start + at as u64).unwrap();
            prop_assert_eq!(&x[..], &want[at..at + a]);
            prop_assert_eq!(&y[..], &want[at + a + gap..at + len]);
        }
    }
}

/// Zeros are found zero at any length, and one byte set anywhere, in the first page or past
/// it, in a part page or a whole one, is found; `zero_where_not` clears just the pages that
/// hold one and says whether it wrote.
#[test]
fn zeros_are_told_from_a_single_byte_set() {
    for len in [0usize, 1, 4095, 4096, 4097, 3 * 4096 + 17] {
        assert!(ickpt_format::is_zero(&vec![0u8; len]), "{len} zeros");
        for at in [0, len / 2, len.saturating_sub(1)]
            .into_iter()
            .filter(|&a| a < len)
        {
            let mut v = vec![0u8; len];
            v[at] = 1;
            assert!(!ickpt_format::is_zero(&v), "byte {at} of {len}");
            assert!(ickpt_format::zero_where_not(&mut v));
            assert!(ickpt_format::is_zero(&v));
            assert!(!ickpt_format::zero_where_not(&mut v));
        }
    }
}
