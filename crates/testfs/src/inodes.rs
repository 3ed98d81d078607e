//! The inode numbers the kernel knows, each tied to the backing file it stands for and to one
//! of that file's names in the backing directory.
//!
//! Numbers are never reused: a backing inode number the backing file system recycles after a
//! delete gets a new FUSE number, so the kernel never sees one number change its file type.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A backing file: (device, inode number).
pub type Key = (u64, u64);

pub fn key_of(m: &std::fs::Metadata) -> Key {
    (m.dev(), m.ino())
}

#[derive(Debug)]
pub struct Inodes {
    /// FUSE inode → a name of it in the backing directory (absent once its names are gone).
    paths: HashMap<u64, PathBuf>,
    by_key: HashMap<Key, u64>,
    next: u64,
}

impl Inodes {
    pub fn new(root: PathBuf, root_key: Key) -> Self {
        let root_ino = u64::from(fuser::INodeNo::ROOT);
        Inodes {
            paths: HashMap::from([(root_ino, root)]),
            by_key: HashMap::from([(root_key, root_ino)]),
            next: root_ino + 1,
        }
    }

    pub fn path(&self, ino: u64) -> Option<&Path> {
        self.paths.get(&ino).map(PathBuf::as_path)
    }

    /// The FUSE inode of the backing file `key`, now known under `path` (its newest name).
    pub fn bind(&mut self, key: Key, path: PathBuf) -> u64 {
        let ino = *self.by_key.entry(key).or_insert_with(|| {
            self.next += 1;
            self.next - 1
        });
        self.paths.insert(ino, path);
        ino
    }

    /// `path` no longer names the backing file `key`; `last_name` says it had no other name.
    pub fn unnamed(&mut self, key: Key, path: &Path, last_name: bool) {
        let Some(&ino) = self.by_key.get(&key) else {
            return;
        };
        if self.paths.get(&ino).is_some_and(|p| p == path) {
            // Another name, if any, is found again by the next lookup through it.
            self.paths.remove(&ino);
        }
        if last_name {
            self.by_key.remove(&key);
        }
    }

    /// `from` became `to`: every name at or below `from` moves with it.
    pub fn renamed(&mut self, from: &Path, to: &Path) {
        for p in self.paths.values_mut() {
            if let Ok(rest) = p.strip_prefix(from) {
                *p = if rest.as_os_str().is_empty() {
                    to.to_path_buf()
                } else {
                    to.join(rest)
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Inodes {
        Inodes::new(PathBuf::from("/b"), (1, 2))
    }

    #[test]
    fn one_backing_file_one_number() {
        let mut t = table();
        let a = t.bind((1, 10), "/b/x".into());
        assert_eq!(t.bind((1, 10), "/b/y".into()), a);
        assert_eq!(t.path(a), Some(Path::new("/b/y")));
        assert_ne!(t.bind((1, 11), "/b/z".into()), a);
        assert_eq!(t.path(1), Some(Path::new("/b")));
    }

    #[test]
    fn a_recycled_backing_number_gets_a_new_inode() {
        let mut t = table();
        let a = t.bind((1, 10), "/b/x".into());
        t.unnamed((1, 10), Path::new("/b/x"), true);
        assert_eq!(t.path(a), None);
        assert_ne!(t.bind((1, 10), "/b/x".into()), a);
    }

    #[test]
    fn unlinking_another_name_keeps_the_newest() {
        let mut t = table();
        t.bind((1, 10), "/b/tmp".into());
        let a = t.bind((1, 10), "/b/dest".into());
        t.unnamed((1, 10), Path::new("/b/tmp"), false);
        assert_eq!(t.path(a), Some(Path::new("/b/dest")));
    }

    #[test]
    fn renaming_a_directory_moves_what_is_below() {
        let mut t = table();
        let d = t.bind((1, 10), "/b/d".into());
        let f = t.bind((1, 11), "/b/d/f".into());
        let g = t.bind((1, 12), "/b/dd".into());
        t.renamed(Path::new("/b/d"), Path::new("/b/e"));
        assert_eq!(t.path(d), Some(Path::new("/b/e")));
        assert_eq!(t.path(f), Some(Path::new("/b/e/f")));
        assert_eq!(t.path(g), Some(Path::new("/b/dd")));
    }
}
