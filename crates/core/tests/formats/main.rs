//! Stored bytes: every format version's fixture, the fuzz corpus replayed, compression end to end.
//!
//! One test binary per topic, one file per concern (fewer binaries to link).

#[path = "../common/mod.rs"]
mod common;

mod compression;
mod fixtures_old_formats;
mod fuzz_corpus;
