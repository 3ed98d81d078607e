//! The store: opening, locking, naming and overwriting version files, a directory shared with other
//! users, and power loss at every file-system operation.
//!
//! One test binary per topic, one file per concern (fewer binaries to link).

#[path = "../common/mod.rs"]
mod common;

mod power_loss;
mod store_lock;
mod store_open;
mod store_overwrite;
mod store_rename;
mod store_safety;
