//! Listing a `/proc` directory of numbered entries (`/proc/self/fd`, `/proc/self/task`)
//! with raw `getdents64`: `std::fs::read_dir` calls glibc's `opendir`, which allocates with
//! malloc, and another thread may be stopped inside malloc while the capture runs.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::OpenOptionsExt;

/// The numeric entry names of `path`, ascending, leaving out the descriptor the listing
/// itself used (which `/proc/self/fd` shows while it is open).
pub fn numbered_entries(path: &str) -> io::Result<Vec<u64>> {
    let dir = open_dir(path)?;
    let own = dir.as_raw_fd() as u64;
    let mut out = numbered_in(&dir)?;
    if path.ends_with("/fd") {
        out.retain(|&v| v != own);
    }
    Ok(out)
}

/// The numeric entry names of `dir`, just opened (`open_dir`), ascending.
pub fn numbered_in(dir: &File) -> io::Result<Vec<u64>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 8192];
    loop {
        let n = crate::sys::getdents64(dir.as_fd(), &mut buf)?;
        if n == 0 {
            break;
        }
        for name in entry_names(&buf[..n]) {
            if let Some(v) = parse_decimal(name) {
                out.push(v);
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The directory `path`, open for reading its entries or opening them (`openat`).
pub fn open_dir(path: &str) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
}

/// The names in a buffer of `struct linux_dirent64` records: d_ino (8), d_off (8),
/// d_reclen (2), d_type (1), then the NUL-terminated name, padded to d_reclen.
fn entry_names(buf: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let head = buf.get(at..at + 19)?;
        let reclen = u16::from_le_bytes([head[16], head[17]]) as usize;
        let rec = buf.get(at..at + reclen).filter(|_| reclen > 19)?;
        at += reclen;
        let name = &rec[19..];
        Some(&name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())])
    })
}

/// A canonical decimal number ("." and ".." and anything else: None).
pub fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0u64, |v, &d| v * 10 + (d - b'0') as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str) -> Vec<u8> {
        let reclen = (19 + name.len() + 1).next_multiple_of(8);
        let mut r = vec![0u8; reclen];
        r[16..18].copy_from_slice(&(reclen as u16).to_le_bytes());
        r[19..19 + name.len()].copy_from_slice(name.as_bytes());
        r
    }

    #[test]
    fn entry_names_walks_records_and_stops_at_a_bad_length() {
        let mut buf = [record("."), record(".."), record("12"), record("345")].concat();
        let names: Vec<&[u8]> = entry_names(&buf).collect();
        assert_eq!(names, [&b"."[..], b"..", b"12", b"345"]);
        // A record length of 0 would loop forever; one past the buffer would read past it.
        buf[16] = 0;
        buf[17] = 0;
        assert_eq!(entry_names(&buf).count(), 0);
        let mut short = record("7");
        short[16] = 200;
        assert_eq!(entry_names(&short).count(), 0);
    }

    #[test]
    fn only_plain_decimal_names_are_numbers() {
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b"4711"), Some(4711));
        for bad in [&b""[..], b".", b"..", b"1a", b"-1", b"99999999999999999999"] {
            assert_eq!(parse_decimal(bad), None);
        }
    }

    #[test]
    fn open_descriptors_and_threads_are_listed() {
        let probe = File::open("/proc/self/fd").unwrap();
        let with = numbered_entries("/proc/self/fd").unwrap();
        assert!(with.contains(&(probe.as_raw_fd() as u64)));
        let tasks = numbered_entries("/proc/self/task").unwrap();
        assert!(tasks.contains(&(std::process::id() as u64)));
    }
}
