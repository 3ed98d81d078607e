//! Delta files: what a section saves and `ickpt merge` combines. Round trip, every byte
//! covered, crafted files refused, merges of different layouts refused.

use ickpt_format::{DeltaFile, FormatError, RegionDelta};

mod common;

fn sample(seed: u8) -> DeltaFile {
    DeltaFile {
        page_size: 4096,
        saves: 1,
        regions: vec![
            RegionDelta {
                id: 1,
                length: 10_000,
                words: vec![
                    (0, [seed; 4]),
                    (8, [seed, 1, 2, 3]),
                    (9996, [seed, 0, 0, 0]),
                ],
            },
            RegionDelta {
                id: 7,
                length: 8192,
                words: (0..1024)
                    .map(|k| (4096 + k * 4, [seed, k as u8, 0, 9]))
                    .collect(),
            },
        ],
    }
}

#[test]
fn a_delta_file_reads_back_as_written() {
    let d = sample(5);
    let f = d.encode();
    assert_eq!(DeltaFile::decode(&f).unwrap(), d);
    // Small: the second region's whole page is one entire-page record.
    assert!(
        f.len() < 32 + 2 * 32 + 3 * 12 + 8 + 4096 + 20,
        "{} bytes",
        f.len()
    );
}

#[test]
fn flipping_any_byte_of_a_delta_file_is_detected() {
    let f = sample(5).encode();
    common::every_flip_is_detected(&f, |g| DeltaFile::decode(g).map(drop));
}

#[test]
fn crafted_delta_files_are_refused_before_any_record_is_used() {
    let f = sample(5).encode();
    let reseal = |g: &mut Vec<u8>| {
        let n = g.len() - 8;
        let c = ickpt_format::crc(&g[..n]);
        g[n..n + 4].copy_from_slice(&c.to_le_bytes());
    };
    type Change = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Change)> = vec![
        (
            "regions",
            Box::new(|g| g[16..20].copy_from_slice(&u32::MAX.to_le_bytes())),
        ),
        (
            "table runs past",
            Box::new(|g| g[16..20].copy_from_slice(&1000u32.to_le_bytes())),
        ),
        (
            "run past the file's end",
            Box::new(|g| g[32 + 16..32 + 24].copy_from_slice(&(1u64 << 40).to_le_bytes())),
        ),
        (
            "out of order",
            Box::new(|g| g[64..72].copy_from_slice(&1u64.to_le_bytes())),
        ),
        (
            "implausible length",
            Box::new(|g| g[32 + 8..32 + 16].copy_from_slice(&0u64.to_le_bytes())),
        ),
        (
            "page size",
            Box::new(|g| g[12..16].copy_from_slice(&1000u32.to_le_bytes())),
        ),
        (
            "region 1: record at region offset",
            Box::new(|g| {
                // The first record's offset moved past the region (10000 bytes).
                let at = 32 + 2 * 32;
                g[at..at + 8].copy_from_slice(&20_000u64.to_le_bytes());
            }),
        ),
        (
            "after the last region",
            Box::new(|g| {
                // A byte more before the trailer than the regions' records account for.
                let n = g.len() - 8;
                g.insert(n, 0);
            }),
        ),
    ];
    for (want, change) in cases {
        let mut g = f.clone();
        change(&mut g);
        reseal(&mut g);
        let e = DeltaFile::decode(&g).unwrap_err().to_string();
        assert!(e.contains(want), "{want}: {e}");
    }
    let mut g = f.clone();
    g[8] = 2;
    reseal(&mut g);
    assert!(matches!(
        DeltaFile::decode(&g),
        Err(FormatError::UnsupportedVersion { found: 2, .. })
    ));
    assert!(DeltaFile::decode(&f[..20]).is_err());
    assert!(DeltaFile::decode(b"not a delta file at all, not at all").is_err());
}

#[test]
fn merging_takes_the_later_word_and_refuses_other_layouts() {
    let (a, b) = (sample(1), sample(2));
    let m = a.merge(&b).unwrap();
    assert_eq!(m.saves, 2);
    assert_eq!(m.regions[0].words[0], (0, [2; 4]));
    let mut other = sample(2);
    other.regions[1].length = 8196;
    let e = a.merge(&other).unwrap_err().to_string();
    assert!(
        e.contains("region 7 of 8192 bytes") && e.contains("region 7 of 8196 bytes"),
        "{e}"
    );
    let mut other = sample(2);
    other.page_size = 8192;
    assert!(a.merge(&other).is_err());
    let mut other = sample(2);
    other.regions.pop();
    assert!(a.merge(&other).is_err());
}
