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
    /// Bytes from here on are zero: nothing was written there since the buffer was made or
    /// last cleared (so a clear never reads the untouched rest of a large buffer).
    high: usize,
    /// How far the buffer will hold anything once the capture under way is over, set before
    /// ickpt's own state (this field among it) is copied: a restart to that capture's
    /// version finds it here.
    promised: Option<usize>,
    written: ReportedWrites,
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
            high: 0,
            promised: None,
            written,
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
        assert!(offset + src.len() <= self.len);
        self.high = self.high.max(offset + src.len());
        // SAFETY: inside the mapping (checked above); only this thread writes it.
        let dst =
            unsafe { std::slice::from_raw_parts_mut((self.start + offset) as *mut u8, src.len()) };
        for (i, (d, s)) in dst.chunks_mut(4096).zip(src.chunks(4096)).enumerate() {
            if d != s {
                d.copy_from_slice(s);
                self.written.written(offset + i * 4096, s.len());
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
    /// state (this mark among it) was captured, so the mark restored may be too low. `held`:
    /// how far what the version stored goes, zeros after it; None when not known, and then
    /// all of the buffer is taken as written (the next clear reads it all).
    pub fn restored(&mut self, held: Option<usize>) {
        self.high = held.map_or(self.len, |h| h.min(self.len));
    }

    /// How far the capture that ickpt's state was copied in promised the buffer holds
    /// anything (None: it promised nothing).
    pub fn promised(&self) -> Option<usize> {
        self.promised
    }

    /// Zero `len` bytes at `offset`, touching only pages not zero.
    pub fn write_zero(&mut self, offset: usize, len: usize) {
        let end = (offset + len).min(self.high);
        if offset < end {
            self.zero(offset, end - offset);
        }
    }

    /// Zero the buffer from `offset` on.
    pub fn clear_from(&mut self, offset: usize) {
        if offset < self.high {
            self.zero(offset, self.high - offset);
            self.high = offset;
        }
    }

    fn zero(&self, offset: usize, len: usize) {
        // SAFETY: inside the mapping (below `high`, which is at most `len`); only this
        // thread writes it.
        let dst = unsafe { std::slice::from_raw_parts_mut((self.start + offset) as *mut u8, len) };
        ickpt::format::zero_where_not_each(dst, |at| {
            self.written.written(offset + at, 4096.min(len - at))
        });
    }
}
