//! What `ickpt run` (the library preloaded into an unmodified program) needs of the core
//! beyond the engine: which mappings are ickpt's own, and a checkpointing thread made ready
//! to checkpoint while the program's threads are stopped anywhere.

/// ickpt's own anonymous mappings, as (start, end, scratch), in no order: not the program's
/// memory, though they look like it in `/proc/self/maps`; scratch ones hold nothing that
/// matters between two checkpoints. Lock- and allocation-free but for pushing onto `out`.
pub fn own_mappings(out: &mut Vec<(usize, usize, bool)>) {
    crate::sys::own_spans::spans(out);
}

/// Read, now, what the calling thread would otherwise look up during its first checkpoint
/// through calls that may allocate with the C library's malloc (its stack bounds): the
/// thread will checkpoint while other threads are stopped, perhaps inside malloc.
pub fn prepare_checkpointing_thread() {
    crate::track::stack::on_this_stack((0, 0));
}

/// Have ickpt's own threads (the async committer) list their stacks among ickpt's own
/// mappings as they start: they run while the program does, and their stacks must not be
/// tracked (and fenced) as the program's.
pub fn own_thread_stacks() {
    crate::sys::own_spans::note_thread_stacks();
}

/// Sleep while `*word == expected`, at most `ms` milliseconds (a signal handler may call it:
/// one system call).
pub fn futex_wait(word: &std::sync::atomic::AtomicU32, expected: u32, ms: u64) {
    crate::sys::thread::futex_wait_for(word, expected, ms);
}

/// Wake every thread waiting on `word` (a signal handler may call it: one system call).
pub fn futex_wake(word: &std::sync::atomic::AtomicU32) {
    crate::sys::thread::futex_wake_all(word);
}

/// If the program installed a SIGSEGV handler of its own since ickpt started (libgfortran
/// does, at its start), install ickpt's again, the program's then receiving every fault that
/// is not ickpt's. Returns whether it had been replaced. Called while the program is stopped.
pub fn take_back_fault_handler() -> std::io::Result<bool> {
    crate::track::take_back_fault_handler()
}

/// CLOCK_MONOTONIC in nanoseconds (a signal handler may call it: one vDSO call).
pub fn monotonic_ns() -> u64 {
    crate::sys::thread::monotonic_ns()
}

/// Whether a descriptor open on `path` (as `/proc/self/fd` shows it) is the engine's own: a
/// temporary file in the store directory `store` (canonical), as pre-copy keeps the next
/// version's open until the checkpoint takes it over. It is not the program's and is gone
/// once the version is committed: a record of the process leaves it out, and the engine
/// forgets it after a restart (`Engine::resume_after_restart`).
pub fn is_store_temporary(store: &std::path::Path, path: &str) -> bool {
    let p = std::path::Path::new(path);
    p.parent() == Some(store)
        && p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(crate::store::dir::is_temporary_name)
}

/// Whether a descriptor open on `path` is the store directory `store` (canonical) or its
/// lock file, which the engine holds open, and the lock held, for as long as it is open.
pub fn is_store_held(store: &std::path::Path, path: &str) -> bool {
    let p = std::path::Path::new(path);
    p == store || p == store.join(crate::store::dir::LOCK)
}

/// Bytes in a mapping of ickpt's own that a whole-process checkpoint does not store
/// (scratch): room for what a capture reads while it copies ickpt's state, which must not
/// change the state it copies (on ickpt's heap, it would be copied too, and differ at every
/// capture).
pub struct ScratchBytes {
    mem: crate::track::OwnBytes,
}

impl ScratchBytes {
    /// At least `len` zeroed bytes (whole pages).
    pub fn new(len: usize) -> std::io::Result<ScratchBytes> {
        Ok(ScratchBytes {
            mem: crate::track::OwnBytes::scratch(len)?,
        })
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.mem.as_mut_slice()
    }
}
