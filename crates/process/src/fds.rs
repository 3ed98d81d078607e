//! The open descriptors, from `/proc/self/fd` (what each is) and `/proc/self/fdinfo` (its
//! offset, flags, locks and, for a userfaultfd, its features).

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use crate::record::{FdKind, FdRecord};

/// Every open descriptor, ascending, but those the listing itself uses. A descriptor
/// closed between the listing and its reading is left out (its link or fdinfo is gone:
/// ENOENT; closed after those were read, `fstat` gives EBADF): the caller has stopped every
/// other thread, so only its own can close one meanwhile. Each is read relative to
/// `/proc/self/fd` and `/proc/self/fdinfo` held open, and typed by `fstat`: no path through
/// `/proc` is walked again per descriptor (0.13 ms of a 256 MiB program's stop did).
pub fn list_fds() -> io::Result<Vec<FdRecord>> {
    list_fds_with(&mut FdMemo::default())
}

/// Records of descriptors that a listing takes again from the one before while the
/// descriptor refers to the same file (device, inode and type), reading only its flags and
/// offset: its link and fdinfo cost 16 us a descriptor in a micro-benchmark, 18-35 us in a
/// stopped program.
#[derive(Default)]
pub struct FdMemo {
    known: Vec<(Identity, FdRecord)>,
    reuse: Option<Reuse>,
}

/// Which records a memo keeps.
pub type Reuse = Box<dyn Fn(&FdRecord) -> bool + Send>;

impl FdMemo {
    /// A memo keeping the records `reuse` accepts: those whose path, lock and features
    /// cannot change while the file stays open (ickpt's own descriptors).
    pub fn reusing(reuse: Reuse) -> FdMemo {
        FdMemo {
            known: Vec::new(),
            reuse: Some(reuse),
        }
    }
}

/// What `fstat` says a descriptor refers to: device, inode, type and mode.
type Identity = (u64, u64, u32);

/// [`list_fds`], taking records from `memo` and leaving there those it may take next time.
pub fn list_fds_with(memo: &mut FdMemo) -> io::Result<Vec<FdRecord>> {
    let links = crate::dir::open_dir("/proc/self/fd")?;
    let infos = crate::dir::open_dir("/proc/self/fdinfo")?;
    let own = [links.as_raw_fd() as u64, infos.as_raw_fd() as u64];
    let pagemap = format!("/proc/{}/pagemap", std::process::id());
    let mut out = Vec::new();
    let mut known = Vec::new();
    for fd in crate::dir::numbered_in(&links)? {
        if own.contains(&fd) {
            continue;
        }
        let fd = fd as i32;
        let read = crate::sys::fstat_identity(fd).and_then(|id| {
            match memo.known.iter().find(|(i, r)| r.fd == fd && *i == id) {
                Some((_, r)) => again(r),
                None => read_fd(fd, id.2, links.as_fd(), infos.as_fd(), &pagemap),
            }
            .map(|r| (id, r))
        });
        match read {
            Ok((id, r)) => {
                if memo.reuse.as_ref().is_some_and(|reuse| reuse(&r)) {
                    known.push((id, r.clone()));
                }
                out.push(r);
            }
            Err(e) if closed_meanwhile(&e) => continue,
            Err(e) => return Err(e),
        }
    }
    memo.known = known;
    Ok(out)
}

fn closed_meanwhile(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::EBADF)
}

/// `r` with its flags and offset as they are now: what fdinfo would say (its `flags` are
/// the open file's status flags with O_CLOEXEC added for a descriptor closed on exec; its
/// `pos` is the file position, 0 where there is none to seek).
fn again(r: &FdRecord) -> io::Result<FdRecord> {
    let (flags, offset) = crate::sys::flags_and_offset(r.fd)?;
    Ok(FdRecord {
        flags,
        offset,
        ..r.clone()
    })
}

/// One descriptor's record; `mode`: its `fstat` type and mode; `pagemap`: this process's
/// pagemap file, which ickpt holds open.
fn read_fd(
    fd: i32,
    mode: u32,
    links: BorrowedFd<'_>,
    infos: BorrowedFd<'_>,
    pagemap: &str,
) -> io::Result<FdRecord> {
    let name = CString::new(fd.to_string()).expect("digits hold no NUL");
    let target = crate::sys::readlinkat(links, &name)?;
    let link = format!("/proc/self/fd/{fd}");
    let path = crate::capture::utf8(PathBuf::from(OsString::from_vec(target)), &link)?;
    let text = crate::capture::read_all(&crate::sys::openat(infos, &name)?)?;
    let info = parse_fdinfo(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("cannot read /proc/self/fdinfo/{fd}: {text:?}"),
        )
    })?;
    let kind = if path == "anon_inode:[userfaultfd]" {
        FdKind::Userfaultfd
    } else if path == pagemap {
        FdKind::Pagemap
    } else if path.starts_with('/') {
        // What the descriptor refers to, even when its path was removed.
        match mode & libc::S_IFMT {
            libc::S_IFREG => FdKind::File,
            libc::S_IFDIR => FdKind::Directory,
            libc::S_IFCHR => FdKind::Device,
            _ => FdKind::Other,
        }
    } else {
        FdKind::Other
    };
    Ok(FdRecord {
        fd,
        kind,
        path,
        flags: info.flags,
        offset: info.pos,
        locked: info.locked,
        uffd_features: if kind == FdKind::Userfaultfd {
            info.uffd_features
        } else {
            0
        },
    })
}

