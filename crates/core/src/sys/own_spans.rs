//! The address ranges of ickpt's own anonymous mappings (bitmaps, page states, copy-on-write
//! slots, alternate signal stacks, compression workspaces).
//!
//! A whole-process checkpoint (`ickpt run`) stores everything the program maps, but ickpt's
//! own mappings are not the program's: it must find them among the entries of
//! `/proc/self/maps` (an own mapping may even be merged there with a neighbouring program
//! mapping of the same protection). It reads them here, while every other thread is stopped
//! at an arbitrary point, so the table is a fixed array of atomics: no lock, no allocation.

use std::sync::atomic::{AtomicUsize, Ordering};

/// More than ickpt ever holds at once: a few per protected region and per thread.
const SLOTS: usize = 8192;
/// (start, len) pairs; start 0: a free slot. Bit 0 of len (a whole number of pages) marks
/// scratch memory (`mark_scratch`).
static SPANS: [AtomicUsize; 2 * SLOTS] = [const { AtomicUsize::new(0) }; 2 * SLOTS];

/// Remember `start..start+len` as ickpt's own. A full table forgets it: the mapping is then
/// seen as the program's, which stores it (never loses data).
pub fn note(start: usize, len: usize) {
    if start == 0 || len == 0 {
        return;
    }
    // A span noted again (a thread stack glibc reuses) keeps its slot.
    if let Some(slot) = SPANS
        .chunks_exact(2)
        .find(|s| s[0].load(Ordering::Acquire) == start)
    {
        slot[1].store(len, Ordering::Release);
        return;
    }
    for slot in SPANS.chunks_exact(2) {
        if slot[0]
            .compare_exchange(0, start, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            slot[1].store(len, Ordering::Release);
            return;
        }
    }
}

/// Whether ickpt's own threads note their stacks too (a whole-process checkpoint asks it:
/// those threads run while the program does, and their stacks must not be tracked as the
/// program's).
static NOTE_STACKS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn note_thread_stacks() {
    NOTE_STACKS.store(true, Ordering::SeqCst);
}

/// Called first by each thread of ickpt's: note the mapping that holds its stack (its guard
/// page aside), when asked to. Reads /proc/self/maps: never while the program is stopped.
pub fn note_this_stack() {
    if !NOTE_STACKS.load(Ordering::SeqCst) {
        return;
    }
    let local = 0u8;
    let sp = std::hint::black_box(&local) as *const u8 as usize;
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return;
    };
    for line in maps.lines() {
        let Some((range, _)) = line.split_once(' ') else {
            continue;
        };
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) else {
            continue;
        };
        if a <= sp && sp < b {
            note(a, b - a);
            return;
        }
    }
}

/// Forget the span starting at `start` (it is being unmapped, or handed to the application).
pub fn forget(start: usize) {
    for slot in SPANS.chunks_exact(2) {
        if slot[0].load(Ordering::Acquire) == start {
            slot[1].store(0, Ordering::Release);
            slot[0].store(0, Ordering::Release);
            return;
        }
    }
}

/// Mark the span at `start` as scratch: bytes a process restarted from a whole-process
/// checkpoint does without, which that checkpoint need not store. Either they mean nothing
/// between two checkpoints (copy-on-write slots, the commit's staging buffer, scan buffers),
/// or the restart sets them again: page states (`Engine::resume_after_restart` clears them)
/// and zstd's workspace (made again once [`scratch_generation`] moved on). A restart maps
/// scratch spans as zeros.
pub fn mark_scratch(start: usize) {
    if let Some(slot) = SPANS
        .chunks_exact(2)
        .find(|s| s[0].load(Ordering::Acquire) == start)
    {
        slot[1].fetch_or(1, Ordering::AcqRel);
    }
}

/// Bumped by every restart from a whole-process checkpoint: what scratch memory held is
/// gone (zeros), and state kept there must be made again. A static, so a restart brings it
/// back as it was at the checkpoint; the bump comes after.
static SCRATCH_GENERATION: AtomicUsize = AtomicUsize::new(0);

/// Say that scratch memory was lost: this process was restarted.
pub fn scratch_lost() {
    SCRATCH_GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// How many times scratch memory was lost: state kept there and made under another count
/// must be made again before it is used.
pub fn scratch_generation() -> usize {
    SCRATCH_GENERATION.load(Ordering::SeqCst)
}

/// Every span noted, as (start, end, scratch), in no particular order.
pub fn spans(out: &mut Vec<(usize, usize, bool)>) {
    for slot in SPANS.chunks_exact(2) {
        let start = slot[0].load(Ordering::Acquire);
        let len = slot[1].load(Ordering::Acquire);
        if start != 0 && len & !1 != 0 {
            out.push((start, start + (len & !1), len & 1 == 1));
        }
    }
}

/// Whether address `at` lies in a span noted as scratch (for tests of what is scratch).
#[cfg(test)]
pub fn in_scratch(at: usize) -> bool {
    let mut all = Vec::new();
    spans(&mut all);
    all.iter()
        .any(|&(s, e, scratch)| scratch && s <= at && at < e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_noted_span_is_listed_until_forgotten() {
        let start = 0x7777_0000_0000;
        note(start, 8192);
        let mut out = Vec::new();
        spans(&mut out);
        assert!(out.contains(&(start, start + 8192, false)));
        mark_scratch(start);
        out.clear();
        spans(&mut out);
        assert!(out.contains(&(start, start + 8192, true)));
        forget(start);
        out.clear();
        spans(&mut out);
        assert!(!out.iter().any(|s| s.0 == start));
    }
}
