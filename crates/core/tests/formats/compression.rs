//! Compression end to end (format 6): with every setting, versions of zero, compressible and
//! incompressible pages restore byte for byte in a fresh engine, sync and async; zero pages
//! take no bytes even with compression off; compressed files are smaller and say so.

use crate::common;
use common::{scratch_dir, Buf};
use ickpt::format::{Codec, CommitMode};
use ickpt::read::catalog::Catalog;
use ickpt::store::DirStore;
use ickpt::{Compression, Config, Engine};

const PS: usize = 4096;
const PAGES: usize = 96;

/// Page `p` at round `r`: a third zero, a third text, a third noise.
fn fill(buf: &mut [u8], round: u64) {
    for (p, page) in buf.chunks_mut(PS).enumerate() {
        match (p as u64 + round) % 3 {
            0 => page.fill(0),
            1 => page
                .iter_mut()
                .enumerate()
                .for_each(|(i, b)| *b = b"grid cell "[(i + p) % 10]),
            _ => common::noise(page, round << 32 | p as u64),
        }
    }
}

fn codecs(dir: &std::path::Path, v: u64) -> (u64, u64, Vec<Codec>) {
    let store = DirStore::open_read(dir).unwrap();
    let ov = Catalog::new(&store).unwrap().open(v).unwrap();
    let m = &ov.meta;
    (
        m.stored_bytes(),
        m.data_bytes(),
        m.frames.iter().map(|f| f.frame.codec).collect(),
    )
}

#[test]
fn every_setting_restores_byte_for_byte_sync_and_async() {
    let settings = [
        Compression::Auto,
        Compression::Off,
        Compression::FAST,
        Compression::Zstd(1),
        Compression::HIGH,
        Compression::Zstd(-7),
    ];
    for mode in [CommitMode::Sync, CommitMode::Async] {
        for setting in settings {
            let dir = scratch_dir("compress");
            let mut buf = Buf::new(PAGES * PS);
            let mut cfg = Config::new(&dir);
            cfg.compression = setting;
            cfg.mode = mode;
            let e = Engine::open(cfg).unwrap();
            // SAFETY: `buf` outlives the engine (dropped first).
            unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
            let mut want = Vec::new();
            for round in 0..4 {
                fill(buf.slice_mut(), round);
                e.checkpoint().unwrap();
                e.wait().unwrap();
                want.push(buf.slice().to_vec());
            }
            drop(e);
            let (stored, raw, frames) = codecs(&dir, 1);
            assert_eq!(raw, (PAGES * PS) as u64);
            assert!(frames.contains(&Codec::Zero), "{setting}: zero frames");
            let raw_pages = setting == Compression::Off
                || (setting == Compression::Auto && mode == CommitMode::Sync);
            match setting {
                _ if raw_pages => {
                    assert!(!frames.contains(&Codec::Zstd), "{setting}");
                    assert!(frames.contains(&Codec::Raw), "{setting}");
                    assert_eq!(
                        stored,
                        (PAGES / 3 * 2 * PS) as u64,
                        "{setting}: zeros left out"
                    );
                }
                _ => {
                    assert!(frames.contains(&Codec::Zstd), "{setting}: text compressed");
                    assert!(stored < (PAGES / 3 * PS + PS) as u64, "{setting}: {stored}");
                }
            }
            for (v, want) in want.iter().enumerate() {
                let e = Engine::open(Config::new(&dir)).unwrap();
                let m = e.alloc(1, PAGES * PS).unwrap();
                e.restore(v as u64 + 1).unwrap();
                // SAFETY: alloc returned PAGES * PS bytes.
                let got = unsafe { std::slice::from_raw_parts(m, PAGES * PS) };
                assert!(
                    got == &want[..],
                    "{mode:?} {setting}: version {} differs",
                    v + 1
                );
            }
            let report = ickpt::read::verify::verify_store(
                &DirStore::open_read(&dir).unwrap(),
                &mut |_, _| {},
            )
            .unwrap();
            assert!(report.problems.is_empty(), "{:?}", report.problems);
        }
    }
}

#[test]
fn a_store_mixes_settings_across_versions() {
    // A restart with another setting carries the chain on: each file says how it is stored.
    let dir = scratch_dir("compress-mixed");
    let mut buf = Buf::new(PAGES * PS);
    let mut want = Vec::new();
    for (round, setting) in [Compression::Off, Compression::HIGH, Compression::FAST]
        .into_iter()
        .enumerate()
    {
        let mut cfg = Config::new(&dir);
        cfg.compression = setting;
        cfg.full_every = 10;
        let e = Engine::open(cfg).unwrap();
        // SAFETY: `buf` outlives the engine (dropped first).
        unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
        if round > 0 {
            e.restore(round as u64).unwrap();
        }
        fill(buf.slice_mut(), round as u64 + 10);
        assert_eq!(e.checkpoint().unwrap().version, round as u64 + 1);
        want = buf.slice().to_vec();
        drop(e);
    }
    let e = Engine::open(Config::new(&dir)).unwrap();
    let m = e.alloc(1, PAGES * PS).unwrap();
    e.restore(3).unwrap();
    // SAFETY: alloc returned PAGES * PS bytes.
    assert!(unsafe { std::slice::from_raw_parts(m, PAGES * PS) } == &want[..]);
}
