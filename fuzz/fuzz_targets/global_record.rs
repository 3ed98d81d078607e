//! A global-commit record under a file name's number: `ickpt::fuzzing::global_record_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ickpt::fuzzing::global_record_target(data));
