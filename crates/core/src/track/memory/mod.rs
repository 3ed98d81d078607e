//! The memory tracking is built on, depending on nothing else of tracking: a dirty bitmap
//! that lives in ickpt's own mappings, and those mappings (which no region may cover).

pub(crate) mod bitmap;
pub(crate) mod own_mem;
