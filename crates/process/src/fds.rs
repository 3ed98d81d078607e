//! The open descriptors, from `/proc/self/fd` (what each is) and `/proc/self/fdinfo` (its
//! offset, flags, locks and, for a userfaultfd, its features).

use std::io::{self, Read};
use std::path::Path;

use crate::record::{FdKind, FdRecord};

/// Every open descriptor, ascending, but the one the listing itself uses. A descriptor
/// closed between the listing and its reading is left out: the caller has stopped every
/// other thread, so only its own can close one meanwhile.
pub fn list_fds() -> io::Result<Vec<FdRecord>> {
    let mut out = Vec::new();
    for fd in crate::dir::numbered_entries("/proc/self/fd")? {
        match read_fd(fd as i32) {
            Ok(r) => out.push(r),
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

fn read_fd(fd: i32) -> io::Result<FdRecord> {
    let link = format!("/proc/self/fd/{fd}");
    let path = crate::capture::utf8(std::fs::read_link(&link)?, &link)?;
    let mut text = String::new();
    std::fs::File::open(format!("/proc/self/fdinfo/{fd}"))?.read_to_string(&mut text)?;
    let info = parse_fdinfo(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("cannot read /proc/self/fdinfo/{fd}: {text:?}"),
        )
    })?;
    let kind = if path == "anon_inode:[userfaultfd]" {
        FdKind::Userfaultfd
    } else if path == format!("/proc/{}/pagemap", std::process::id()) {
        FdKind::Pagemap
    } else if path.starts_with('/') {
        // The link followed is the open file itself, even when its path was removed.
        let t = std::fs::metadata(Path::new(&link))?.file_type();
        use std::os::unix::fs::FileTypeExt;
        if t.is_file() {
            FdKind::File
        } else if t.is_dir() {
            FdKind::Directory
        } else if t.is_char_device() {
            FdKind::Device
        } else {
            FdKind::Other
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
