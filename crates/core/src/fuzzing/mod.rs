//! The bodies of the fuzz targets. `fuzz/` (cargo-fuzz, nightly) calls them from libFuzzer,
//! and `tests/formats/fuzz_corpus.rs` (stable, `make test`) replays the checked-in corpus through
//! them, so CI runs exactly what was fuzzed. Not API: no stability promise.
//!
//! Each takes arbitrary bytes. An error from the reader is a fine outcome; a panic is a
//! finding: either the reader broke (overflow, out-of-bounds slice, allocation abort) or a
//! property asserted here failed.
//!
//! One file per target (`version_file.rs` holds both version-file targets; `input_store.rs`
//! builds `chain_restore`'s store from its bytes), beside what they share: an in-memory
//! store and the resealing of checksums.

mod chain_restore;
mod delta_file;
mod global_record;
mod input_store;
mod mem_store;
mod reseal;
mod version_file;

pub use chain_restore::chain_restore_target;
pub use delta_file::delta_file_target;
pub use global_record::global_record_target;
pub use input_store::{flag, input_store};
pub use mem_store::MemStore;
pub use reseal::{reseal, Sealed};
pub use version_file::{read_meta_resealed_target, read_meta_target};
