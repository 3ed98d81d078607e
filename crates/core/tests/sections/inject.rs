//! Engine::inject (CAPE's inject): a delta's words land in the protected
//! regions exactly, write tracking sees them (the next checkpoint stores their pages and
//! restores them), and a delta that does not fit the regions is refused with memory
//! untouched. Run on every backend (scripts/each-backend.sh).

use crate::common;
use common::{scratch_dir, Buf};
use ickpt::format::delta::{self, DeltaShape};
use ickpt::format::{DeltaFile, Kind, RegionDelta};
use ickpt::{Config, Engine, InjectError};

const PS: usize = 4096;

fn delta_of(id: u64, old: &[u8], new: &[u8]) -> RegionDelta {
    let shape = DeltaShape {
        page_size: PS as u32,
        region_len: old.len() as u64,
    };
    RegionDelta {
        id,
        length: old.len() as u64,
        words: delta::diff(&shape, old, new),
    }
}

#[test]
fn injected_words_land_are_tracked_and_restore() {
    for mode in [
        ickpt::format::CommitMode::Sync,
        ickpt::format::CommitMode::Async,
    ] {
        let dir = scratch_dir("inject");
        let (len_a, len_b) = (8 * PS, 3 * PS + 10);
        let mut a = Buf::new(len_a);
        let mut b = Buf::new(4 * PS);
        let mut cfg = Config::new(&dir);
        cfg.mode = mode;
        let e = Engine::open(cfg).unwrap();
        // SAFETY: the buffers outlive the engine (dropped first); b's region starts 6 bytes
        // into its first page.
        unsafe {
            e.protect(1, a.ptr, len_a).unwrap();
            e.protect(2, b.ptr.add(6), len_b).unwrap();
        }
        a.slice_mut()
            .iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = i as u8);
        b.slice_mut()[6..6 + len_b].fill(7);
        e.checkpoint().unwrap();
        e.wait().unwrap();
        // What another process computed: a few words of region 1's pages 2 and 5, the short
        // last word of region 2.
        let (old_a, old_b) = (a.slice().to_vec(), b.slice()[6..6 + len_b].to_vec());
        let mut new_a = old_a.clone();
        new_a[2 * PS + 8..2 * PS + 16].fill(0xEE);
        new_a[5 * PS + 100] = 1;
        let mut new_b = old_b.clone();
        new_b[len_b - 1] = 0x42;
        let d = DeltaFile {
            page_size: PS as u32,
            saves: 1,
            regions: vec![delta_of(1, &old_a, &new_a), delta_of(2, &old_b, &new_b)],
        };
        let d = DeltaFile::decode(&d.encode()).unwrap();
        let info = e.inject(&d).unwrap();
        assert_eq!((info.regions, info.words), (2, 4));
        assert!(a.slice() == &new_a[..], "{mode:?}: region 1 as injected");
        assert!(
            b.slice()[6..6 + len_b] == new_b[..],
            "{mode:?}: region 2 as injected"
        );
        assert!(
            b.slice()[..6].iter().all(|&x| x == 0),
            "bytes before region 2 untouched"
        );
        let c = e.checkpoint().unwrap();
        e.wait().unwrap();
        // Tracking saw the injected words: the increment stores pages 2 and 5 of region 1 and
        // region 2's last page, and nothing else.
        assert_eq!(c.kind, Kind::Incremental);
        assert_eq!(c.pages, 3, "{mode:?}");
        drop(e);
        let e = Engine::open(Config::new(&dir)).unwrap();
        let ra = e.alloc(1, len_a).unwrap();
        let rb = e.alloc(2, len_b).unwrap();
        e.restore(2).unwrap();
        // SAFETY: alloc returned these lengths.
        unsafe {
            assert!(std::slice::from_raw_parts(ra, len_a) == &new_a[..]);
            assert!(std::slice::from_raw_parts(rb, len_b) == &new_b[..]);
        }
    }
}

#[test]
fn a_delta_that_does_not_fit_is_refused_and_writes_nothing() {
    let dir = scratch_dir("inject-refused");
    let a = Buf::new(2 * PS);
    let e = Engine::open(Config::new(&dir)).unwrap();
    // SAFETY: `a` outlives the engine.
    unsafe { e.protect(1, a.ptr, 2 * PS).unwrap() };
    let old = a.slice().to_vec();
    let mut new = old.clone();
    new[0] = 9;
    let cases = [
        (
            vec![delta_of(1, &old, &new), delta_of(5, &old, &new)],
            "region 5: the delta holds it (8192 bytes) but it is not protected now",
        ),
        (
            vec![delta_of(1, &old[..PS], &new[..PS])],
            "region 1: size mismatch: protected with 8192 bytes, the delta's is 4096 bytes",
        ),
    ];
    // A delta built in memory, never decoded: its words are checked too (found in review: a
    // word past the region was written there).
    let cases = cases.into_iter().chain([
        (
            vec![RegionDelta {
                id: 1,
                length: (2 * PS) as u64,
                words: vec![(0, [9; 4]), (2 * PS as u64 + 100, [0xAB; 4])],
            }],
            "region 1: a word at offset 8292: not 4-byte aligned, out of order, or past the region's 8192 bytes",
        ),
        (
            vec![RegionDelta {
                id: 1,
                length: (2 * PS) as u64,
                words: vec![(8, [9; 4]), (4, [9; 4])],
            }],
            "region 1: a word at offset 4: not 4-byte aligned, out of order, or past the region's 8192 bytes",
        ),
        (
            vec![RegionDelta {
                id: 1,
                length: (2 * PS) as u64,
                words: vec![(6, [9; 4])],
            }],
            "region 1: a word at offset 6: not 4-byte aligned, out of order, or past the region's 8192 bytes",
        ),
    ]);
    for (regions, want) in cases {
        let d = DeltaFile {
            page_size: PS as u32,
            saves: 1,
            regions,
        };
        let err = e.inject(&d).unwrap_err();
        assert!(matches!(&err, InjectError::RegionMismatch { .. }), "{err}");
        assert_eq!(err.to_string(), want);
        // Region 1's word was valid, yet nothing was written: every region is checked first.
        assert!(a.slice() == &old[..], "memory untouched after: {err}");
    }
}

#[test]
fn a_delta_file_past_the_size_limit_is_refused_before_it_is_read() {
    use ickpt::read::delta_file::{read, MAX_DELTA_FILE};
    let dir = scratch_dir("inject-huge");
    std::fs::create_dir_all(&*dir).unwrap();
    let path = dir.join("huge.delta");
    // Sparse: a crafted size, nothing behind it.
    std::fs::File::create(&path)
        .unwrap()
        .set_len(MAX_DELTA_FILE + 1)
        .unwrap();
    match read(&path) {
        Err(InjectError::Corrupt { file, source }) => {
            assert_eq!(file, path.display().to_string());
            assert!(source.to_string().contains("larger than"), "{source}");
        }
        other => panic!("{other:?}"),
    }
}
