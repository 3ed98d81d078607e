//! A buffer of the library's own that the engine stores as a region under a reserved id: the
//! process record, and the snapshot of ickpt's own memory. Written page by page only where
//! the bytes changed, so an unchanged page costs nothing in the next increment. Each page
//! written is reported to the engine (`Engine::protect_reported`): only the capture writes
//! the buffers, with the program stopped and the commit before over, so they need neither a
//! write-protect fault per page nor a fence.

// A mapping of our own, written through raw pointers.
#![allow(unsafe_code)]

use ickpt::{Engine, ReportedWrites};

/// Region ids with the top bit set: program mappings are named by their start address,
/// which never has it.
pub const RECORD_ID: u64 = 1 << 63;
pub const SNAPSHOT_ID: u64 = (1 << 63) | 1;

pub struct Buffer {
    pub id: u64,
    pub start: usize,
    pub len: usize,
    /// How far the buffer will hold anything once the capture under way is over, set before
    /// ickpt's own state (this field among it) is copied: a restart to that capture's
    /// version finds it here.
    promised: Option<usize>,
    written: ReportedWrites,
    /// One bit a page, set where the page is known to hold only zeros: a clear passes it by
    /// without reading it, so it never reads the untouched rest of a large buffer, nor the
    /// pages of the snapshot's extent that ickpt's memory does not back (3,100 of 3,600 at
    /// 256 MiB; passing them by took 0.05-0.1 ms off the capture). Kept on ickpt's heap, so a
    /// restart brings it back from the middle of a capture: `restored` sets it again.
    zeros: Vec<u64>,
}

impl Buffer {
    /// A zeroed buffer of at least `len` bytes, protected as region `id`.
    pub fn new(engine: &Engine, id: u64, len: usize) -> Result<Buffer, String> {
        let len = len.next_multiple_of(1 << 20);
        // SAFETY: a fresh private anonymous mapping aliases no existing memory.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!(
                "mapping {len} bytes for ickpt's process record: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: the mapping just made, ours until `release`; only the capture writes it
        // (reporting each page), and not before the commit before is over (the
        // checkpointing thread waits for it).
        let written = unsafe { engine.protect_reported(id, p.cast(), len) }
            .map_err(|e| format!("tracking ickpt's own buffer: {e}"))?;
        Ok(Buffer {
            id,
            start: p as usize,
            len,
            promised: None,
            written,
            zeros: vec![u64::MAX; (len / 4096).div_ceil(64)],
        })
    }

    /// Replace with a zeroed buffer of at least `len` bytes under the same id (a new
    /// incarnation of the region, stored whole by the next version).
    pub fn grow(&mut self, engine: &Engine, len: usize) -> Result<(), String> {
        let _ = engine.unprotect(self.id);
        // SAFETY: our mapping, no longer tracked, and nothing refers to it any more.
        unsafe { libc::munmap(self.start as *mut libc::c_void, self.len) };
        *self = Buffer::new(engine, self.id, len)?;
        Ok(())
    }

    /// Write `src` at `offset`, touching only the pages whose bytes differ.
    pub fn write_changed(&mut self, offset: usize, src: &[u8]) {
        assert!(offset + src.len() <= self.len && offset % 4096 == 0);
        // SAFETY: inside the mapping (checked above); only this thread writes it.
        let dst =
            unsafe { std::slice::from_raw_parts_mut((self.start + offset) as *mut u8, src.len()) };
        for (i, (d, s)) in dst.chunks_mut(4096).zip(src.chunks(4096)).enumerate() {
            if d != s {
                d.copy_from_slice(s);
                self.written.written(offset + i * 4096, s.len());
                let page = offset / 4096 + i;
                self.zeros[page / 64] &= !(1 << (page % 64));
            }
        }
    }

