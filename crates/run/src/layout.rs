//! The address space as a checkpoint stores it: every line of `/proc/self/maps` cut into
//! pieces that are the program's (classified by `ickpt_process::classify`) or ickpt's own
//! (its heap, its own mappings, its writable data, its checkpointing thread's stack: zero
//! mappings whose bytes travel in the snapshot; its two buffers: regions).

use ickpt_process::{FileId, MappingKind, MappingRecord, MapsEntry};

/// What a span of ickpt's own is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Own {
    /// State captured by value at the checkpoint's instant (`snapshot.rs`).
    Snapshot,
    /// A buffer stored as the region of this id.
    Region(u64),
    /// Mapped again as zeros, nothing stored (the heap's reservation: its used part travels
    /// in the snapshot separately).
    Zero,
    /// Not stored at all (the restore hole).
    Skip,
    /// A thread's stack, the program's: captured by value while its thread is stopped, like
    /// ickpt's own state, so that an async commit never fences it (a thread writing its
    /// own fenced stack could not even take the fault: the kernel puts the signal frame
    /// there).
    Stack,
}

/// One piece of the address space: the mapping record a restart follows, and whether its
/// bytes go into the snapshot.
pub struct Piece {
    pub rec: MappingRecord,
    pub snapshot: bool,
}

/// Cut `maps` by `own` (sorted or not; spans may overlap maps lines partly) into pieces.
/// `anon_pages(start, end)`: whether any page of a file mapping was written (RELRO);
/// `file_id`: the identity of the file a line maps.
/// `cuts`: the starts and ends of the regions tracked now, sorted. The program's memory is
/// cut there too: the kernel merges a new mapping with a neighbour of the same protection
/// (and, after a restart, mappings that were apart), and a region that became part of a
/// larger line would otherwise be a new region, stored whole again; cut, it stays, and only
/// the new part is new.
pub fn pieces(
    maps: &[MapsEntry],
    own: &[(usize, usize, Own)],
    cuts: &[u64],
    anon_pages: &dyn Fn(u64, u64) -> bool,
    file_id: &dyn Fn(&MapsEntry) -> Result<FileId, String>,
) -> Result<Vec<Piece>, String> {
    let own = exact_first(own, cuts);
    let program = |out: &mut Vec<Piece>, m: &MapsEntry, start: u64, end: u64| {
        let mut at = start;
        // Bounds shared by two regions appear twice.
        for &c in cuts.iter().filter(|&&c| start < c && c < end) {
            if c > at {
                out.push(program_piece(m, at, c, anon_pages, file_id)?);
                at = c;
            }
        }
        out.push(program_piece(m, at, end, anon_pages, file_id)?);
        Ok::<(), String>(())
    };
    let mut out = Vec::new();
    for m in maps {
        let mut at = m.start;
        while at < m.end {
            // The first own span reaching past `at` within this line.
            let next = own.iter().find(|o| o.1 > at && o.0 < m.end);
            match next {
                Some(&(s, e, kind)) if s <= at => {
                    let end = e.min(m.end);
                    if let Some(p) = own_piece(m, at, end, kind) {
                        out.push(p);
                    }
                    at = end;
                }
                Some(&(s, _, _)) => {
                    program(&mut out, m, at, s)?;
                    at = s;
                }
                None => {
                    program(&mut out, m, at, m.end)?;
                    at = m.end;
                }
            }
        }
    }
    Ok(out)
}

