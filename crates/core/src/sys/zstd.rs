//! zstd with a workspace of its own that never changes size: a commit compresses while an
//! application thread may be stopped in a write fault holding malloc's lock, so nothing on
//! that path may call malloc. A context zstd made itself resizes its workspace (free, then
//! malloc) after 128 calls whose inputs needed far less than it holds (a review of the
//! commit path counted 16 mallocs in 400 batches of sparse pages); one placed with
//! `ZSTD_initStaticCCtx` never does: it fails instead, and the caller stores the bytes raw.

use std::io;

/// A zstd compression context in a mapping of ickpt's own.
///
/// The mapping is scratch (`own_spans::mark_scratch`): a whole-process checkpoint does not
/// store it, since every commit rewrites most of zstd's tables (116 of the 440 pages of
/// ickpt's own state that changed between two checkpoints of a 256 MiB process). A restart
/// maps it as zeros, and the context is made again in it before its next use.
pub struct StaticZstd {
    cctx: *mut zstd_sys::ZSTD_CCtx,
    mem: *mut u8,
    len: usize,
    level: i32,
    /// The `own_spans::scratch_generation` the context was made in.
    generation: usize,
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
        super::own_spans::mark_scratch(mem as usize);
        let mut z = StaticZstd {
            cctx: std::ptr::null_mut(),
            mem,
            len,
            level,
            generation: 0,
        };
        z.make()?;
        Ok(z)
    }

    /// Make the context in the workspace, at the level asked for. Allocates nothing.
    fn make(&mut self) -> io::Result<()> {
        self.generation = super::own_spans::scratch_generation();
        // SAFETY: `mem` is `len` bytes of ours, page-aligned (so 8-byte aligned), unmapped
        // only by drop, after the context is last used; no other context lives there (a
        // context made again replaces the old one, which holds nothing to free).
        self.cctx = unsafe { zstd_sys::ZSTD_initStaticCCtx(self.mem.cast(), self.len) };
        if self.cctx.is_null() {
            return Err(io::Error::other("zstd refused its workspace"));
        }
        // SAFETY: a valid context; setting a parameter allocates nothing.
        let r = unsafe {
            zstd_sys::ZSTD_CCtx_setParameter(
                self.cctx,
                zstd_sys::ZSTD_cParameter::ZSTD_c_compressionLevel,
                self.level,
            )
        };
        // SAFETY: a pure function of its argument.
        if unsafe { zstd_sys::ZSTD_isError(r) } != 0 {
            self.cctx = std::ptr::null_mut();
            return Err(io::Error::other(format!(
                "zstd level {} refused",
                self.level
            )));
        }
        Ok(())
    }

    /// `src` compressed into `dst` as one zstd frame: the bytes it took, or None when it does
    /// not fit (or zstd failed: the caller stores `src` as it is).
    pub fn compress(&mut self, src: &[u8], dst: &mut [u8]) -> Option<usize> {
        if self.generation != super::own_spans::scratch_generation() || self.cctx.is_null() {
            self.make().ok()?;
        }
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

#[cfg(test)]
mod tests {
    use super::StaticZstd;

    fn decompress(frame: &[u8], len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        // SAFETY: the buffers are valid for the lengths given.
        let n = unsafe {
            zstd_sys::ZSTD_decompress(
                out.as_mut_ptr().cast(),
                out.len(),
                frame.as_ptr().cast(),
                frame.len(),
            )
        };
        // SAFETY: a pure function of its argument.
        assert_eq!(unsafe { zstd_sys::ZSTD_isError(n) }, 0);
        out.truncate(n);
        out
    }

    /// A restart maps the workspace as zeros; the context is made again there, and it still
    /// compresses (a context left zeroed fails, and the pages would be stored raw).
    #[test]
    fn the_context_is_made_again_after_its_scratch_workspace_was_lost() {
        let src: Vec<u8> = (0..64 << 10).map(|i| (i / 512) as u8).collect();
        let mut z = StaticZstd::new(1, src.len()).unwrap();
        let mut dst = vec![0u8; src.len()];
        let n = z.compress(&src, &mut dst).expect("compressible");
        assert_eq!(decompress(&dst[..n], src.len()), src);
        // SAFETY: the workspace is ours; the context is made again before its next use.
        unsafe { std::ptr::write_bytes(z.mem, 0, z.len) };
        crate::sys::own_spans::scratch_lost();
        let n = z
            .compress(&src, &mut dst)
            .expect("compressible after the loss");
        assert_eq!(decompress(&dst[..n], src.len()), src);
        // Made again, at its level; a zeroed context would compress too, at zstd's default
        // level, in a workspace it allocates itself (a commit must never malloc).
        assert_eq!(level_of(&z), 1);
    }

    fn level_of(z: &StaticZstd) -> i32 {
        let mut level = 0;
        // SAFETY: a context of ours; the parameter is written to a local.
        let r = unsafe {
            zstd_sys::ZSTD_CCtx_getParameter(
                z.cctx,
                zstd_sys::ZSTD_cParameter::ZSTD_c_compressionLevel,
                &mut level,
            )
        };
        // SAFETY: a pure function of its argument.
        assert_eq!(unsafe { zstd_sys::ZSTD_isError(r) }, 0);
        level
    }

    #[test]
    fn its_workspace_is_scratch() {
        let z = StaticZstd::new(1, 1 << 20).unwrap();
        let mut spans = Vec::new();
        crate::sys::own_spans::spans(&mut spans);
        assert!(spans.contains(&(
            z.mem as usize,
            (z.mem as usize + z.len).next_multiple_of(4096),
            true
        )));
    }
}
