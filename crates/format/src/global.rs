//! Global-commit records (`docs/FORMAT.md`, "Global-commit records"): a small immutable file
//! per global version of a coordinated (MPI) job, saying which of this store's versions holds
//! this process's part of it. The MPI layer writes one once every rank has committed its
//! version locally; a restart agrees on the newest global version all ranks recorded.

use crate::layout::{limits, u16_at, u32_at, u64_at};
use crate::FormatError;

pub const GLOBAL_MAGIC: [u8; 8] = *b"ICKPTGLB";
pub const GLOBAL_FORMAT: u16 = 1;
pub const GLOBAL_RECORD_LEN: usize = 64;

/// One global version of a job, as this store's process holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobalRecord {
    /// The job's number for the global version (the same on every rank), ≥ 1.
    pub global: u64,
    /// This store's version holding this process's memory of it.
    pub version: u64,
    /// That version file's `meta_crc`: the record names that very file, never a later one
    /// given the same number.
    pub version_meta_crc: u32,
    /// The store the record belongs to.
    pub store_id: [u8; 16],
}

/// The file name of global version `global`'s record: `gNNNNNNNN.global`, zero-padded to at
/// least 8 digits as version names are.
pub fn global_name(global: u64) -> String {
    numbered_name('g', global, ".global")
}

/// The global version a record's file name stands for; None for any other name (and for a
/// non-canonical spelling of one, so each global version has one name).
pub fn parse_global_name(name: &str) -> Option<u64> {
    parse_numbered_name(name, 'g', ".global")
}

/// `PREFIX` + `n` zero-padded to at least 8 digits + `SUFFIX`: how a store names its
/// numbered files (versions `v00000001.ickpt`, records `g00000001.global`).
pub fn numbered_name(prefix: char, n: u64, suffix: &str) -> String {
    format!("{prefix}{n:08}{suffix}")
}

/// The number a file name of [`numbered_name`]'s form stands for: 1 to the format's highest
/// version, and only the one spelling `numbered_name` gives it (`v1.ickpt` beside
/// `v00000001.ickpt` would list one version twice).
pub fn parse_numbered_name(name: &str, prefix: char, suffix: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits
        .parse()
        .ok()
        .filter(|&n| n > 0 && n <= limits::MAX_VERSION)
        .filter(|&n| numbered_name(prefix, n, suffix) == name)
}

impl GlobalRecord {
    pub fn encode(&self) -> [u8; GLOBAL_RECORD_LEN] {
        let mut b = [0u8; GLOBAL_RECORD_LEN];
        b[0..8].copy_from_slice(&GLOBAL_MAGIC);
        b[8..10].copy_from_slice(&GLOBAL_FORMAT.to_le_bytes());
        b[16..24].copy_from_slice(&self.global.to_le_bytes());
        b[24..32].copy_from_slice(&self.version.to_le_bytes());
        b[32..36].copy_from_slice(&self.version_meta_crc.to_le_bytes());
        b[40..56].copy_from_slice(&self.store_id);
        let crc = crate::crc(&b[0..56]);
        b[56..60].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decode a record file's whole content, read as named `global_name(global)`: any other
    /// length, a bad checksum or a field out of its range is refused.
    pub fn decode(b: &[u8], global: u64) -> Result<GlobalRecord, FormatError> {
        if b.len() != GLOBAL_RECORD_LEN {
            return Err(FormatError::corrupt(
                0,
                format!(
                    "a global-commit record is {GLOBAL_RECORD_LEN} bytes, this file {}",
                    b.len()
                ),
            ));
        }
        if b[0..8] != GLOBAL_MAGIC {
            return Err(FormatError::corrupt(
                0,
                "bad magic: not a global-commit record",
            ));
        }
        // The checksum first: every record format keeps the length and the checksum's place
        // (docs/FORMAT.md), so a damaged format field reads as damage, and only an intact
        // record of a newer format asks for an upgrade.
        let crc = u32_at(b, 56);
        if crc != crate::crc(&b[0..56]) {
            return Err(FormatError::corrupt(
                56,
                "global-commit record checksum mismatch",
            ));
        }
        let format = u16_at(b, 8);
        if format == 0 {
            return Err(FormatError::corrupt(8, "record format 0"));
        }
        if format > GLOBAL_FORMAT {
            return Err(FormatError::UnsupportedVersion {
                found: format,
                supported: GLOBAL_FORMAT,
            });
        }
        let reserved = [10..16, 36..40, 60..64];
        if let Some(at) = reserved.into_iter().flatten().find(|&i| b[i] != 0) {
            return Err(FormatError::corrupt(
                at as u64,
                "reserved record bytes are not zero",
            ));
        }
        let r = GlobalRecord {
            global: u64_at(b, 16),
            version: u64_at(b, 24),
            version_meta_crc: u32_at(b, 32),
            store_id: b[40..56].try_into().expect("16 bytes"),
        };
        if r.global != global {
            return Err(FormatError::corrupt(
                16,
                format!(
                    "the record says global version {}, its name {global}",
                    r.global
                ),
            ));
        }
        if r.version == 0 || r.version > limits::MAX_VERSION {
            return Err(FormatError::corrupt(
                24,
                format!("implausible version number {}", r.version),
            ));
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> GlobalRecord {
        GlobalRecord {
            global: 7,
            version: 12,
            version_meta_crc: 0xDEAD_BEEF,
            store_id: [3; 16],
        }
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let r = record();
        assert_eq!(GlobalRecord::decode(&r.encode(), 7).unwrap(), r);
    }

    #[test]
    fn every_flipped_byte_is_refused_as_damage() {
        let good = record().encode();
        for i in 0..GLOBAL_RECORD_LEN {
            let mut b = good;
            b[i] ^= 0x40;
            // Damage, never "upgrade ickpt": that would stop every restart (records that do
            // not count are passed over; a newer format is an error).
            assert!(
                matches!(
                    GlobalRecord::decode(&b, 7),
                    Err(FormatError::Corrupt { .. })
                ),
                "byte {i} flipped"
            );
        }
    }

    #[test]
    fn only_an_intact_record_of_a_newer_format_asks_for_an_upgrade() {
        let reformat = |f: u16| {
            let mut b = record().encode();
            b[8..10].copy_from_slice(&f.to_le_bytes());
            let crc = crate::crc(&b[0..56]);
            b[56..60].copy_from_slice(&crc.to_le_bytes());
            GlobalRecord::decode(&b, 7)
        };
        assert!(matches!(
            reformat(2),
            Err(FormatError::UnsupportedVersion { found: 2, .. })
        ));
        assert!(matches!(reformat(0), Err(FormatError::Corrupt { .. })));
    }

    #[test]
    fn a_record_under_another_name_or_length_is_refused() {
        let b = record().encode();
        assert!(GlobalRecord::decode(&b, 8).is_err());
        assert!(GlobalRecord::decode(&b[..63], 7).is_err());
        let mut long = b.to_vec();
        long.push(0);
        assert!(GlobalRecord::decode(&long, 7).is_err());
        assert!(GlobalRecord::decode(&[], 7).is_err());
    }

    #[test]
    fn names_round_trip_and_nothing_else_parses() {
        for g in [1, 42, 99_999_999, 100_000_000, limits::MAX_VERSION] {
            assert_eq!(parse_global_name(&global_name(g)), Some(g));
        }
        for bad in [
            "g00000000.global",
            "g1.global",
            "g0000000012.global",
            "v00000001.ickpt",
            "g0000001a.global",
            "g00000001.globall",
            "g00000001",
        ] {
            assert_eq!(parse_global_name(bad), None, "{bad}");
        }
    }
}
