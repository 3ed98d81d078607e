//! `/proc/self/maps`, parsed: what the capture classifies into the record's mappings.

use std::io::{self, Read};

use crate::record::{prot, FileId, MappingKind, MappingRecord};

/// One line of `/proc/self/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapsEntry {
    pub start: u64,
    pub end: u64,
    /// Bits of [`prot`].
    pub prot: u8,
    pub shared: bool,
    pub offset: u64,
    /// The device of the file mapped (`makedev(major, minor)`), 0 for anonymous memory.
    pub dev: u64,
    /// The file's inode, 0 for anonymous memory.
    pub inode: u64,
    /// The path, `[heap]`, `[stack]`, `[vdso]`, `[anon:NAME]`, …; empty when maps shows
    /// none. A file removed since it was mapped ends in ` (deleted)`.
    pub name: String,
}

/// The kernel's mappings, which a restart moves into place instead of restoring.
pub const SPECIAL_NAMES: [&str; 4] = ["[vdso]", "[vvar]", "[vvar_vclock]", "[vsyscall]"];

impl MapsEntry {
    pub fn is_special(&self) -> bool {
        SPECIAL_NAMES.contains(&self.name.as_str())
    }

    /// Whether a file backs it; `[heap]`, `[stack]` and `[anon:…]` have inode 0.
    pub fn is_file_backed(&self) -> bool {
        self.inode != 0
    }

    /// The file was removed (or replaced) since it was mapped, so it cannot be mapped again.
    pub fn is_deleted(&self) -> bool {
        self.name.ends_with(" (deleted)")
    }

    /// Whether the mapping grows down. Decided by name: only the main thread's `[stack]`
    /// is `MAP_GROWSDOWN` in practice (thread stacks are plain mmaps), and the exact flag is
    /// in `/proc/self/smaps`, whose reading walks the page tables of every mapping.
    pub fn growsdown(&self) -> bool {
        self.name == "[stack]"
    }

    /// The record of this mapping, as the restart will bring it back.
    pub fn record(&self, kind: MappingKind, file: Option<FileId>) -> MappingRecord {
        MappingRecord {
            start: self.start,
            end: self.end,
            prot: self.prot,
            shared: self.shared,
            growsdown: self.growsdown(),
            name: self.name.clone(),
            offset: self.offset,
            file,
            kind,
        }
    }
}

/// The process's mappings now, ascending.
pub fn read_maps() -> io::Result<Vec<MapsEntry>> {
    let mut text = String::new();
    std::fs::File::open("/proc/self/maps")?.read_to_string(&mut text)?;
    parse_maps(&text)
}

/// Parse the text of a maps file: `start-end perms offset major:minor inode   name`.
pub fn parse_maps(text: &str) -> io::Result<Vec<MapsEntry>> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            parse_line(line).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("cannot read this line of /proc/self/maps: {line}"),
                )
            })
        })
        .collect()
}

fn parse_line(line: &str) -> Option<MapsEntry> {
    let mut rest = line;
    let mut field = || -> Option<&str> {
        let s = rest.trim_start_matches(' ');
        let end = s.find(' ').unwrap_or(s.len());
        rest = &s[end..];
        Some(&s[..end]).filter(|f| !f.is_empty())
    };
    let (start, end) = field()?.split_once('-')?;
    let perms = field()?.as_bytes();
    let offset = field()?;
    let (major, minor) = field()?.split_once(':')?;
    let inode = field()?.parse().ok()?;
    // The name is the rest after the padding; a path may itself hold spaces.
    let name = rest.trim_start_matches(' ').to_string();
    if perms.len() != 4 {
        return None;
    }
    let bit = |i: usize, c: u8, v: u8| if perms[i] == c { v } else { 0 };
    Some(MapsEntry {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        prot: bit(0, b'r', prot::READ) | bit(1, b'w', prot::WRITE) | bit(2, b'x', prot::EXEC),
        shared: perms[3] == b's',
        offset: u64::from_str_radix(offset, 16).ok()?,
        dev: libc::makedev(
            u32::from_str_radix(major, 16).ok()?,
            u32::from_str_radix(minor, 16).ok()?,
        ),
        inode,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
562607798000-56260779a000 r--p 00000000 fe:00 247026                     /usr/bin/cat
56260fab9000-56260fada000 rw-p 00000000 00:00 0                          [heap]
7f0b6f2ef000-7f0b6f311000 rw-p 00000000 00:00 0 
7f0b6f557000-7f0b6f55e000 r--s 00000000 fe:00 325737                     /usr/lib/a b/gconv.cache (deleted)
7ffd1e0f2000-7ffd1e113000 rw-p 00000000 00:00 0                          [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
";

    #[test]
    fn every_field_of_a_line_is_read() {
        let m = parse_maps(SAMPLE).unwrap();
        assert_eq!(m.len(), 6);
        assert_eq!(
            m[0],
            MapsEntry {
                start: 0x562607798000,
                end: 0x56260779a000,
                prot: prot::READ,
                shared: false,
                offset: 0,
                dev: libc::makedev(0xfe, 0),
                inode: 247026,
                name: "/usr/bin/cat".into(),
            }
        );
        assert!(m[0].is_file_backed() && !m[1].is_file_backed());
        assert_eq!(m[1].prot, prot::READ | prot::WRITE);
        assert_eq!(m[2].name, "");
        assert!(m[3].shared && m[3].is_deleted());
        assert_eq!(m[3].name, "/usr/lib/a b/gconv.cache (deleted)");
        assert!(m[4].growsdown() && !m[1].growsdown());
        assert!(m[5].is_special() && m[5].prot == prot::EXEC);
    }

    #[test]
    fn a_malformed_line_is_an_error_naming_it() {
        for bad in [
            "zz-10 r--p 0 00:00 0",
            "10-20 r--p 0 00:00",
            "10-20 rw 0 00:00 0 x",
        ] {
            let e = parse_maps(bad).unwrap_err();
            assert!(e.to_string().contains(bad), "{e}");
        }
    }

    #[test]
    fn this_process_maps_show_its_stack_and_code() {
        let maps = read_maps().unwrap();
        let here = this_process_maps_show_its_stack_and_code as *const () as u64;
        let code = maps
            .iter()
            .find(|m| m.start <= here && here < m.end)
            .unwrap();
        assert!(code.prot & prot::EXEC != 0 && code.is_file_backed());
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(code.name, exe.to_str().unwrap());
        assert!(maps.iter().any(|m| m.name == "[stack]"));
        assert!(maps.windows(2).all(|w| w[0].end <= w[1].start));
    }
}
