//! zstd with a workspace of its own that never changes size: a commit compresses while an
//! application thread may be stopped in a write fault holding malloc's lock, so nothing on
//! that path may call malloc. A context zstd made itself resizes its workspace (free, then
//! malloc) after 128 calls whose inputs needed far less than it holds (a review of the
//! commit path counted 16 mallocs in 400 batches of sparse pages); one placed with
//! `ZSTD_initStaticCCtx` never does: it fails instead, and the caller stores the bytes raw.

use std::io;

/// A zstd compression context in a mapping of ickpt's own.
pub struct StaticZstd {
    cctx: *mut zstd_sys::ZSTD_CCtx,
    mem: *mut u8,
    len: usize,
}

// SAFETY: the context is only used through `&mut self`, by one thread at a time; zstd keeps
// no thread-local state for it.
unsafe impl Send for StaticZstd {}

impl StaticZstd {
    /// A context for inputs of at most `max_input` bytes at zstd `level`.
    pub fn new(level: i32, max_input: usize) -> io::Result<StaticZstd> {
        // SAFETY: pure functions of their arguments.
        let len = unsafe {
            let cp = zstd_sys::ZSTD_getCParams(level, max_input as u64, 0);
            zstd_sys::ZSTD_estimateCCtxSize_usingCParams(cp)
        };
        let mem = super::mem::map_anonymous(len)?;
        // SAFETY: `mem` is `len` fresh bytes, page-aligned (so 8-byte aligned), ours until
        // drop, which unmaps them after the context is last used.
        let cctx = unsafe { zstd_sys::ZSTD_initStaticCCtx(mem.cast(), len) };
        let z = StaticZstd { cctx, mem, len };
        if cctx.is_null() {
            return Err(io::Error::other("zstd refused its workspace"));
        }
        // SAFETY: a valid context; setting a parameter allocates nothing.
        let r = unsafe {
            zstd_sys::ZSTD_CCtx_setParameter(
                cctx,
                zstd_sys::ZSTD_cParameter::ZSTD_c_compressionLevel,
                level,
            )
        };
        // SAFETY: a pure function of its argument.
        if unsafe { zstd_sys::ZSTD_isError(r) } != 0 {
            return Err(io::Error::other(format!("zstd level {level} refused")));
        }
        Ok(z)
    }

    /// `src` compressed into `dst` as one zstd frame: the bytes it took, or None when it does
    /// not fit (or zstd failed: the caller stores `src` as it is).
    pub fn compress(&mut self, src: &[u8], dst: &mut [u8]) -> Option<usize> {
        // SAFETY: a valid context used by this thread alone (`&mut self`); the buffers are
        // valid for the lengths given and do not overlap (one is borrowed mutably).
        let r = unsafe {
            zstd_sys::ZSTD_compress2(
                self.cctx,
                dst.as_mut_ptr().cast(),
                dst.len(),
                src.as_ptr().cast(),
                src.len(),
            )
        };
        // SAFETY: a pure function of its argument.
        (unsafe { zstd_sys::ZSTD_isError(r) } == 0).then_some(r)
    }
}

impl Drop for StaticZstd {
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made, holding the context, which is not used again (a
        // static context needs no free of its own).
        let _ = unsafe { super::mem::unmap(self.mem, self.len) };
    }
}

impl ickpt_format::Compress for StaticZstd {
    fn compress(&mut self, src: &[u8], dst: &mut [u8]) -> Option<usize> {
        StaticZstd::compress(self, src, dst)
    }
}
