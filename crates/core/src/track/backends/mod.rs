//! The kernel mechanisms that catch first writes, each a [`Tracker`](super::Tracker):
//! page protection and SIGSEGV, userfaultfd with a handler thread, and userfaultfd's async
//! write-protect read back with PAGEMAP_SCAN; and what the two userfaultfd ones share.

mod mprotect;
mod uffd;
mod uffd_async;
mod uffd_shared;

pub use mprotect::MprotectTracker;
pub(crate) use mprotect::{collect_pages_by_protection, take_back_fault_handler};
pub use uffd::{UffdSpin, UffdTracker};
pub use uffd_async::UffdAsyncTracker;
