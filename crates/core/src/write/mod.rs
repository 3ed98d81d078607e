//! What ickpt writes besides version files, read back through `read`: a section's saves in
//! a store. Above `read`, whose names and checks a writer follows, and below `engine`, which
//! saves sections through it.

mod section_save;

pub(crate) use section_save::section_save;