    /// The buffer's bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: our mapping, `len` bytes; only this thread writes it, and not while the
        // borrow lasts.
        unsafe { std::slice::from_raw_parts(self.start as *const u8, self.len) }
    }

    /// Say that once the capture under way is over, the buffer holds nothing past `end`.
    pub fn promise(&mut self, end: usize) {
        self.promised = Some(end.min(self.len));
    }

    /// After a restart the buffer holds what the version stored, written after ickpt's own
    /// state (these bits among it) was captured, so the bits restored cannot be trusted.
    /// `held`: how far what the version stored goes, zeros after it; None when not known, and
    /// then all of the buffer is taken as written (the next clear reads it all). Below it, the
    /// pages `pagemap` (this process's) shows unbacked are zeros: the restart writes a page
    /// the version stored as zeros only where it is not zero already. So are the pages it
    /// compared and left as they were, which map the kernel's zero page and so show as
    /// backed: they are read here, once, rather than by the first capture, in the program's
    /// stop (2,260 of 2,500 pages at 256 MiB: the snapshot of the first capture after a
    /// restart took 0.42-0.94 ms reading them there, 0.26-0.34 ms without).
    pub fn restored(&mut self, held: Option<usize>, pagemap: &std::fs::File) {
        let below = held.map_or(self.len, |h| h.min(self.len)).div_ceil(4096);
        for (w, bits) in self.zeros.iter_mut().enumerate() {
            *bits = match below.saturating_sub(w * 64) {
                0 => u64::MAX,
                n if n >= 64 => 0,
                n => u64::MAX << n,
            };
        }
        let mut words = [0u8; 4096];
        for first in (0..below).step_by(words.len() / 8) {
            let n = (words.len() / 8).min(below - first);
            let at = (self.start + first * 4096) as u64;
            if !crate::pagemap::read(pagemap, at, &mut words[..n * 8]) {
                return;
            }
            for i in 0..n {
                let page = first + i;
                if !crate::pagemap::backed(crate::pagemap::word(&words, i))
                    || self.page_is_zero(page)
                {
                    self.zeros[page / 64] |= 1 << (page % 64);
                }
            }
        }
    }

    /// Whether page `page` of the buffer holds only zeros.
    fn page_is_zero(&self, page: usize) -> bool {
        let at = page * 4096;
        self.bytes()
            .get(at..at + 4096)
            .is_some_and(ickpt::format::is_zero)
    }

    /// How far the capture that ickpt's state was copied in promised the buffer holds
    /// anything (None: it promised nothing).
    pub fn promised(&self) -> Option<usize> {
        self.promised
    }

    /// Zero `len` bytes at `offset`, touching only pages not zero.
    pub fn write_zero(&mut self, offset: usize, len: usize) {
        self.zero(offset, len);
    }

    /// Zero the buffer from `offset` on.
    pub fn clear_from(&mut self, offset: usize) {
        self.zero(offset, self.len - offset);
    }

    /// Zero `offset..offset + len` where not known to be zeros, and remember the whole pages
    /// as zeros.
    fn zero(&mut self, offset: usize, len: usize) {
        const RUN: usize = 64 * 4096;
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let page = at / 4096;
            // 64 pages known to be zeros at once: most of a large buffer's untouched rest.
            if at % RUN == 0 && end - at >= RUN && self.zeros[page / 64] == u64::MAX {
                at += RUN;
                continue;
            }
            let n = (4096 - at % 4096).min(end - at);
            if self.zeros[page / 64] & (1 << (page % 64)) == 0 {
                // SAFETY: inside the mapping (callers stay below `len`); only this thread
                // writes it.
                let dst =
                    unsafe { std::slice::from_raw_parts_mut((self.start + at) as *mut u8, n) };
                if ickpt::format::zero_where_not(dst) {
                    self.written.written(at, n);
                }
                if n == 4096 {
                    self.zeros[page / 64] |= 1 << (page % 64);
                }
            }
            at += n;
        }
    }
}

/// For tests: a buffer of `len` bytes protected by an engine on a store of its own, and this
/// process's pagemap; the store goes with it.
#[cfg(test)]
pub struct TestBuffer {
    pub buf: Buffer,
    pub pagemap: std::fs::File,
    engine: Option<Engine>,
    dir: std::path::PathBuf,
}

#[cfg(test)]
impl TestBuffer {
    pub fn new(name: &str, len: usize) -> TestBuffer {
        let dir = std::env::temp_dir().join(format!("ickpt-run-{name}-{}", std::process::id()));
        let engine = Engine::open(ickpt::Config::new(&dir)).unwrap();
        TestBuffer {
            buf: Buffer::new(&engine, 1, len).unwrap(),
            pagemap: std::fs::File::open("/proc/self/pagemap").unwrap(),
            engine: Some(engine),
            dir,
        }
    }
}

#[cfg(test)]
impl Drop for TestBuffer {
    fn drop(&mut self) {
        drop(self.engine.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::TestBuffer;

    /// Whatever the known-zero pages let a clear pass by, the buffer holds what was written:
    /// random writes (zeros among them), clears from any byte, and restarts that put bytes
    /// back below the mark they promise, against a plain copy.
    #[test]
    fn a_buffer_holds_what_was_written_whatever_its_clears_skip() {
        let mut t = TestBuffer::new("buffer", 1 << 20);
        let (b, pagemap) = (&mut t.buf, &t.pagemap);
        let mut model = vec![0u8; b.len];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as usize
        };
        for _ in 0..3000 {
            let off = rnd() % 40 * 4096;
            let len = (1 + rnd() % 4) * 4096 - rnd() % 2 * 100;
            match rnd() % 5 {
                0 | 1 => {
                    let v = (rnd() % 3) as u8;
                    b.write_changed(off, &vec![v; len]);
                    model[off..off + len].fill(v);
                }
                // Clears start anywhere in a page, as the record's does (at its length).
                2 => {
                    let off = off + rnd() % 2 * 300;
                    b.write_zero(off, len);
                    model[off..off + len].fill(0);
                }
                3 => {
                    let off = off + rnd() % 2 * 300;
                    b.clear_from(off);
                    model[off..].fill(0);
                }
                _ => {
                    // A restart: bytes below the mark as the version held them, zeros past it.
                    let held = model.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
                    let held = held + rnd() % 3 * 4096;
                    let at = rnd() % held.max(1);
                    let v = (rnd() % 256) as u8;
                    // SAFETY: inside the buffer's mapping; nothing else uses it.
                    unsafe { *((b.start + at) as *mut u8) = v };
                    model[at] = v;
                    b.restored(Some(held.max(at + 1)), pagemap);
                }
            }
            assert!(
                b.bytes() == &model[..],
                "the buffer differs from what was written"
            );
        }
    }
}
