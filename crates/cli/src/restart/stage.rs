//! Stage A's memory work: every mapping of the checkpointed process made again at a staging
//! address that neither the old layout nor this process uses, filled, and given its
//! protection; stage B then moves each onto its old address (`mremap`, no copy).

use ickpt_process::{MappingKind, MappingRecord, ProcessRecord};
use std::os::fd::AsRawFd;

/// One staged mapping: where it is now, and the record it stands for.
pub struct Slot {
    pub at: u64,
    pub rec: MappingRecord,
}

pub struct Staged {
    pub slots: Vec<Slot>,
    /// The reservation the slots fill exactly: (start, end).
    pub area: (u64, u64),
}

fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

fn map(at: u64, len: u64, prot: i32, flags: i32, fd: i32, offset: u64) -> Result<(), String> {
    // SAFETY: MAP_FIXED inside the staging reservation, which this process made for exactly
    // this and nothing else uses.
    let p = unsafe {
        libc::mmap(
            at as *mut libc::c_void,
            len as usize,
            prot,
            flags | libc::MAP_FIXED,
            fd,
            offset as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(())
}

impl Staged {
    /// Reserve one area for every mapping but the kernel's special ones, disjoint from the
    /// old layout and the hole, and map each piece in it as its kind says.
    pub fn new(record: &ProcessRecord) -> Result<Staged, String> {
        let old: Vec<(u64, u64)> = record
            .mappings
            .iter()
            .map(|m| (m.start, m.end))
            .chain([(record.hole.0, record.hole.0 + record.hole.1)])
            .collect();
        let wanted: Vec<&MappingRecord> = record
            .mappings
            .iter()
            .filter(|m| m.kind != MappingKind::Special)
            .collect();
        let total: u64 = wanted.iter().map(|m| m.end - m.start).sum();
        let mut blockers = Vec::new();
        let area = loop {
            // SAFETY: a fresh reservation with a NULL hint aliases no existing memory.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    total.max(4096) as usize,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(format!(
                    "reserving {total} bytes to stage the process: {}",
                    std::io::Error::last_os_error()
                ));
            }
            let a = (p as u64, p as u64 + total);
            if !old.iter().any(|&o| overlaps(o, a)) {
                break a;
            }
            // Keep it taken so the next try lands elsewhere.
            blockers.push(a);
            if blockers.len() > 64 {
                return Err("found no free place to stage the process's memory".into());
            }
        };
        for (s, e) in blockers {
            // SAFETY: a reservation made above and used by nothing.
            unsafe { libc::munmap(s as *mut libc::c_void, (e - s).max(4096) as usize) };
        }
        let mut slots = Vec::with_capacity(wanted.len());
        let mut at = area.0;
        for m in wanted {
            let len = m.end - m.start;
            stage_one(at, m)
                .map_err(|e| format!("staging {:#x}-{:#x} {}: {e}", m.start, m.end, m.name))?;
            slots.push(Slot { at, rec: m.clone() });
            at += len;
        }
        Ok(Staged { slots, area })
    }

    /// The staged memory of each region of `regions` (in their order), each exactly as long
    /// as the region; an error names a region the record has no mapping of that length for.
    pub fn region_memory(
        &mut self,
        regions: &[ickpt::format::RegionEntry],
    ) -> Result<Vec<Option<&mut [u8]>>, String> {
        let mut out = Vec::with_capacity(regions.len());
        for r in regions {
            let s = self
                .slots
                .iter()
                .find(|s| s.rec.kind == MappingKind::Region(r.id))
                .ok_or_else(|| {
                    format!(
                        "region {:#x} of the version has no mapping in its process record",
                        r.id
                    )
                })?;
            if s.rec.end - s.rec.start != r.length {
                return Err(format!(
                    "region {:#x} holds {} bytes but its mapping spans {}",
                    r.id,
                    r.length,
                    s.rec.end - s.rec.start
                ));
            }
            // SAFETY: a read-write anonymous mapping staged above, `length` bytes; each
            // region has its own slot (ids are unique in a version), so the slices are
            // disjoint, and they live no longer than `&mut self`.
            out.push(Some(unsafe {
                std::slice::from_raw_parts_mut(s.at as *mut u8, r.length as usize)
            }));
        }
        Ok(out)
    }

    /// The staged bytes of region `id`.
    pub fn region(&mut self, id: u64) -> Option<&mut [u8]> {
        let s = self
            .slots
            .iter()
            .find(|s| s.rec.kind == MappingKind::Region(id))?;
        let len = (s.rec.end - s.rec.start) as usize;
        // SAFETY: a read-write anonymous mapping staged above, `len` bytes, not yet
        // protected; the slice is the only reference made to it at a time (`&mut self`).
        Some(unsafe { std::slice::from_raw_parts_mut(s.at as *mut u8, len) })
    }

    /// Where old address `addr` is staged now, and how many bytes from it in the same slot.
    fn staged(&self, addr: u64) -> Option<(u64, u64)> {
        self.slots
            .iter()
            .find(|s| s.rec.start <= addr && addr < s.rec.end)
            .map(|s| (s.at + (addr - s.rec.start), s.rec.end - addr))
    }

    /// Copy the snapshot region's pieces to their places.
    pub fn apply_snapshots(
        &mut self,
        record: &ProcessRecord,
        snapshot_id: u64,
    ) -> Result<(), String> {
        let Some(src) = self
            .region(snapshot_id)
            .map(|s| (s.as_ptr() as u64, s.len() as u64))
        else {
            return Err("the version holds no snapshot region".into());
        };
        for p in &record.snapshots {
            if p.offset.checked_add(p.len).is_none_or(|e| e > src.1) {
                return Err(format!(
                    "snapshot piece at {:#x} lies outside the snapshot region",
                    p.target
                ));
            }
            let mut done = 0;
            while done < p.len {
                let (to, room) = self.staged(p.target + done).ok_or_else(|| {
                    format!("snapshot piece for {:#x} has no mapping", p.target + done)
                })?;
                let n = room.min(p.len - done);
                let slot = self
                    .slots
                    .iter()
                    .find(|s| s.at <= to && to < s.at + (s.rec.end - s.rec.start))
                    .expect("found above");
                if slot.rec.kind == MappingKind::File || slot.rec.kind == MappingKind::Reserve {
                    return Err(format!(
                        "snapshot piece for {:#x} lands on a mapping that holds none",
                        p.target
                    ));
                }
                // SAFETY: `n` bytes inside the snapshot slot and inside a writable staged
                // slot (checked above); the two slots are distinct mappings.
                let (from, into) = unsafe {
                    (
                        std::slice::from_raw_parts(
                            (src.0 + p.offset + done) as *const u8,
                            n as usize,
                        ),
                        std::slice::from_raw_parts_mut(to as *mut u8, n as usize),
                    )
                };
                // A slot of ickpt's own memory is fresh zeros: its zero pages (ickpt's heap
                // gives freed pages back, so most of it) are left untouched, unbacked, which
                // saves the restart the memory and the next capture their comparison.
                let fresh = matches!(slot.rec.kind, MappingKind::Zero | MappingKind::Snapshot);
                copy_skipping_zeros(from, into, fresh);
                done += n;
            }
        }
        Ok(())
    }

    /// Give every slot its recorded protection.
    pub fn protect(&self) -> Result<(), String> {
        for s in &self.slots {
            let prot = prot_bits(s.rec.prot);
            // SAFETY: a slot staged above; only its permissions change.
            if unsafe {
                libc::mprotect(
                    s.at as *mut libc::c_void,
                    (s.rec.end - s.rec.start) as usize,
                    prot,
                )
            } != 0
            {
                return Err(format!(
                    "protecting the staged {:#x}-{:#x}: {}",
                    s.rec.start,
                    s.rec.end,
                    std::io::Error::last_os_error()
                ));
            }
        }
        Ok(())
    }
}

