//! Arbitrary bytes as the process record of a whole-process checkpoint:
//! `ickpt_process::fuzz_target`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ickpt_process::fuzz_target(data));
