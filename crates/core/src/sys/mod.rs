//! Every raw system call ickpt makes lives below this module. Nothing here holds policy.

pub mod altstack;
pub mod fs;
pub mod io;
pub mod mem;
pub mod own_spans;
pub mod pagemap;
pub mod random;
pub mod signal;
pub mod thread;
pub mod uffd;
pub mod unwind;
pub mod userfault;
pub mod zstd;

use std::sync::OnceLock;

/// The kernel's base page size, read once.
pub fn page_size() -> usize {
    static PS: OnceLock<usize> = OnceLock::new();
    *PS.get_or_init(|| {
        // SAFETY: sysconf has no memory-safety preconditions.
        let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(ps)
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096)
    })
}

/// The calling thread's errno as an io::Error.
pub fn last_os_error() -> std::io::Error {
    std::io::Error::last_os_error()
}
