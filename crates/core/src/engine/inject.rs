//! Engine::inject: write a delta (CAPE's "inject": what another process, or an earlier
//! section, changed) into the protected regions of this one.

// Unsafe allowed here (lib.rs fences it): the words are stored into the regions' memory
// through the pointers `protect` was given.
#![allow(unsafe_code)]

use super::{Engine, State};
use crate::error::InjectError;
use ickpt_format::delta::{self, DeltaShape};
use ickpt_format::DeltaFile;

/// What an inject wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InjectInfo {
    pub regions: usize,
    pub words: u64,
}

impl Engine {
    /// Write every word of `delta` into the protected region of its id. Each region the delta
    /// names must be protected now with the delta's length; this is checked for every region
    /// before any byte is written. The words are written as the application's own stores
    /// are, so write tracking sees them: the next checkpoint stores the pages they changed.
    /// Other threads must not write the same bytes meanwhile (they would race as with any
    /// two writers).
    pub fn inject(&self, delta: &DeltaFile) -> Result<InjectInfo, InjectError> {
        self.inject_all(std::slice::from_ref(delta))
    }

    /// [`inject`](Self::inject) each of `deltas` in turn, every one checked before the first
    /// is written: on an error memory is unchanged (CAPE's exchange, one delta per rank).
    pub fn inject_all(&self, deltas: &[DeltaFile]) -> Result<InjectInfo, InjectError> {
        let mut st = self.lock_for_change()?;
        // A commit under way finishes first: the words then meet plain first-write faults.
        self.settle(&mut st);
        Self::inject_locked(&mut st, deltas)
    }

    /// [`inject_all`](Self::inject_all) with the engine lock held (a section's start
    /// replaying its saves, too); an open section takes the words as its own.
    pub(super) fn inject_locked(
        st: &mut State,
        deltas: &[DeltaFile],
    ) -> Result<InjectInfo, InjectError> {
        let targets = deltas
            .iter()
            .map(|d| Self::inject_targets(st, d))
            .collect::<Result<Vec<_>, _>>()?;
        let mut info = InjectInfo {
            regions: 0,
            words: 0,
        };
        for (d, t) in deltas.iter().zip(&targets) {
            info.words += Self::inject_apply(d, t);
            info.regions += d.regions.len();
            Self::sections_after_inject(st, d);
        }
        Ok(info)
    }

    /// Where each region of `delta` starts in memory, once every region and word is checked
    /// against the protected regions in `st`.
    fn inject_targets(st: &State, delta: &DeltaFile) -> Result<Vec<usize>, InjectError> {
        let mut targets = Vec::with_capacity(delta.regions.len());
        for r in &delta.regions {
            let s = st
                .regions
                .get(&r.id)
                .ok_or_else(|| InjectError::RegionMismatch {
                    id: r.id,
                    what: format!(
                        "the delta holds it ({} bytes) but it is not protected now",
                        r.length
                    ),
                })?;
            if s.tr.user_len as u64 != r.length {
                return Err(InjectError::RegionMismatch {
                    id: r.id,
                    what: format!(
                        "size mismatch: protected with {} bytes, the delta's is {} bytes",
                        s.tr.user_len, r.length
                    ),
                });
            }
            // A delta built in memory, not decoded from a file, is checked here as decode
            // checks a file's: every word inside the region, aligned, ascending.
            let mut next = 0u64;
            for (off, _) in &r.words {
                if *off < next || off % delta::WORD != 0 || *off >= r.length {
                    return Err(InjectError::RegionMismatch {
                        id: r.id,
                        what: format!(
                            "a word at offset {off}: not 4-byte aligned, out of order, or past the region's {} bytes",
                            r.length
                        ),
                    });
                }
                next = off + delta::WORD;
            }
            targets.push(s.tr.user_ptr);
        }
        Ok(targets)
    }

    /// Write `delta`'s words at `targets` (from [`Engine::inject_targets`], with the engine
    /// lock held since); the words written.
    fn inject_apply(delta: &DeltaFile, targets: &[usize]) -> u64 {
        let mut words = 0;
        for (r, &base) in delta.regions.iter().zip(targets) {
            let shape = DeltaShape {
                page_size: delta.page_size,
                region_len: r.length,
            };
            for (off, v) in &r.words {
                let n = shape.word_len(*off);
                // SAFETY: `off < length` (checked by inject_targets, for every word), so `off
                // + n <= length`, and `length` is the region's, checked there too; the region
                // stays mapped while the engine lock is held (unprotect takes it). The bytes
                // are the application's, written as its own stores are (the caller keeps
                // other writers off them); a write-protected page takes its first-write fault
                // here, which needs no engine lock.
                unsafe {
                    std::ptr::copy_nonoverlapping(v.as_ptr(), (base + *off as usize) as *mut u8, n)
                };
            }
            words += r.words.len() as u64;
        }
        words
    }
}
