//! A store dropped in a forked child closes nothing of the child's: the fork handler already
//! closed the child's copy of the store lock, so closing that number again in the store's
//! drop closed whatever file the child had opened since (found in review). Own binary: the
//! child must fork from a process with no other test threads (it allocates).

mod common;
use common::scratch_dir;
use ickpt::store::DirStore;
use std::os::fd::AsRawFd;

#[test]
fn a_store_dropped_in_a_forked_child_leaves_the_childs_files_open() {
    let dir = scratch_dir("fork-store");
    let store = DirStore::open_write(&dir).unwrap();
    let witness = dir.join("witness");
    std::fs::write(&witness, b"x").unwrap();
    // SAFETY: this binary's only test thread forks; the child uses async-signal-safe calls
    // and the allocator, which no other thread can hold here.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // The lowest free number: the one the fork handler just freed, if any.
        let f = std::fs::File::open(&witness).unwrap();
        drop(store);
        // SAFETY: fcntl on a number; F_GETFD only reads the descriptor's flags.
        let open = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFD) } != -1;
        std::mem::forget(f);
        // SAFETY: _exit ends the child without running the parent's test harness.
        unsafe { libc::_exit(if open { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's file was closed by the store's drop (status {status:#x})"
    );
    // The parent's store and lock are untouched.
    drop(store);
    DirStore::open_write(&dir).unwrap();
}
