//! Arbitrary bytes as a version file whose checksums are recomputed before it is read, so
//! mutations reach the rules behind them: `ickpt::fuzzing::read_meta_resealed_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ickpt::fuzzing::read_meta_resealed_target(data));
