//! A simulated disk for crash-consistency tests, in the manner of redb's: it keeps what is
//! *live* (what the running program sees) apart from what is *durable* (what would survive
//! a power cut). File data is durable once the file is fsynced; a directory entry created,
//! renamed, linked or removed is durable once the directory is fsynced. Cutting the power
//! fails every operation from a chosen one on, and [`CrashFs::after_power_loss`] gives the
//! disk as a power loss could leave it: unsynced data lost or torn (a prefix kept, the rest
//! missing or garbage), each unsynced directory change lost or kept, chosen from a seed.
//!
//! It holds one directory, which exists durably once created. Names hold regular files only.

use super::fs::{DirMeta, Entry, FileKind, FsDir, FsFile, LockGuard, StoreFs};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

/// Ways the simulated disk departs from a correct local file system.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CrashOptions {
    /// A file's fsync does nothing (shows a test catches a store that omits it).
    pub skip_file_sync: bool,
    /// The directory's fsync does nothing.
    pub skip_dir_sync: bool,
    /// `RENAME_NOREPLACE` fails with EINVAL, as on FUSE and NFS.
    pub no_rename_noreplace: bool,
    /// Hard links fail with EPERM, as on file systems without them.
    pub no_link: bool,
}

#[derive(Clone)]
pub struct CrashFs {
    state: Arc<Mutex<State>>,
}

struct Inode {
    live: Vec<u8>,
    durable: Vec<u8>,
}

/// A directory change not yet made durable, with the file it names.
enum Change {
    Create { name: String, ino: u64 },
    Rename { from: String, to: String, ino: u64 },
    Link { to: String, ino: u64 },
    Unlink { name: String, ino: u64 },
}

struct State {
    opts: CrashOptions,
    exists: bool,
    live: BTreeMap<String, u64>,
    durable: BTreeMap<String, u64>,
    pending: Vec<Change>,
    inodes: HashMap<u64, Inode>,
    next_ino: u64,
    /// Changing operations done (creates, writes, fsyncs, renames, links, unlinks).
    ops: u64,
    /// The operation at which the power fails: it and all after it fail with EIO.
    cut_at: Option<u64>,
    locked: bool,
    noreplace_refused: u64,
}

