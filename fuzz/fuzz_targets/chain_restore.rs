//! Arbitrary bytes as a store of version files, surveyed, verified, chained and restored:
//! `ickpt::fuzzing::chain_restore_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ickpt::fuzzing::chain_restore_target(data));
