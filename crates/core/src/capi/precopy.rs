//! `ickpt_get_precopy`: what pre-copy (PRWIP) did for the newest checkpoint and since
//! `ickpt_init`. A sized struct (docs/abi.md rule 7), as `ickpt_get_phases`.

use super::{write_sized, ENGINE};
use crate::capi::boundary::{guard, with_engine};
use crate::error::Error;

/// What pre-copy did (from `ickpt_get_precopy`). Fields are only ever appended: the call
/// writes as many bytes as the caller's struct has.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ickpt_precopy {
    /// The newest checkpoint this process committed (0: none yet); the fields up to
    /// `pass_ns` are of it.
    pub version: u64,
    /// ICKPT_PRECOPY_* the library runs with (the config's, or ICKPT_PRECOPY's).
    pub strategy: u32,
    /// 1 when pre-copy stopped before this checkpoint (a store or tracking error, whose
    /// pages went into the checkpoint instead); 0 otherwise.
    pub stopped: u32,
    /// Pages the version took from pre-copy, written before the checkpoint call.
    pub pages: u64,
    /// Of those, pages written again before the checkpoint (conflicts): each was copied
    /// again, by a later pass or by the checkpoint.
    pub conflicts: u64,
    /// Page copies written before the checkpoint call, first copies and again.
    pub copies: u64,
    /// Bytes written into the version's file more than once.
    pub rewritten_bytes: u64,
    /// Pre-copy passes between the checkpoint before and this one, and their time.
    pub passes: u64,
    pub pass_ns: u64,
    /// The same since ickpt_init.
    pub total_passes: u64,
    pub total_pages: u64,
    pub total_conflicts: u64,
    pub total_copies: u64,
    pub total_rewritten_bytes: u64,
}

/// What pre-copy did for this process's newest committed checkpoint, and since
/// `ickpt_init`. Writes `size` bytes at most (pass `sizeof *out`; the header's macro
/// `ickpt_get_precopy(&p)` does). With pre-copy off every field is 0.
#[no_mangle]
pub extern "C" fn ickpt_get_precopy_sized(
    out: *mut ickpt_precopy,
    size: usize,
) -> super::ickpt_result {
    guard(|| {
        if out.is_null() {
            return Err(Error::Null { what: "out" });
        }
        let (s, strategy) =
            with_engine(&ENGINE, |e| Ok::<_, Error>((e.stats(), e.config().precopy)))?;
        let mut p = ickpt_precopy {
            strategy: strategy.code(),
            total_passes: s.precopy_passes,
            total_pages: s.precopy_pages,
            total_conflicts: s.precopy_conflicts,
            total_copies: s.precopy_copies,
            total_rewritten_bytes: s.precopy_rewritten_bytes,
            ..Default::default()
        };
        if let Some(last) = &s.last_checkpoint {
            p.version = last.version;
            if let Some(i) = &last.precopy {
                p.stopped = u32::from(i.error.is_some());
                p.pages = i.pages;
                p.conflicts = i.conflicts;
                p.copies = i.copies;
                p.rewritten_bytes = i.rewritten_bytes;
                p.passes = i.passes;
                p.pass_ns = i.pass_time.as_nanos() as u64;
            }
        }
        // SAFETY: by contract `out` points to `size` writable bytes.
        unsafe { write_sized(&p, out, size) };
        Ok(())
    })
}
