//! The file system: every operation done on the backing directory's real files (so large
//! checkpoints work), except those the test asked to fail.

use crate::attr::{file_attr, kind};
use crate::faults::Faults;
use crate::inodes::{key_of, Inodes};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use nix::sys::stat::{futimens, utimensat, UtimensatFlags};
use nix::sys::time::TimeSpec;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions, Permissions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The kernel caches nothing: the tests look at the backing directory too, and a few extra
/// lookups cost nothing at their sizes.
const TTL: Duration = Duration::ZERO;
const GENERATION: Generation = Generation(0);

pub struct Passthrough {
    root: PathBuf,
    faults: Faults,
    state: Mutex<State>,
}

struct State {
    inodes: Inodes,
    files: HashMap<u64, File>,
    next_fh: u64,
    /// Bytes written through the mount so far: what the byte-counted faults count.
    written: u64,
}

fn io_errno(e: io::Error) -> Errno {
    Errno::from(e)
}

fn nix_errno(e: nix::errno::Errno) -> Errno {
    Errno::from_i32(e as i32)
}

fn timespec(t: Option<TimeOrNow>) -> TimeSpec {
    match t {
        None => TimeSpec::UTIME_OMIT,
        Some(TimeOrNow::Now) => TimeSpec::UTIME_NOW,
        Some(TimeOrNow::SpecificTime(t)) => {
            let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
            TimeSpec::from_duration(d)
        }
    }
}

/// Open options for the access mode in `flags`. O_APPEND, O_CREAT and O_TRUNC are left out:
/// the kernel sends the offset of each write and truncates with setattr.
fn open_options(flags: i32) -> OpenOptions {
    let mut o = OpenOptions::new();
    match flags & libc::O_ACCMODE {
        libc::O_WRONLY => o.write(true),
        libc::O_RDWR => o.read(true).write(true),
        _ => o.read(true),
    };
    o.custom_flags(libc::O_NOFOLLOW);
    o
}

