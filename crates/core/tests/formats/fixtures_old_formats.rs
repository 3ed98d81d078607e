//! Every format version stays readable: a store written by each is checked in under
//! tests/fixtures/format-vN and must restore to the bytes it was made from forever (v1 by
//! ickpt 0.1.0, each later one when its format was new; what each format added is in
//! CHANGELOG.md, "Format history"). `ICKPT_WRITE_FIXTURE=N` writes the fixture of the
//! current format version N, once, when that version is new.

use crate::common;
use common::{scratch_dir, Buf};
use ickpt::{Config, Engine};
use std::path::PathBuf;

const PS: usize = 4096;
const BIG: usize = 3 * PS;
const SMALL: usize = 100;

fn fixture_dir(format: u16) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/format-v{format}"))
}

/// Region contents at version `v` (1 = full, 2 and 3 increments).
fn expected(v: u64) -> (Vec<u8>, Vec<u8>) {
    let mut big: Vec<u8> = (0..BIG).map(|i| (i % 251) as u8).collect();
    let mut small: Vec<u8> = (0..SMALL).map(|i| (i * 3) as u8).collect();
    if v >= 2 {
        big[PS + 10..PS + 20].fill(0xEE);
        small[50] = 0x77;
    }
    if v >= 3 {
        big[2 * PS + 4095] = 0x42;
    }
    (big, small)
}

#[test]
fn format_v1_fixture_still_restores() {
    check_fixture(1);
}

#[test]
fn format_v2_fixture_still_restores() {
    check_fixture(2);
}

#[test]
fn format_v3_fixture_still_restores() {
    check_fixture(3);
}

#[test]
fn format_v4_fixture_still_restores() {
    check_fixture(4);
}

#[test]
fn format_v5_fixture_still_restores() {
    check_fixture(5);
}

#[test]
fn format_v6_fixture_still_restores() {
    check_fixture(6);
}

#[test]
fn format_v7_fixture_still_restores() {
    check_fixture(7);
}

/// The tag the fixture's version `v` carries: format 5 on, version v was taken with tag 100v.
fn tag_of(format: u16, v: u64) -> u64 {
    if format >= 5 {
        100 * v
    } else {
        0
    }
}

