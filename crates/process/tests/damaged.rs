//! A damaged or crafted record is an error naming what is wrong, never a panic and never an
//! allocation sized by a count the input cannot hold.

mod common;

use ickpt_process::{decode, encode, RecordError};
use proptest::prelude::*;

/// Whatever `decode` makes of `bytes`, it returns; what it accepts in the current format is
/// canonical: it encodes back to the same record bytes, followed by the zeros it allowed (an
/// older format's record encodes in the current one).
fn decode_checked(bytes: &[u8]) -> Result<(), RecordError> {
    let r = decode(bytes)?;
    if bytes[8..10] != ickpt_process::layout::FORMAT.to_le_bytes() {
        return Ok(());
    }
    let again = encode(&r).expect("an accepted record encodes");
    assert_eq!(&bytes[..again.len()], &again[..]);
    assert!(bytes[again.len()..].iter().all(|&b| b == 0));
    Ok(())
}

fn set_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = encode(&common::sample()).unwrap();
    for len in 0..bytes.len() {
        assert!(decode(&bytes[..len]).is_err(), "truncated to {len} bytes");
    }
}

#[test]
fn every_bit_flip_is_an_error_or_a_canonical_record() {
    let bytes = encode(&common::sample()).unwrap();
    for at in 0..bytes.len() {
        for bit in [0, 7] {
            let mut b = bytes.clone();
            b[at] ^= 1 << bit;
            let _ = decode_checked(&b);
        }
    }
}

#[test]
fn each_kind_of_damage_is_named() {
    let good = encode(&common::sample()).unwrap();
    let damaged = |at: usize, bytes: &[u8]| {
        let mut b = good.clone();
        b[at..at + bytes.len()].copy_from_slice(bytes);
        decode(&b).unwrap_err()
    };
    assert_eq!(damaged(0, b"ICKPTVER"), RecordError::BadMagic);
    assert_eq!(
        damaged(8, &[3, 0]),
        RecordError::NewerFormat {
            found: 3,
            supported: 2
        }
    );
    let named = |e: RecordError, what: &str| {
        let s = e.to_string();
        assert!(s.contains(what), "{s} should name {what}");
    };
    named(damaged(8, &[0, 0]), "format");
    named(damaged(12, &3000u32.to_le_bytes()), "page size");
    named(damaged(16, &1u64.to_le_bytes()), "total length");
    named(damaged(28, &0o1000u32.to_le_bytes()), "umask");
    named(damaged(44, &63u32.to_le_bytes()), "signal actions");
    named(damaged(60, &[1]), "reserved header bytes");
    // The kernel string's first byte: an invalid UTF-8 lead byte.
    named(damaged(226, &[0xff]), "kernel");
}

#[test]
fn a_count_the_input_cannot_hold_is_refused_before_anything_is_allocated() {
    let mut b = encode(&common::sample()).unwrap();
    // Within the limit, but 2^20 mappings of 42 bytes or more need 42 MiB.
    set_u32(&mut b, 36, 1 << 20);
    match decode(&b).unwrap_err() {
        RecordError::Truncated { what, offset, .. } => {
            assert_eq!((what, offset), ("mappings", 36))
        }
        e => panic!("{e}"),
    }
    for (at, what, limit) in [
        (32, "auxv words", 128u64),
        (36, "mappings", 1 << 20),
        (40, "threads", 1 << 16),
        (48, "descriptors", 1 << 20),
        (52, "snapshots", 1 << 20),
        (56, "timers", 1 << 16),
    ] {
        let mut b = encode(&common::sample()).unwrap();
        set_u32(&mut b, at, u32::MAX);
        assert_eq!(
            decode(&b).unwrap_err(),
            RecordError::OverLimit {
                offset: at as u64,
                what,
                value: u32::MAX as u64,
                limit
            }
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = decode_checked(&bytes);
    }

    #[test]
    fn random_edits_of_a_record_never_panic(
        r in common::record(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut b = encode(&r).unwrap();
        for (i, v) in edits {
            let at = i.index(b.len());
            b[at] = v;
        }
        if truncate {
            b.truncate(cut.index(b.len()));
        }
        let _ = decode_checked(&b);
    }
}

/// Where the sample's first thread entry and first timer entry start.
fn thread_and_timer(b: &[u8]) -> (usize, usize) {
    let frame = 0x9f00u64.to_le_bytes();
    let thread = b.windows(8).position(|w| w == frame).unwrap() - 8;
    let timers = common::sample().timers.len();
    (thread, b.len() - timers * ickpt_process::layout::TIMER_LEN)
}

#[test]
fn a_damaged_thread_name_or_timer_is_named() {
    let good = encode(&common::sample()).unwrap();
    let (thread, timer) = thread_and_timer(&good);
    let name = thread + 64;
    assert_eq!(&good[name..name + 4], b"app\0");
    let damaged = |at: usize, bytes: &[u8]| {
        let mut b = good.clone();
        b[at..at + bytes.len()].copy_from_slice(bytes);
        decode(&b).unwrap_err().to_string()
    };
    let named = |s: String, what: &str| assert!(s.contains(what), "{s} should name {what}");
    named(damaged(name + 5, b"x"), "a byte after its end is not zero");
    named(damaged(name, &[b'x'; 16]), "not terminated");
    named(damaged(timer, &(1u32 << 31).to_le_bytes()), "timer id");
    named(
        damaged(timer + 8, &3u32.to_le_bytes()),
        "timer notification",
    );
    // SIGEV_THREAD_ID without a thread, and a thread for SIGEV_SIGNAL.
    named(
        damaged(timer + 8, &4u32.to_le_bytes()),
        "timer notification",
    );
    named(
        damaged(timer + 16, &1u32.to_le_bytes()),
        "timer notification",
    );
    named(damaged(timer + 12, &65u32.to_le_bytes()), "timer signal");
    named(damaged(timer + 12, &0u32.to_le_bytes()), "timer signal");
    named(damaged(timer + 20, &[1]), "reserved timer bytes");
    // The second timer's id (3) no higher than the first's (0).
    named(
        damaged(
            timer + ickpt_process::layout::TIMER_LEN,
            &0u32.to_le_bytes(),
        ),
        "does not ascend",
    );
}