impl Passthrough {
    pub fn new(backing: &Path, faults: Faults) -> io::Result<Self> {
        let root = backing.canonicalize()?;
        let m = fs::metadata(&root)?;
        if !m.is_dir() {
            return Err(io::Error::other(format!(
                "{} is not a directory",
                root.display()
            )));
        }
        Ok(Passthrough {
            state: Mutex::new(State {
                inodes: Inodes::new(root.clone(), key_of(&m)),
                files: HashMap::new(),
                next_fh: 1,
                written: 0,
            }),
            root,
            faults,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn injected(&self, what: &str, e: Errno) -> Errno {
        let shown = io::Error::from_raw_os_error(e.code());
        eprintln!("ickpt-testfs: injected \"{shown}\": {what}");
        e
    }
}

impl State {
    fn path(&self, ino: INodeNo) -> Result<PathBuf, Errno> {
        self.inodes
            .path(ino.into())
            .map(Path::to_path_buf)
            .ok_or(Errno::ENOENT)
    }

    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<PathBuf, Errno> {
        Ok(self.path(parent)?.join(name))
    }

    fn shown(&self, ino: INodeNo) -> String {
        self.inodes
            .path(ino.into())
            .map_or_else(|| format!("inode {ino}"), |p| p.display().to_string())
    }

    /// The attributes of the backing file at `path`, bound to its inode.
    fn entry(&mut self, path: PathBuf) -> Result<FileAttr, Errno> {
        let m = fs::symlink_metadata(&path).map_err(io_errno)?;
        let ino = self.inodes.bind(key_of(&m), path);
        Ok(file_attr(ino, &m))
    }

    fn file(&self, fh: FileHandle) -> Result<&File, Errno> {
        self.files.get(&fh.into()).ok_or(Errno::EBADF)
    }

    fn add_file(&mut self, f: File) -> FileHandle {
        let fh = self.next_fh;
        self.next_fh += 1;
        self.files.insert(fh, f);
        FileHandle(fh)
    }

    fn attr(&self, ino: INodeNo, fh: Option<FileHandle>) -> Result<FileAttr, Errno> {
        let m = match fh.and_then(|h| self.files.get(&h.into())) {
            Some(f) => f.metadata(),
            None => fs::symlink_metadata(self.path(ino)?),
        };
        Ok(file_attr(ino.into(), &m.map_err(io_errno)?))
    }

    /// `path` is about to stop naming what it names now: forget the name (and the file, if
    /// it was its last name).
    fn unname(&mut self, path: &Path, m: &fs::Metadata) {
        self.inodes
            .unnamed(key_of(m), path, m.is_dir() || m.nlink() <= 1);
    }

    /// unlink or rmdir (`how`) the entry `name` of `parent`.
    fn remove(
        &mut self,
        parent: INodeNo,
        name: &OsStr,
        how: fn(&Path) -> io::Result<()>,
    ) -> Result<(), Errno> {
        let p = self.child(parent, name)?;
        let m = fs::symlink_metadata(&p).map_err(io_errno)?;
        how(&p).map_err(io_errno)?;
        self.unname(&p, &m);
        Ok(())
    }

    /// Every entry of a directory, "." and ".." first, the rest by name (so that offsets stay
    /// put between the calls of one listing).
    fn list(&mut self, ino: INodeNo) -> Result<Vec<(u64, FileType, OsString)>, Errno> {
        let dir = self.path(ino)?;
        let mut names = Vec::new();
        for e in fs::read_dir(&dir).map_err(io_errno)? {
            names.push(e.map_err(io_errno)?.file_name());
        }
        names.sort();
        let mut out = vec![
            (ino.into(), FileType::Directory, OsString::from(".")),
            (ino.into(), FileType::Directory, OsString::from("..")),
        ];
        for name in names {
            let path = dir.join(&name);
            // An entry removed since read_dir is left out.
            if let Ok(m) = fs::symlink_metadata(&path) {
                let child = self.inodes.bind(key_of(&m), path);
                out.push((child, kind(m.file_type()), name));
            }
        }
        Ok(out)
    }
}

fn read_full(f: &File, size: u32, offset: u64) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; size as usize];
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(n);
    Ok(buf)
}

fn reply_entry(reply: ReplyEntry, r: Result<FileAttr, Errno>) {
    match r {
        Ok(a) => reply.entry(&TTL, &a, GENERATION),
        Err(e) => reply.error(e),
    }
}

fn reply_empty(reply: ReplyEmpty, r: Result<(), Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

fn reply_attr(reply: ReplyAttr, r: Result<FileAttr, Errno>) {
    match r {
        Ok(a) => reply.attr(&TTL, &a),
        Err(e) => reply.error(e),
    }
}

impl Filesystem for Passthrough {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut st = self.lock();
        let r = st.child(parent, name).and_then(|p| st.entry(p));
        reply_entry(reply, r);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        reply_attr(reply, self.lock().attr(ino, fh));
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let st = self.lock();
        let r = (|| {
            let file = fh.and_then(|h| st.files.get(&h.into()));
            if let Some(mode) = mode {
                let perm = Permissions::from_mode(mode & 0o7777);
                match file {
                    Some(f) => f.set_permissions(perm),
                    None => fs::set_permissions(st.path(ino)?, perm),
                }
                .map_err(io_errno)?;
            }
            if uid.is_some() || gid.is_some() {
                match file {
                    Some(f) => std::os::unix::fs::fchown(f, uid, gid),
                    None => std::os::unix::fs::lchown(st.path(ino)?, uid, gid),
                }
                .map_err(io_errno)?;
            }
            if let Some(size) = size {
                match file {
                    Some(f) => f.set_len(size).map_err(io_errno)?,
                    None => {
                        let len = i64::try_from(size).map_err(|_| Errno::EFBIG)?;
                        nix::unistd::truncate(&st.path(ino)?, len).map_err(nix_errno)?
                    }
                }
            }
            if atime.is_some() || mtime.is_some() {
                let (a, m) = (timespec(atime), timespec(mtime));
                match file {
                    Some(f) => futimens(f, &a, &m),
                    None => utimensat(
                        nix::fcntl::AT_FDCWD,
                        &st.path(ino)?,
                        &a,
                        &m,
                        UtimensatFlags::NoFollowSymlink,
                    ),
                }
                .map_err(nix_errno)?;
            }
            st.attr(ino, fh)
        })();
        reply_attr(reply, r);
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self
            .lock()
            .path(ino)
            .and_then(|p| fs::read_link(p).map_err(io_errno))
        {
            Ok(t) => reply.data(t.as_os_str().as_bytes()),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut st = self.lock();
        let r = st.child(parent, name).and_then(|p| {
            fs::DirBuilder::new()
                .mode(mode & !umask & 0o7777)
                .create(&p)
                .map_err(io_errno)?;
            st.entry(p)
        });
        reply_entry(reply, r);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(
            reply,
            self.lock().remove(parent, name, |p| fs::remove_file(p)),
        );
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(
            reply,
            self.lock().remove(parent, name, |p| fs::remove_dir(p)),
        );
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let mut st = self.lock();
        let r = st.child(parent, link_name).and_then(|p| {
            std::os::unix::fs::symlink(target, &p).map_err(io_errno)?;
            st.entry(p)
        });
        reply_entry(reply, r);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mut st = self.lock();
        let r = (|| {
            let from = st.child(parent, name)?;
            let to = st.child(newparent, newname)?;
            if let Some(e) = self.faults.rename_error(flags) {
                let what = format!(
                    "rename {} to {} with flags {flags:?}",
                    from.display(),
                    to.display()
                );
                return Err(self.injected(&what, e));
            }
            // ickpt needs only RENAME_NOREPLACE; exchanging would need both names swapped here.
            if flags.intersects(RenameFlags::RENAME_EXCHANGE | RenameFlags::RENAME_WHITEOUT) {
                return Err(Errno::EINVAL);
            }
            let moved = fs::symlink_metadata(&from).map_err(io_errno)?;
            let replaced = fs::symlink_metadata(&to).ok();
            nix::fcntl::renameat2(
                nix::fcntl::AT_FDCWD,
                &from,
                nix::fcntl::AT_FDCWD,
                &to,
                nix::fcntl::RenameFlags::from_bits_truncate(flags.bits()),
            )
            .map_err(nix_errno)?;
            if let Some(m) = replaced.filter(|m| key_of(m) != key_of(&moved)) {
                st.unname(&to, &m);
            }
            st.inodes.renamed(&from, &to);
            Ok(())
        })();
        reply_empty(reply, r);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let mut st = self.lock();
        let r = (|| {
            let old = st.path(ino)?;
            let new = st.child(newparent, newname)?;
            if let Some(e) = self.faults.link_error() {
                let what = format!("link {} to {}", old.display(), new.display());
                return Err(self.injected(&what, e));
            }
            fs::hard_link(&old, &new).map_err(io_errno)?;
            st.entry(new)
        })();
        reply_entry(reply, r);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut st = self.lock();
        let r = st
            .path(ino)
            .and_then(|p| open_options(flags.0).open(p).map_err(io_errno));
        match r {
            Ok(f) => reply.opened(st.add_file(f), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut st = self.lock();
        let r = (|| {
            let path = st.child(parent, name)?;
            let mut o = open_options(flags);
            o.mode(mode & !umask & 0o7777);
            if flags & libc::O_ACCMODE == libc::O_RDONLY {
                // The kernel creates files opened read-only; std's `create` refuses them.
                o.custom_flags(libc::O_NOFOLLOW | libc::O_CREAT | (flags & libc::O_EXCL));
            } else if flags & libc::O_EXCL != 0 {
                o.create_new(true);
            } else {
                o.create(true);
            }
            if flags & libc::O_TRUNC != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY {
                o.truncate(true);
            }
            let f = o.open(&path).map_err(io_errno)?;
            let attr = st.entry(path)?;
            Ok((attr, st.add_file(f)))
        })();
        match r {
            Ok((attr, fh)) => reply.created(&TTL, &attr, GENERATION, fh, FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let st = self.lock();
        match st
            .file(fh)
            .and_then(|f| read_full(f, size, offset).map_err(io_errno))
        {
            Ok(buf) => reply.data(&buf),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut st = self.lock();
        let len = data.len() as u64;
        if let Some((e, limit)) = self.faults.write_error(st.written, len) {
            let what = format!(
                "write of {len} bytes at {offset} to {} ({} bytes written through the mount, \
                 limit {limit})",
                st.shown(ino),
                st.written
            );
            return reply.error(self.injected(&what, e));
        }
        match st
            .file(fh)
            .and_then(|f| f.write_all_at(data, offset).map_err(io_errno))
        {
            Ok(()) => {
                st.written += len;
                reply.written(data.len() as u32)
            }
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.lock().files.remove(&fh.into());
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let st = self.lock();
        if let Some(e) = self.faults.fsync_error(st.written) {
            let what = format!(
                "fsync of {} ({} bytes written through the mount)",
                st.shown(ino),
                st.written
            );
            return reply.error(self.injected(&what, e));
        }
        let r = st.file(fh).and_then(|f| {
            if datasync {
                f.sync_data()
            } else {
                f.sync_all()
            }
            .map_err(io_errno)
        });
        reply_empty(reply, r);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        match self.lock().list(ino) {
            Ok(entries) => {
                let skip = usize::try_from(offset).unwrap_or(usize::MAX);
                for (i, (child, kind, name)) in entries.into_iter().enumerate().skip(skip) {
                    if reply.add(INodeNo(child), i as u64 + 1, kind, name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let r = self
            .lock()
            .path(ino)
            .and_then(|p| File::open(p).and_then(|d| d.sync_all()).map_err(io_errno));
        reply_empty(reply, r);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match nix::sys::statvfs::statvfs(&self.root) {
            Ok(s) => reply.statfs(
                s.blocks(),
                s.blocks_free(),
                s.blocks_available(),
                s.files(),
                s.files_free(),
                s.block_size() as u32,
                s.name_max() as u32,
                s.fragment_size() as u32,
            ),
            Err(e) => reply.error(nix_errno(e)),
        }
    }
}
