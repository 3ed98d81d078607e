//! The identities of the files the program maps (device, inode, size, modification time),
//! which the process record carries so that a restart refuses a file that changed. Kept from
//! one checkpoint to the next: a `stat` of every mapped file was 4% of the capture in a
//! profile of a small program (35 file mappings), and the file a mapping holds stays the
//! same (`/proc/self/maps` names its device and inode). A file changed in place, or replaced
//! at its path, after it was first seen thus keeps the identity it had, and a restart
//! refuses it: the program's mapping held the old bytes.

use ickpt_process::{FileId, MapsEntry};
use std::cell::RefCell;
use std::collections::BTreeMap;

#[derive(Default)]
pub struct FileIds(RefCell<BTreeMap<(u64, u64), FileId>>);

impl FileIds {
    /// The identity of the file `m` maps. One first seen when the file at its path is no
    /// longer the one mapped (replaced before the first checkpoint) is that file's, and not
    /// kept.
    pub fn of(&self, m: &MapsEntry) -> Result<FileId, String> {
        let key = (m.dev, m.inode);
        if let Some(id) = self.0.borrow().get(&key).filter(|id| id.path == m.name) {
            return Ok(id.clone());
        }
        let id =
            ickpt_process::capture::file_id(&m.name).map_err(|e| format!("{}: {e}", m.name))?;
        if (id.dev, id.ino) == key {
            self.0.borrow_mut().insert(key, id.clone());
        }
        Ok(id)
    }

    /// Forget the files no line of `maps` maps any more.
    pub fn keep_mapped(&self, maps: &[MapsEntry]) {
        let mapped: std::collections::BTreeSet<(u64, u64)> =
            maps.iter().map(|m| (m.dev, m.inode)).collect();
        self.0.borrow_mut().retain(|k, _| mapped.contains(k));
    }
}

#[cfg(test)]
mod tests {
    use super::FileIds;

    fn mapping_of(path: &std::path::Path) -> ickpt_process::MapsEntry {
        let m = std::fs::metadata(path).unwrap();
        let line = format!(
            "1000-2000 r--p 00000000 {:02x}:{:02x} {} {}",
            libc::major(std::os::unix::fs::MetadataExt::dev(&m)),
            libc::minor(std::os::unix::fs::MetadataExt::dev(&m)),
            std::os::unix::fs::MetadataExt::ino(&m),
            path.display()
        );
        ickpt_process::parse_maps(&line).unwrap().remove(0)
    }

    /// The identity first seen is kept while the mapping holds the same file, even when the
    /// file is rewritten in place or replaced at its path; one seen first after the file
    /// was replaced is not kept.
    #[test]
    fn a_mapped_file_keeps_the_identity_it_was_first_seen_with() {
        let dir = std::env::temp_dir().join(format!("ickpt-file-ids-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lib.so");
        std::fs::write(&path, b"first").unwrap();
        let ids = FileIds::default();
        let m = mapping_of(&path);
        let first = ids.of(&m).unwrap();
        assert_eq!((first.size, first.ino), (5, m.inode));
        std::fs::write(&path, b"rewritten in place").unwrap();
        assert_eq!(ids.of(&m).unwrap(), first);
        // Replaced: another inode at the path, which the old mapping does not hold.
        let other = dir.join("new.so");
        std::fs::write(&other, b"another file").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert_eq!(ids.of(&m).unwrap(), first);
        let late = FileIds::default();
        let now = late.of(&m).unwrap();
        assert_eq!(now.size, 12);
        assert_ne!(now.ino, m.inode);
        assert!(late.0.borrow().is_empty());
        ids.keep_mapped(&[]);
        assert!(ids.0.borrow().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
