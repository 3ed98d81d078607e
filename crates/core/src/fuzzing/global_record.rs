//! The `global_record` target: a global-commit record file, decoded and checked against the
//! rules of docs/FORMAT.md.

use ickpt_format::{crc, limits, GlobalRecord};

/// Target `global_record`: a flag byte, the number in the record's file name (8 bytes,
/// little-endian), then the record file. With the flag's low bit set the record's checksum is
/// recomputed first, so mutations reach the rules behind it. `GlobalRecord::decode` never
/// panics; a record it accepts encodes back to exactly its bytes and obeys docs/FORMAT.md.
pub fn global_record_target(data: &[u8]) {
    let Some((&flag, rest)) = data.split_first() else {
        return;
    };
    if rest.len() < 8 {
        return;
    }
    let (name, record) = rest.split_at(8);
    let global = u64::from_le_bytes(name.try_into().expect("8 bytes"));
    let mut bytes = record.to_vec();
    if flag & 1 == 1 && bytes.len() >= 60 {
        let c = crc(&bytes[..56]);
        bytes[56..60].copy_from_slice(&c.to_le_bytes());
    }
    if let Ok(r) = GlobalRecord::decode(&bytes, global) {
        assert_eq!(
            &r.encode()[..],
            &bytes[..],
            "an accepted record encodes to its bytes"
        );
        assert_eq!(r.global, global, "the record is the one its name says");
        assert!((1..=limits::MAX_VERSION).contains(&r.version));
    }
}
