//! A record decodes to exactly what was encoded, from its region's zero-padded bytes too.

mod common;

use ickpt_process::{decode, encode, record_len, RecordError};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn decode_gives_back_what_encode_wrote(r in common::record(), pad in 0usize..5000) {
        let mut bytes = encode(&r).unwrap();
        prop_assert_eq!(u64::from_le_bytes(bytes[16..24].try_into().unwrap()), bytes.len() as u64);
        let len = bytes.len();
        bytes.resize(len + pad, 0);
        prop_assert_eq!(record_len(&bytes), Some(len));
        prop_assert_eq!(decode(&bytes).unwrap(), r);
    }
}

#[test]
fn the_sample_round_trips_in_a_zero_padded_page() {
    let r = common::sample();
    let mut bytes = encode(&r).unwrap();
    assert_eq!(&bytes[..8], b"ICKPTPRC");
    bytes.resize(bytes.len().next_multiple_of(4096), 0);
    assert_eq!(decode(&bytes).unwrap(), r);
}

#[test]
fn record_len_needs_a_header_whose_length_fits() {
    let bytes = encode(&common::sample()).unwrap();
    assert_eq!(record_len(&bytes[..bytes.len() - 1]), None);
    assert_eq!(record_len(&bytes[..20]), None);
    assert_eq!(record_len(&[0u8; 4096]), None);
}

#[test]
fn a_non_zero_byte_after_the_record_is_refused() {
    let mut bytes = encode(&common::sample()).unwrap();
    let end = bytes.len();
    bytes.extend_from_slice(&[0, 0, 7, 0]);
    assert_eq!(
        decode(&bytes).unwrap_err(),
        RecordError::Invalid {
            offset: end as u64 + 2,
            what: "padding after the record",
            why: "not zero".into()
        }
    );
}

#[test]
fn encode_refuses_what_decode_would_refuse() {
    let mut r = common::sample();
    r.mappings[1].start = 0x2000; // overlaps the first
    let e = encode(&r).unwrap_err().to_string();
    assert!(e.contains("mapping start") && e.contains("0x2000"), "{e}");

    let mut r = common::sample();
    r.cwd = "x".repeat(4097);
    let e = encode(&r).unwrap_err().to_string();
    assert!(e.contains("cwd is 4097, above the limit 4096"), "{e}");

    let mut r = common::sample();
    r.sigactions.pop();
    let e = encode(&r).unwrap_err().to_string();
    assert!(e.contains("signal actions"), "{e}");

    let mut r = common::sample();
    r.auxv = vec![0; 130];
    let e = encode(&r).unwrap_err().to_string();
    assert!(e.contains("auxv words is 130, above the limit 128"), "{e}");
}

/// A record of format 1 (`ickpt` before thread names and timers), checked in as it was
/// written: it decodes, without names or timers, and encodes again in the current format.
#[test]
fn a_format_1_record_still_decodes() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/record-format-1.bin"
    );
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[8..10], &1u16.to_le_bytes());
    let r = decode(&bytes).unwrap();
    assert_eq!(r, common::sample_format_1());
    assert_eq!(decode(&encode(&r).unwrap()).unwrap(), r);
}

#[test]
fn a_format_1_record_with_a_timer_count_is_refused() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/record-format-1.bin"
    );
    let mut bytes = std::fs::read(path).unwrap();
    bytes[56] = 1;
    let e = decode(&bytes).unwrap_err().to_string();
    assert!(e.contains("reserved header bytes"), "{e}");
}
