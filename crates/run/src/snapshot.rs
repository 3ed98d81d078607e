//! ickpt's own memory captured by value at one instant of each checkpoint.
//!
//! The checkpoint runs on ickpt's own thread, which allocates, writes its stack and updates
//! the engine while the version is being written. The program's memory is not touched then
//! (its threads are stopped), so the version holds it as of the stop; ickpt's own state must
//! be taken at one instant too, and one at which it is consistent: before the engine starts
//! the version, with no lock of ickpt's held. This copies every span of it (its heap, its own
//! mappings, its writable data, the checkpointing thread's stack with the frame it resumes
//! from) into the snapshot buffer, a region the version stores like any other. Pages neither
//! present nor swapped out (`/proc/self/pagemap`) were never written: left zero, not read.

// Reads ickpt's own memory through raw pointers.
#![allow(unsafe_code)]

use crate::buffer::Buffer;
use ickpt_process::Snapshot;

/// Copy each span into `buf` one after another, filling `table` (whose capacity the caller
/// reserved: nothing here allocates). `entries`: room for a pagemap word (8 bytes) per page
/// of the largest span, outside ickpt's heap; `pagemap`: this process's `/proc/self/pagemap`.
pub fn take(
    buf: &mut Buffer,
    spans: &[(u64, u64)],
    table: &mut Vec<Snapshot>,
    pagemap: &std::fs::File,
    entries: &mut [u8],
) -> Result<u64, String> {
    // The spans' extent, said before ickpt's heap (the buffer's marks among it) is copied:
    // the caller clears the buffer past it, so a restart to this capture finds nothing
    // there and need not read the rest of the buffer.
    let extent: u64 = spans
        .iter()
        .map(|s| (s.1 - s.0).next_multiple_of(4096))
        .sum();
    buf.promise(extent as usize);
    let mut offset = 0u64;
    for &(start, end) in spans {
        let len = end - start;
        if (offset + len) as usize > buf.len {
            return Err("the snapshot buffer is too small".into());
        }
        let pages = len.div_ceil(4096) as usize;
        let bytes = entries
            .get_mut(..pages * 8)
            .ok_or("the snapshot's page list is too small")?;
        let known = crate::pagemap::read(pagemap, start, bytes);
        for p in 0..pages {
            let at = start + (p as u64) * 4096;
            let n = 4096.min(end - at) as usize;
            let dst = (offset + (p as u64) * 4096) as usize;
            if known && !crate::pagemap::backed(crate::pagemap::word(bytes, p)) {
                buf.write_zero(dst, n);
                continue;
            }
            // SAFETY: a readable page of ickpt's own (the caller passes readable spans only).
            let src = unsafe { std::slice::from_raw_parts(at as *const u8, n) };
            buf.write_changed(dst, src);
        }
        table.push(Snapshot {
            target: start,
            len,
            offset,
        });
        offset += len.next_multiple_of(4096);
    }
    Ok(offset)
}
