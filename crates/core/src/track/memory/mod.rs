//! The memory tracking works on: a tracked region and its dirty bitmap, the lock-free
//! registry the fault path finds regions in, the mappings ickpt keeps for itself (which no
//! region may cover), and the alternate signal stack a thread protecting its own stack needs.

pub(crate) mod bitmap;
pub(crate) mod own_mem;
pub(crate) mod region;
pub(crate) mod registry;
pub(crate) mod stack;
