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
/// of the largest span at least, outside ickpt's heap; `pagemap`: this process's
/// `/proc/self/pagemap`.
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
    // The pages whose pagemap words `entries` holds, and whether they could be read.
    let mut window = (0u64, 0u64);
    let mut known = false;
    let room = (entries.len() / 8) as u64;
    for (i, &(start, end)) in spans.iter().enumerate() {
        let len = end - start;
        if (offset + len) as usize > buf.len {
            return Err("the snapshot buffer is too small".into());
        }
        let pages = len.div_ceil(4096) as usize;
        let (first, last) = (start / 4096, end.div_ceil(4096));
        if first < window.0 || last > window.1 {
            if last - first > room {
                return Err("the snapshot's page list is too small".into());
            }
            window = (first, read_ahead(&spans[i + 1..], first, last, room));
            let n = (window.1 - window.0) as usize;
            known = crate::pagemap::read(pagemap, first * 4096, &mut entries[..n * 8]);
        }
        let skip = (first - window.0) as usize;
        for p in 0..pages {
            let at = start + (p as u64) * 4096;
            let n = 4096.min(end - at) as usize;
            let dst = (offset + (p as u64) * 4096) as usize;
            if known && !crate::pagemap::backed(crate::pagemap::word(entries, skip + p)) {
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

/// Pages apart that one read of pagemap still covers: walking a gap costs less than another
/// read (about 1.2 us each; ickpt's memory is 40-50 spans, most of them a few pages, many
/// close together).
const GAP_PAGES: u64 = 32;

/// Where one read of pagemap from page `first` (a span ending at page `last`) ends: past as
/// many of the `next` spans as follow in address order, close enough, and fit in `room`.
fn read_ahead(next: &[(u64, u64)], first: u64, last: u64, room: u64) -> u64 {
    let mut end = last;
    for &(s, e) in next {
        let (f, l) = (s / 4096, e.div_ceil(4096));
        if f < end || f - end > GAP_PAGES || l - first > room {
            break;
        }
        end = l;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::take;
    use crate::buffer::TestBuffer;

    /// Spans close together share a read of pagemap, spans far apart or past the room for
    /// its words do not; whichever way, the buffer holds each span's bytes, one after
    /// another, with zeros for the pages never backed.
    #[test]
    fn spans_read_together_or_apart_are_copied_whole() {
        let mut t = TestBuffer::new("snapshot", 4 << 20);
        let (buf, pagemap) = (&mut t.buf, &t.pagemap);
        const PAGES: usize = 400;
        // SAFETY: a fresh private anonymous mapping, ours alone.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGES * 4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        } as usize;
        assert_ne!(base as *mut libc::c_void, libc::MAP_FAILED);
        // Every third page backed, with bytes of its own.
        for p in (0..PAGES).step_by(3) {
            // SAFETY: inside the mapping made above.
            unsafe { std::ptr::write_bytes((base + p * 4096) as *mut u8, p as u8 | 1, 4096) };
        }
        let page = |p: usize| (base + p * 4096) as u64;
        let spans = [
            (page(0), page(5)),
            (page(10), page(12)),
            (page(40), page(41)),
            (page(41), page(90)),
            (page(200), page(203)),
            (page(203), page(260)),
            (page(300), page(301)),
        ];
        // Room for 60 pages' words: the span of 57 pages is read alone.
        for room in [60usize, 1000] {
            let mut entries = vec![0u8; room * 8];
            let mut table = Vec::with_capacity(spans.len());
            let used = take(buf, &spans, &mut table, pagemap, &mut entries).unwrap();
            let mut want = Vec::new();
            for &(s, e) in &spans {
                for at in (s..e).step_by(4096) {
                    let p = (at as usize - base) / 4096;
                    want.extend(std::iter::repeat_n(
                        if p % 3 == 0 { p as u8 | 1 } else { 0 },
                        4096,
                    ));
                }
            }
            assert_eq!(used as usize, want.len());
            assert!(buf.bytes()[..want.len()] == want[..], "room {room}");
            assert_eq!(table.len(), spans.len());
        }
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(base as *mut libc::c_void, PAGES * 4096) };
    }
}
