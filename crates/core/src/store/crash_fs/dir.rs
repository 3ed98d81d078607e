//! The simulated directory: the operations a store makes on its one directory (entries,
//! creating, renaming, linking, unlinking, syncing, the lock), each counted and undone by a
//! power loss until the directory is synced.

use super::file::CrashFile;
use super::{err, Change, CrashFs, Inode, State};
use crate::store::fs::{DirMeta, Entry, FileKind, FsDir, FsFile, LockGuard, StoreFs};
use std::ffi::OsString;
use std::io;
use std::path::Path;

impl StoreFs for CrashFs {
    fn open_dir(&self, _path: &Path, for_writing: bool) -> io::Result<Box<dyn FsDir>> {
        let mut st = self.lock();
        st.powered()?;
        if !st.exists {
            if !for_writing {
                return Err(err(libc::ENOENT));
            }
            st.exists = true;
        }
        Ok(Box::new(CrashDir { fs: self.clone() }))
    }
}

struct CrashDir {
    fs: CrashFs,
}

struct CrashLock(CrashFs);

impl Drop for CrashLock {
    fn drop(&mut self) {
        self.0.lock().locked = false;
    }
}

impl FsDir for CrashDir {
    fn meta(&self) -> io::Result<DirMeta> {
        self.fs.lock().powered()?;
        Ok(DirMeta {
            uid: crate::sys::fs::effective_uid(),
            mode: 0o700,
        })
    }

    /// Simulated apart from the files: the lock file is no file of the simulated disk.
    fn try_lock(&self, _name: &str) -> io::Result<Option<LockGuard>> {
        let mut st = self.fs.lock();
        st.powered()?;
        if st.locked {
            return Ok(None);
        }
        st.locked = true;
        Ok(Some(Box::new(CrashLock(self.fs.clone()))))
    }

    fn entries(&self) -> io::Result<Vec<Entry>> {
        let st = self.fs.lock();
        st.powered()?;
        Ok(st
            .live
            .keys()
            .map(|n| Entry {
                name: OsString::from(n),
                kind: FileKind::File,
            })
            .collect())
    }

    fn kind_of(&self, name: &str) -> io::Result<Option<FileKind>> {
        let st = self.fs.lock();
        st.powered()?;
        Ok(st.live.contains_key(name).then_some(FileKind::File))
    }

    fn create_new(&self, name: &str) -> io::Result<Box<dyn FsFile>> {
        let mut st = self.fs.lock();
        st.op()?;
        if st.live.contains_key(name) {
            return Err(err(libc::EEXIST));
        }
        let ino = st.next_ino;
        st.next_ino += 1;
        st.inodes.insert(
            ino,
            Inode {
                live: Vec::new(),
                durable: Vec::new(),
            },
        );
        st.live.insert(name.to_string(), ino);
        st.pending.push(Change::Create {
            name: name.to_string(),
            ino,
        });
        Ok(Box::new(CrashFile {
            fs: self.fs.clone(),
            ino,
        }))
    }

    fn open_file(&self, name: &str) -> io::Result<Box<dyn FsFile>> {
        let st = self.fs.lock();
        st.powered()?;
        let ino = st.ino(name)?;
        Ok(Box::new(CrashFile {
            fs: self.fs.clone(),
            ino,
        }))
    }

    fn rename_noreplace(&self, from: &str, to: &str) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.op()?;
        if st.opts.no_rename_noreplace {
            st.noreplace_refused += 1;
            return Err(err(libc::EINVAL));
        }
        if st.live.contains_key(to) {
            return Err(err(libc::EEXIST));
        }
        rename(&mut st, from, to)
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.op()?;
        rename(&mut st, from, to)
    }

    fn link(&self, from: &str, to: &str) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.op()?;
        if st.opts.no_link {
            return Err(err(libc::EPERM));
        }
        let ino = st.ino(from)?;
        if st.live.contains_key(to) {
            return Err(err(libc::EEXIST));
        }
        st.live.insert(to.to_string(), ino);
        st.pending.push(Change::Link {
            to: to.to_string(),
            ino,
        });
        Ok(())
    }

    fn unlink(&self, name: &str) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.op()?;
        let ino = st.ino(name)?;
        st.live.remove(name);
        st.pending.push(Change::Unlink {
            name: name.to_string(),
            ino,
        });
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.op()?;
        if !st.opts.skip_dir_sync {
            st.durable = st.live.clone();
            st.pending.clear();
        }
        Ok(())
    }
}

fn rename(st: &mut State, from: &str, to: &str) -> io::Result<()> {
    let ino = st.ino(from)?;
    st.live.remove(from);
    st.live.insert(to.to_string(), ino);
    st.pending.push(Change::Rename {
        from: from.to_string(),
        to: to.to_string(),
        ino,
    });
    Ok(())
}
