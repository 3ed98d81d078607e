//! What ickpt writes besides version files, read back through `read`: a section's saves in
//! a store, and delta files merged into a new one. Above `read`, whose names and checks a
//! writer follows, and below `engine`, which saves sections through it.

mod merge;
mod section_save;

pub use merge::{merge_files, Merged};
pub(crate) use section_save::section_save;
