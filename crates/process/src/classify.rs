//! The default treatment of each kind of mapping. The run library decides in the end: it
//! knows its own mappings (kept as zeros, the hole, its arena), which nothing in maps tells
//! apart from the program's.

use crate::error::ClassifyError;
use crate::maps::MapsEntry;
use crate::record::{prot, MappingKind};

/// How a restart should bring `m` back. `anon_pages` says whether any page of a private
/// file mapping has been written (is anonymous now, as RELRO after relocation is); it is
/// asked only for private read-only or executable file mappings, since finding out costs a
/// pagemap scan.
///
/// Shared memory is refused: a restart cannot recreate it yet. The one exception is a shared
/// file mapping that is not writable (glibc maps `gconv-modules.cache` so): its content is
/// the file's, so it is mapped again from the file like a private one that was never
/// written.
pub fn classify(
    m: &MapsEntry,
    anon_pages: impl Fn() -> bool,
) -> Result<MappingKind, ClassifyError> {
    if m.is_special() {
        return Ok(MappingKind::Special);
    }
    if m.prot == 0 {
        return Ok(MappingKind::Reserve);
    }
    let writable = m.prot & prot::WRITE != 0;
    // A deleted file cannot be mapped again: its pages are copied instead.
    let from_file = m.is_file_backed() && !m.is_deleted();
    if m.shared {
        if from_file && !writable {
            return Ok(MappingKind::File);
        }
        return Err(ClassifyError::Shared {
            start: m.start,
            end: m.end,
            name: m.name.clone(),
        });
    }
    if writable {
        return Ok(MappingKind::Region(m.start));
    }
    if from_file && !anon_pages() {
        return Ok(MappingKind::File);
    }
    Ok(MappingKind::Snapshot)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(perms: &str, inode: u64, name: &str) -> MapsEntry {
        let line = format!("1000-3000 {perms} 00000000 fe:00 {inode}   {name}");
        crate::maps::parse_maps(&line).unwrap().remove(0)
    }

    fn kind(perms: &str, inode: u64, name: &str, anon: bool) -> Result<MappingKind, ClassifyError> {
        classify(&entry(perms, inode, name), || anon)
    }

    #[test]
    fn each_kind_of_mapping_gets_its_treatment() {
        let ok = |perms, inode, name, anon| kind(perms, inode, name, anon).unwrap();
        for special in ["[vdso]", "[vvar]", "[vvar_vclock]", "[vsyscall]"] {
            assert_eq!(ok("r-xp", 0, special, true), MappingKind::Special);
        }
        assert_eq!(ok("---p", 0, "", false), MappingKind::Reserve);
        assert_eq!(ok("---p", 9, "/lib/libc.so.6", false), MappingKind::Reserve);
        assert_eq!(ok("rw-p", 0, "[heap]", false), MappingKind::Region(0x1000));
        assert_eq!(
            ok("rw-p", 9, "/lib/libc.so.6", false),
            MappingKind::Region(0x1000)
        );
        assert_eq!(ok("r-xp", 9, "/lib/libc.so.6", false), MappingKind::File);
        assert_eq!(ok("r--p", 9, "/lib/libc.so.6", true), MappingKind::Snapshot);
        assert_eq!(
            ok("r--p", 9, "/lib/gone.so (deleted)", false),
            MappingKind::Snapshot
        );
        assert_eq!(ok("r--p", 0, "", false), MappingKind::Snapshot);
        assert_eq!(
            ok("r--s", 9, "/usr/lib/gconv-modules.cache", false),
            MappingKind::File
        );
    }

    #[test]
    fn shared_memory_is_refused_naming_the_mapping() {
        for (perms, inode, name) in [
            ("rw-s", 9, "/data/file"),
            ("rw-s", 0, "/dev/zero (deleted)"),
            ("r--s", 9, "/memfd:buf (deleted)"),
        ] {
            let e = kind(perms, inode, name, false).unwrap_err().to_string();
            assert!(e.contains(name) && e.contains("0x1000-0x3000"), "{e}");
            assert!(e.contains("shared memory"), "{e}");
        }
    }

    #[test]
    fn the_pagemap_question_is_asked_only_of_private_read_only_file_mappings() {
        let asked = std::cell::Cell::new(0);
        for perms in ["rw-p", "---p", "r--s", "rw-s"] {
            let _ = classify(&entry(perms, 9, "/f"), || {
                asked.set(asked.get() + 1);
                false
            });
        }
        assert_eq!(asked.get(), 0);
        let _ = classify(&entry("r-xp", 9, "/f"), || {
            asked.set(asked.get() + 1);
            false
        });
        assert_eq!(asked.get(), 1);
    }
}
