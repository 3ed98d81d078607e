//! The `delta_file` target: a delta file (a section save), decoded, encoded back, merged
//! with itself and applied.

use ickpt_format::crc;

/// Target `delta_file`: a flag byte, then a delta file (a section save, what `ickpt_inject`
/// and `ickpt merge` read). With the flag's low bit set its trailer checksum is recomputed
/// first, so mutations reach the records. `DeltaFile::decode` never panics; a file it accepts
/// holds only words inside its regions, aligned and ascending, encodes to `encoded_len`
/// bytes, decodes back to itself, merges with itself into itself, and applies to memory of
/// its regions' lengths without a write outside them.
pub fn delta_file_target(data: &[u8]) {
    use ickpt_format::delta::{self, DeltaShape, WORD};
    use ickpt_format::DeltaFile;
    let Some((&flag, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if flag & 1 == 1 && bytes.len() >= 8 {
        let end = bytes.len() - 8;
        let c = crc(&bytes[..end]);
        bytes[end..end + 4].copy_from_slice(&c.to_le_bytes());
    }
    let Ok(d) = DeltaFile::decode(&bytes) else {
        return;
    };
    for r in &d.regions {
        let mut next = 0;
        for (off, _) in &r.words {
            assert!(
                *off >= next && off % WORD == 0 && *off < r.length,
                "a word outside region {}",
                r.id
            );
            next = off + WORD;
        }
        // Bounded: a region this large is a legal header, not memory to allocate here.
        if r.length <= 1 << 20 {
            let shape = DeltaShape {
                page_size: d.page_size,
                region_len: r.length,
            };
            let mut mem = vec![0u8; r.length as usize];
            delta::apply(&shape, &r.words, &mut mem);
        }
    }
    let again = d.encode();
    assert_eq!(
        again.len() as u64,
        d.encoded_len(),
        "encoded_len is encode's length"
    );
    assert!(
        DeltaFile::decode(&again).is_ok_and(|back| back == d),
        "decode(encode(d)) == d"
    );
    let twice = d.merge(&d).expect("a delta merges with itself");
    assert!(
        twice
            .regions
            .iter()
            .zip(&d.regions)
            .all(|(a, b)| a.words == b.words),
        "merging a delta with itself changes no word"
    );
}
