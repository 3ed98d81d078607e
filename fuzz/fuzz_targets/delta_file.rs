//! A delta file (a section save): `ickpt::fuzzing::delta_file_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ickpt::fuzzing::delta_file_target(data));
