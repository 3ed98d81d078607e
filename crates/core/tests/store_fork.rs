//! The store lock across forks. A store dropped in a forked child closes nothing of the
//! child's: the fork handler already closed the child's copy of the store lock, so closing
//! that number again in the store's drop closed whatever file the child had opened since
//! (found in review). A store its owner closes is unlocked at once, whatever copies of the
//! lock's descriptor children still hold. Own binary: a child that allocates must fork from
//! a process running no other code (glibc's fork keeps the allocator consistent; the other
//! test's child allocates nothing).

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

#[test]
fn a_closed_store_reopens_at_once_while_a_spawned_child_shares_its_lock() {
    // CI failure: a test reopened its store right after closing it while another test thread
    // was spawning `ickpt`; the child, between its fork and its exec, still shared the lock's
    // descriptor, so the lock outlived the close and the reopen said "locked". A raw clone
    // copies the descriptors without the fork handler, as posix_spawn does.
    let dir = scratch_dir("spawn-lock");
    let store = DirStore::open_write(&dir).unwrap();
    let mut pipe = [0i32; 2];
    // SAFETY: pipe writes two descriptors into the array it is given.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    // SAFETY: a fork without fork handlers; the child makes only async-signal-safe calls.
    let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0) } as i32;
    assert!(pid >= 0);
    if pid == 0 {
        let mut b = 0u8;
        // SAFETY: the child waits on the pipe (the parent's end closing ends it), then exits.
        unsafe {
            libc::close(pipe[1]);
            libc::read(pipe[0], (&mut b as *mut u8).cast(), 1);
            libc::_exit(0)
        };
    }
    // SAFETY: closing the parent's copy of the read end, which it never reads.
    unsafe { libc::close(pipe[0]) };
    drop(store);
    let reopened = DirStore::open_write(&dir);
    // SAFETY: closing the write end ends the child's read; then wait for it.
    unsafe { libc::close(pipe[1]) };
    let mut status = 0;
    // SAFETY: waits for the child cloned above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    reopened.expect("a store its owner closed must not stay locked by a child's copy");
}
