//! The read side: listing a store's versions and opening them checked (`catalog`), the
//! reverse scan that rebuilds memory from a chain (`reverse_scan`), and whole-store
//! verification (`verify`). The engine's restore, the CLI and garbage collection all go
//! through here, so what one accepts the others accept.

pub mod catalog;
pub mod delta_file;
pub mod global_records;
pub mod reverse_scan;
pub mod section_saves;
pub mod verify;