/// What `/proc/self/fdinfo/N` says that the record keeps.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FdInfo {
    pub pos: u64,
    pub flags: i32,
    /// A `lock:` line: a lock held through this open file.
    pub locked: bool,
    /// The middle field of a userfaultfd's `API:\t<api>:<features>:<ioctls>` line (hex).
    pub uffd_features: u64,
}

/// The fields of an fdinfo text; None when `pos:` or `flags:` is missing or unreadable.
pub fn parse_fdinfo(text: &str) -> Option<FdInfo> {
    let mut info = FdInfo::default();
    let (mut pos, mut flags) = (false, false);
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "pos" => {
                // Signed in the kernel; a device may report any 64-bit position.
                info.pos = value.parse::<i64>().ok()? as u64;
                pos = true;
            }
            "flags" => {
                info.flags = u32::from_str_radix(value, 8).ok()? as i32;
                flags = true;
            }
            "lock" => info.locked = true,
            "API" => {
                let features = value.split(':').nth(1)?;
                info.uffd_features = u64::from_str_radix(features, 16).ok()?;
            }
            _ => {}
        }
    }
    (pos && flags).then_some(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, SeekFrom, Write};

    /// A file, a directory and a device are listed with their kind, path and offset; the
    /// listing's own directories are not.
    #[test]
    fn descriptors_are_listed_with_their_kind_and_offset() {
        let path = std::env::temp_dir().join(format!("fds-test-{}", std::process::id()));
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(b"0123456789").unwrap();
        file.seek(SeekFrom::Start(7)).unwrap();
        let dir = std::fs::File::open(std::env::temp_dir()).unwrap();
        let null = std::fs::File::open("/dev/null").unwrap();
        let fds = list_fds().unwrap();
        let _ = std::fs::remove_file(&path);
        let find = |f: &std::fs::File| {
            fds.iter()
                .find(|r| r.fd == f.as_raw_fd())
                .unwrap_or_else(|| panic!("fd {} not listed: {fds:?}", f.as_raw_fd()))
        };
        let rec = find(&file);
        assert_eq!(
            (rec.kind, rec.path.as_str(), rec.offset),
            (FdKind::File, path.to_str().unwrap(), 7)
        );
        assert_eq!(find(&dir).kind, FdKind::Directory);
        assert_eq!(
            (find(&null).kind, find(&null).path.as_str()),
            (FdKind::Device, "/dev/null")
        );
        assert!(
            !fds.iter().any(|r| r.path.starts_with("/proc/")),
            "the listing's own directories are listed: {fds:?}"
        );
    }

    #[test]
    fn fdinfo_fields_are_read() {
        let file = "pos:\t123\nflags:\t02100002\nmnt_id:\t24\nino:\t3\n\
                    lock:\t1: FLOCK  ADVISORY  WRITE 4242 fe:00:1234 0 EOF\n";
        assert_eq!(
            parse_fdinfo(file),
            Some(FdInfo {
                pos: 123,
                flags: 0o2100002,
                locked: true,
                uffd_features: 0
            })
        );
        let uffd = "pos:\t0\nflags:\t02004000\nmnt_id:\t15\nino:\t1\npending:\t0\n\
                    total:\t0\nAPI:\taa:1fe:c000000000000000\n";
        let info = parse_fdinfo(uffd).unwrap();
        assert_eq!((info.uffd_features, info.locked), (0x1fe, false));
        assert_eq!(parse_fdinfo("pos:\t-1\nflags:\t0\n").unwrap().pos, u64::MAX);
    }

    #[test]
    fn fdinfo_without_its_fields_is_refused() {
        for bad in [
            "",
            "pos:\t1\n",
            "flags:\t0\n",
            "pos:\tx\nflags:\t0\n",
            "pos:\t1\nflags:\t9\n",
        ] {
            assert_eq!(parse_fdinfo(bad), None, "{bad:?}");
        }
    }
}