pub fn prot_bits(p: u8) -> i32 {
    use ickpt_process::prot;
    let mut v = libc::PROT_NONE;
    if p & prot::READ != 0 {
        v |= libc::PROT_READ;
    }
    if p & prot::WRITE != 0 {
        v |= libc::PROT_WRITE;
    }
    if p & prot::EXEC != 0 {
        v |= libc::PROT_EXEC;
    }
    v
}

/// Copy `from` into `into`; where `into` is known to be zeros (`fresh`), page-sized pieces of
/// zeros are not written.
fn copy_skipping_zeros(from: &[u8], into: &mut [u8], fresh: bool) {
    static ZERO: [u8; 4096] = [0; 4096];
    if !fresh {
        into.copy_from_slice(from);
        return;
    }
    for (f, t) in from.chunks(4096).zip(into.chunks_mut(4096)) {
        if *f != ZERO[..f.len()] {
            t.copy_from_slice(f);
        }
    }
}

fn stage_one(at: u64, m: &MappingRecord) -> Result<(), String> {
    let len = m.end - m.start;
    let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    match m.kind {
        MappingKind::Region(_) | MappingKind::Zero | MappingKind::Snapshot => {
            let grows = if m.growsdown { libc::MAP_GROWSDOWN } else { 0 };
            map(at, len, rw, anon | grows, -1, 0)
        }
        MappingKind::Reserve => map(at, len, libc::PROT_NONE, anon, -1, 0),
        MappingKind::File => {
            let f = std::fs::File::open(&m.name).map_err(|e| format!("opening {}: {e}", m.name))?;
            let flags = if m.shared {
                libc::MAP_SHARED
            } else {
                libc::MAP_PRIVATE
            };
            map(at, len, prot_bits(m.prot), flags, f.as_raw_fd(), m.offset)
        }
        MappingKind::Special => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::copy_skipping_zeros;

    #[test]
    fn zero_pages_are_not_written_into_fresh_memory() {
        let mut from = vec![0u8; 3 * 4096 + 100];
        from[4096 + 5] = 1;
        from[3 * 4096 + 99] = 2;
        // A marker where a fresh slot would hold zeros: left alone means not written.
        let mut into = vec![7u8; from.len()];
        copy_skipping_zeros(&from, &mut into, true);
        assert!(
            into[..4096].iter().all(|&b| b == 7),
            "a zero page is skipped"
        );
        assert_eq!(into[4096..2 * 4096], from[4096..2 * 4096]);
        assert!(into[2 * 4096..3 * 4096].iter().all(|&b| b == 7));
        assert_eq!(into[3 * 4096..], from[3 * 4096..], "a short last piece too");
        copy_skipping_zeros(&from, &mut into, false);
        assert_eq!(into, from, "memory not known to be zeros is copied whole");
    }
}
