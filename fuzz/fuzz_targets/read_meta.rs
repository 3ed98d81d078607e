//! Arbitrary bytes as a version file, checksums and all: `ickpt::fuzzing::read_meta_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ickpt::fuzzing::read_meta_target(data));