fn err(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

impl State {
    fn powered(&self) -> io::Result<()> {
        match self.cut_at {
            Some(c) if self.ops >= c => Err(err(libc::EIO)),
            _ => Ok(()),
        }
    }

    /// Count a changing operation, or fail it if the power is off.
    fn op(&mut self) -> io::Result<()> {
        self.powered()?;
        self.ops += 1;
        Ok(())
    }

    fn ino(&self, name: &str) -> io::Result<u64> {
        self.live
            .get(name)
            .copied()
            .ok_or_else(|| err(libc::ENOENT))
    }

    fn inode(&mut self, ino: u64) -> &mut Inode {
        self.inodes.get_mut(&ino).expect("inodes are never dropped")
    }
}

impl CrashFs {
    pub fn new(opts: CrashOptions) -> Self {
        CrashFs {
            state: Arc::new(Mutex::new(State {
                opts,
                exists: false,
                live: BTreeMap::new(),
                durable: BTreeMap::new(),
                pending: Vec::new(),
                inodes: HashMap::new(),
                next_ino: 1,
                ops: 0,
                cut_at: None,
                locked: false,
                noreplace_refused: 0,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changing operations done so far (the k of [`cut_power_at`](Self::cut_power_at)).
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// Let operations 0..op run; the power fails at operation `op`.
    pub fn cut_power_at(&self, op: u64) {
        self.lock().cut_at = Some(op);
    }

    /// Whether the power has failed.
    pub fn is_cut(&self) -> bool {
        self.lock().powered().is_err()
    }

    /// Times `RENAME_NOREPLACE` was refused (with [`CrashOptions::no_rename_noreplace`]).
    pub fn noreplace_refusals(&self) -> u64 {
        self.lock().noreplace_refused
    }

    /// Names in the directory, as the running program sees them.
    pub fn names(&self) -> Vec<String> {
        self.lock().live.keys().cloned().collect()
    }

    /// The disk after the power failed now, as the machine finds it on reboot: durable
    /// state, plus each unsynced directory change kept or lost and each file's unsynced data
    /// kept, cut short or garbled, all chosen by `seed`. Same options, powered, unlocked.
    pub fn after_power_loss(&self, seed: u64) -> CrashFs {
        let st = self.lock();
        let mut rng = SplitMix(seed);
        let mut names = st.durable.clone();
        for c in &st.pending {
            if rng.next() & 1 == 0 {
                continue;
            }
            match c {
                Change::Create { name, ino } | Change::Link { to: name, ino } => {
                    names.insert(name.clone(), *ino);
                }
                Change::Rename { from, to, ino } => {
                    if names.get(from) == Some(ino) {
                        names.remove(from);
                    }
                    names.insert(to.clone(), *ino);
                }
                Change::Unlink { name, ino } => {
                    if names.get(name) == Some(ino) {
                        names.remove(name);
                    }
                }
            }
        }
        let mut inodes = HashMap::new();
        for &ino in names.values() {
            let data = torn(&st.inodes[&ino], &mut rng);
            inodes.insert(
                ino,
                Inode {
                    live: data.clone(),
                    durable: data,
                },
            );
        }
        CrashFs {
            state: Arc::new(Mutex::new(State {
                opts: st.opts,
                exists: st.exists,
                live: names.clone(),
                durable: names,
                pending: Vec::new(),
                inodes,
                next_ino: st.next_ino,
                ops: 0,
                cut_at: None,
                locked: false,
                noreplace_refused: 0,
            })),
        }
    }
}

/// What is left of a file's data: what was synced, then some of the unsynced bytes, of
/// which a stretch may be garbage (blocks allocated but never written).
fn torn(inode: &Inode, rng: &mut SplitMix) -> Vec<u8> {
    let (live, durable) = (&inode.live, &inode.durable);
    if live == durable || live.len() < durable.len() {
        return durable.clone();
    }
    // Synced bytes overwritten since (`overwrite_at`) come back old, new, or new over one
    // range of them: the disk may have written part of the overwrite.
    let lo = durable.len();
    let mut data = durable.clone();
    if live[..lo] != durable[..] {
        let a = rng.below(lo + 1);
        let b = a + rng.below(lo - a + 1);
        data[a..b].copy_from_slice(&live[a..b]);
    }
    // Appended bytes: kept, cut short, or garbled.
    let keep = lo + rng.below(live.len() - lo + 1);
    data.extend_from_slice(&live[lo..keep]);
    if keep > lo && rng.next() & 1 == 0 {
        let a = lo + rng.below(keep - lo);
        let b = a + 1 + rng.below(keep - a);
        for x in &mut data[a..b] {
            *x = rng.next() as u8;
        }
    }
    data
}

/// SplitMix64: a seeded generator with no dependency.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

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

struct CrashFile {
    fs: CrashFs,
    ino: u64,
}

impl FsFile for CrashFile {
    /// Simulated files have no modes.
    fn restrict_to_owner(&self) -> io::Result<()> {
        Ok(())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.op()?;
        st.inode(self.ino).live.extend_from_slice(buf);
        Ok(())
    }

    /// Only the live bytes change: a power loss before the next sync keeps the old ones.
    fn overwrite_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.op()?;
        let live = &mut st.inode(self.ino).live;
        super::within_written(offset, buf.len(), live.len() as u64)?;
        live[offset as usize..offset as usize + buf.len()].copy_from_slice(buf);
        Ok(())
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.powered()?;
        let data = &st.inode(self.ino).live;
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = start.saturating_add(buf.len());
        if end > data.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.copy_from_slice(&data[start..end]);
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        let mut st = self.fs.lock();
        st.powered()?;
        Ok(st.inode(self.ino).live.len() as u64)
    }

    fn sync(&self) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.op()?;
        if !st.opts.skip_file_sync {
            let inode = st.inode(self.ino);
            inode.durable = inode.live.clone();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(fs: &CrashFs) -> Box<dyn FsDir> {
        fs.open_dir(Path::new("/sim"), true).unwrap()
    }

    fn file(d: &dyn FsDir, name: &str, data: &[u8], sync: bool) {
        let mut f = d.create_new(name).unwrap();
        f.write_all(data).unwrap();
        if sync {
            f.sync().unwrap();
        }
    }

    fn read(fs: &CrashFs, name: &str) -> Option<Vec<u8>> {
        let d = dir(fs);
        let f = d.open_file(name).ok()?;
        let mut b = vec![0; f.size().unwrap() as usize];
        f.read_exact_at(&mut b, 0).unwrap();
        Some(b)
    }

    #[test]
    fn an_unsynced_overwrite_comes_back_old_new_or_partly_new() {
        let fs = CrashFs::new(CrashOptions::default());
        let d = dir(&fs);
        let mut f = d.create_new("a").unwrap();
        f.write_all(b"aaaaaaaa").unwrap();
        f.sync().unwrap();
        f.overwrite_at(2, b"bbbb").unwrap();
        assert!(
            f.overwrite_at(6, b"ccc").is_err(),
            "an overwrite never extends"
        );
        d.sync().unwrap();
        let (mut old, mut new, mut part) = (false, false, false);
        for seed in 0..200 {
            let got = read(&fs.after_power_loss(seed), "a").unwrap();
            assert_eq!(got.len(), 8);
            assert_eq!(&got[..2], b"aa");
            assert_eq!(&got[6..], b"aa");
            match &got[2..6] {
                b"aaaa" => old = true,
                b"bbbb" => new = true,
                mid => {
                    assert!(mid.iter().all(|&c| c == b'a' || c == b'b'), "{mid:?}");
                    part = true;
                }
            }
        }
        assert!(old && new && part);
        f.sync().unwrap();
        for seed in 0..20 {
            assert_eq!(read(&fs.after_power_loss(seed), "a").unwrap(), b"aabbbbaa");
        }
    }

    #[test]
    fn synced_state_survives_every_power_loss() {
        let fs = CrashFs::new(CrashOptions::default());
        let d = dir(&fs);
        file(&*d, "a", b"hello", true);
        d.sync().unwrap();
        for seed in 0..50 {
            let after = fs.after_power_loss(seed);
            assert_eq!(read(&after, "a").as_deref(), Some(&b"hello"[..]));
        }
    }

    #[test]
    fn unsynced_changes_are_each_kept_or_lost() {
        let fs = CrashFs::new(CrashOptions::default());
        let d = dir(&fs);
        file(&*d, "a", b"synced data", true);
        file(&*d, "b", b"never synced", false);
        let (mut a_seen, mut a_lost, mut b_torn) = (false, false, false);
        for seed in 0..200 {
            let after = fs.after_power_loss(seed);
            match read(&after, "a") {
                Some(data) => {
                    assert_eq!(data, b"synced data", "synced data is never torn");
                    a_seen = true;
                }
                None => a_lost = true,
            }
            if let Some(b) = read(&after, "b") {
                b_torn |= b.len() < 12 || b != b"never synced";
            }
        }
        assert!(
            a_seen && a_lost,
            "an unsynced entry is sometimes kept, sometimes lost"
        );
        assert!(b_torn, "unsynced data is sometimes torn");
    }

    #[test]
    fn the_power_cut_fails_that_operation_and_all_after() {
        let fs = CrashFs::new(CrashOptions::default());
        let d = dir(&fs);
        fs.cut_power_at(2);
        let mut f = d.create_new("a").unwrap();
        f.write_all(b"x").unwrap();
        assert!(f.sync().is_err());
        assert!(d.sync().is_err());
        assert!(d.entries().is_err());
        assert!(fs.is_cut());
        assert_eq!(fs.ops(), 2);
    }
}