/// `own` with every `Stack` span cut around the other spans and around the regions tracked
/// now (`cuts`: their bounds, sorted, start and end in turn), sorted, none overlapping. A
/// stack span is a whole line of /proc/self/maps, which the kernel may have merged with a
/// neighbouring mapping of the same protection (ickpt's heap reservation; after a restart,
/// which maps everything alike, a program buffer): the exact spans of ickpt's own memory and
/// the program's regions win.
fn exact_first(own: &[(usize, usize, Own)], cuts: &[u64]) -> Vec<(u64, u64, Own)> {
    let mut exact: Vec<(u64, u64, Own)> = own
        .iter()
        .filter(|o| o.2 != Own::Stack && o.0 < o.1)
        .map(|&(s, e, k)| (s as u64, e as u64, k))
        .collect();
    exact.sort_by_key(|o| o.0);
    let mut out = exact.clone();
    let mut avoid: Vec<(u64, u64)> = exact.iter().map(|x| (x.0, x.1)).collect();
    avoid.extend(cuts.chunks_exact(2).map(|c| (c[0], c[1])));
    avoid.sort_unstable();
    for &(s, e, _) in own.iter().filter(|o| o.2 == Own::Stack) {
        let mut at = s as u64;
        let end = e as u64;
        for &(xs, xe) in &avoid {
            if xe <= at || xs >= end {
                continue;
            }
            if xs > at {
                out.push((at, xs, Own::Stack));
            }
            at = at.max(xe);
        }
        if at < end {
            out.push((at, end, Own::Stack));
        }
    }
    out.sort_by_key(|o| o.0);
    // Two threads' spans may name the same mapping: keep one.
    out.dedup_by(|b, a| a.2 == Own::Stack && b.2 == Own::Stack && b.0 < a.1);
    out
}

fn record(m: &MapsEntry, start: u64, end: u64, kind: MappingKind) -> MappingRecord {
    MappingRecord {
        start,
        end,
        prot: m.prot,
        shared: m.shared,
        growsdown: m.name == "[stack]",
        name: m.name.clone(),
        offset: m.offset + (start - m.start),
        file: None,
        kind,
    }
}

fn own_piece(m: &MapsEntry, start: u64, end: u64, kind: Own) -> Option<Piece> {
    let readable = m.prot & ickpt_process::prot::READ != 0;
    let (kind, snapshot) = match kind {
        Own::Skip => return None,
        Own::Region(id) => (MappingKind::Region(id), false),
        Own::Snapshot => (MappingKind::Zero, readable),
        Own::Zero => (MappingKind::Zero, false),
        Own::Stack => {
            let rec = record(m, start, end, MappingKind::Snapshot);
            return Some(Piece {
                rec,
                snapshot: readable,
            });
        }
    };
    let mut rec = record(m, start, end, kind);
    rec.name = String::new();
    rec.growsdown = false;
    Some(Piece { rec, snapshot })
}

fn program_piece(
    m: &MapsEntry,
    start: u64,
    end: u64,
    anon_pages: &dyn Fn(u64, u64) -> bool,
    file_id: &dyn Fn(&MapsEntry) -> Result<FileId, String>,
) -> Result<Piece, String> {
    let kind = ickpt_process::classify(m, || anon_pages(start, end)).map_err(|e| e.to_string())?;
    let kind = match kind {
        MappingKind::Region(_) => MappingKind::Region(start),
        k => k,
    };
    let mut rec = record(m, start, end, kind);
    if kind == MappingKind::File {
        rec.file = Some(file_id(m)?);
    }
    Ok(Piece {
        snapshot: kind == MappingKind::Snapshot,
        rec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_merged_with_a_tracked_region_leaves_the_region_out() {
        let own = [(0x8000, 0x50000, Own::Stack)];
        assert_eq!(
            exact_first(&own, &[0x10000, 0x20000, 0x20000, 0x30000]),
            vec![
                (0x8000, 0x10000, Own::Stack),
                (0x30000, 0x50000, Own::Stack)
            ]
        );
    }

    #[test]
    fn a_stack_merged_with_ickpts_heap_leaves_the_heap_out() {
        // A thread stack whose maps line the kernel merged with the heap reservation after it.
        let own = [
            (0x10000, 0x50000, Own::Zero),
            (0x8000, 0x50000, Own::Stack),
            (0x8000, 0x50000, Own::Stack),
            (0x60000, 0x61000, Own::Snapshot),
        ];
        assert_eq!(
            exact_first(&own, &[]),
            vec![
                (0x8000, 0x10000, Own::Stack),
                (0x10000, 0x50000, Own::Zero),
                (0x60000, 0x61000, Own::Snapshot),
            ]
        );
    }
}