fn check_fixture(format: u16) {
    let dir = fixture_dir(format);
    let write = std::env::var("ICKPT_WRITE_FIXTURE").ok() == Some(format.to_string());
    assert!(
        !write || format == ickpt::format::FORMAT_VERSION,
        "only the current format version's fixture can be written"
    );
    if write {
        let _ = std::fs::remove_dir_all(&dir);
        let mut c = Config::new(&dir);
        if format >= 7 {
            // Versions 2 and 3 hold pre-copied pages (the file's first runs, written before
            // the header) and record what pre-copy did.
            c.precopy = ickpt::policy::prwip::Strategy::Blind;
            c.checkpoint_interval = Some(std::time::Duration::from_secs(10));
            c.precopy_thread = false;
            c.compression = ickpt::Compression::FAST;
        }
        let e = Engine::open(c).unwrap();
        let mut big = Buf::new(BIG);
        let mut small = Buf::new(PS);
        // SAFETY: both buffers outlive the engine; the small region sits 17 bytes into a page.
        unsafe {
            e.protect(1, big.ptr, BIG).unwrap();
            e.protect(2, small.ptr.add(17), SMALL).unwrap();
        }
        for v in 1..=3 {
            let (b, s) = expected(v);
            // Only the bytes that change, so versions 2 and 3 are real increments.
            let write = |dst: &mut [u8], src: &[u8]| {
                for (d, s) in dst.iter_mut().zip(src) {
                    if d != s {
                        *d = *s;
                    }
                }
            };
            write(big.slice_mut(), &b);
            write(&mut small.slice_mut()[17..17 + SMALL], &s);
            if e.precopy_pass() && v == 2 {
                // Written again, as it was, after its pre-copy: a conflict the commit copies
                // over its slot.
                let p = big.slice_mut();
                p[PS + 10] = 0;
                p[PS + 10] = 0xEE;
            }
            e.checkpoint_tagged(tag_of(format, v)).unwrap();
        }
    }
    // Read from a copy: the fixture itself stays untouched (opening for restore takes a lock
    // and cleans temporaries).
    let copy = scratch_dir(&format!("fixture-v{format}"));
    std::fs::create_dir_all(&copy).unwrap();
    for f in std::fs::read_dir(&dir).expect("fixture present") {
        let f = f.unwrap();
        std::fs::copy(f.path(), copy.join(f.file_name())).unwrap();
    }
    let sizes: Vec<u64> = (1..=3)
        .map(|v| {
            std::fs::metadata(copy.join(ickpt::store::version_name(v)))
                .unwrap()
                .len()
        })
        .collect();
    // (The v7 full version is compressed to less than its raw pre-copied increments.)
    assert!(
        (format >= 7 || sizes[1] < sizes[0]) && sizes[2] < sizes[1],
        "increments are smaller: {sizes:?}"
    );
    for v in 1..=3 {
        let e = Engine::open(Config::new(&copy)).unwrap();
        let big = e.alloc(1, BIG).unwrap();
        let small = e.alloc(2, SMALL).unwrap();
        let info = e.restore(v).unwrap();
        assert_eq!(info.tag, tag_of(format, v), "v{v}: the tag restore returns");
        assert_eq!(e.version_tag(v).unwrap(), tag_of(format, v));
        let (b, s) = expected(v);
        // SAFETY: alloc returned buffers of these lengths.
        unsafe {
            assert!(
                std::slice::from_raw_parts(big, BIG) == &b[..],
                "v{v} region 1"
            );
            assert!(
                std::slice::from_raw_parts(small, SMALL) == &s[..],
                "v{v} region 2"
            );
        }
    }
    // An old store carries on with the current format: the new version is bound to its
    // older-format parent and restores in a fresh process.
    let upgraded = {
        let e = Engine::open(Config::new(&copy)).unwrap();
        let big = e.alloc(1, BIG).unwrap();
        e.alloc(2, SMALL).unwrap();
        e.restore(3).unwrap();
        // SAFETY: alloc returned BIG bytes.
        unsafe { *big.add(7) ^= 0xFF };
        let info = e.checkpoint().unwrap();
        // The changed page, and region 2 whole: it now starts at another offset in its page.
        assert_eq!(
            (info.parent, info.pages),
            (3, 2),
            "an increment of the old version"
        );
        // SAFETY: as above.
        (
            info.version,
            unsafe { std::slice::from_raw_parts(big, BIG) }.to_vec(),
        )
    };
    {
        let e = Engine::open(Config::new(&copy)).unwrap();
        let big = e.alloc(1, BIG).unwrap();
        e.alloc(2, SMALL).unwrap();
        e.restore(upgraded.0).unwrap();
        // SAFETY: alloc returned BIG bytes.
        assert!(unsafe { std::slice::from_raw_parts(big, BIG) } == &upgraded.1[..]);
    }
    let report = ickpt::read::verify::verify_store(
        &ickpt::store::DirStore::open_read(&copy).unwrap(),
        &mut |_, _| {},
    )
    .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.versions, vec![1, 2, 3, upgraded.0]);
    for v in 1..=3 {
        let store = ickpt::store::DirStore::open_read(&copy).unwrap();
        let ov = ickpt::read::catalog::Catalog::new(&store)
            .unwrap()
            .open(v)
            .unwrap();
        assert_eq!(ov.meta.header.format_version, format);
        assert_eq!(ov.meta.header.tag, tag_of(format, v), "v{v}: tag");
        assert_eq!(ov.meta.stats.is_some(), format >= 2, "v{v}: commit stats");
        assert_eq!(
            ov.meta.header.store_id.is_some(),
            format >= 3,
            "v{v}: store id"
        );
        let attempts = ov.meta.stats.map_or(0, |s| s.phases.attempts);
        assert_eq!(attempts >= 1, format >= 4, "v{v}: phases");
        let bound = ov.meta.header.parent_meta_crc != 0;
        assert_eq!(bound, format >= 3 && v > 1, "v{v}: parent checksum");
        // The v6 fixture was written with zstd (format 6 brought compression): every
        // version's pages are in frames.
        // The v7 one's increments hold only pre-copied pages, stored raw: no frame table.
        assert_eq!(
            !ov.meta.frames.is_empty(),
            format == 6 || (format >= 7 && v == 1),
            "v{v}: frames (compressed pages)"
        );
        let precopy = ov.meta.stats.map(|s| s.precopy).unwrap_or_default();
        if format >= 7 {
            assert_eq!(precopy.strategy, 1, "v{v}: blind pre-copy recorded");
            let pages = if v > 1 { ov.meta.footer.page_count } else { 0 };
            assert_eq!(precopy.pages, pages, "v{v}: the increments all pre-copied");
            assert_eq!(precopy.conflicts, u64::from(v == 2), "v{v}: conflicts");
        } else {
            assert_eq!(precopy, Default::default(), "v{v}: no pre-copy");
        }
    }
}
