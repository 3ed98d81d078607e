//! The store a `chain_restore` input stands for: the bytes split into version files, named,
//! bound to one store and to their parents, and resealed, as the input's flags say.

use super::{reseal, MemStore};
use crate::store::{version_name, StoreId};
use ickpt_format::{header_len_for, Header, HEADER_LEN, MAGIC};
use std::collections::BTreeMap;

/// How [`chain_restore_target`](super::chain_restore_target) builds its store, from the
/// input's first byte (before the first file). Zero, the default of an input that starts with
/// a file, is the friendliest: every checksum resealed, every file bound, the identity
/// recorded, names from headers.
pub mod flag {
    /// Keep page CRCs as the input has them (meta_crc is resealed still).
    pub const KEEP_PAGE_CRCS: u8 = 1;
    /// Leave `store_id` and `parent_meta_crc` as they are instead of binding each file to
    /// the store and to the file its header names as parent.
    pub const UNBOUND: u8 = 2;
    /// Record no identity in the store: the catalog infers it from the files.
    pub const NO_IDENTITY: u8 = 4;
    /// Name the files v1, v2, … in input order instead of by the version their header
    /// claims, so names and contents can disagree.
    pub const NAME_BY_POSITION: u8 = 8;
    /// Restore only the regions at even positions of the newest version's table.
    pub const SOME_REGIONS: u8 = 16;
}

/// Most files one input makes: enough for chains, forks and strays.
const MAX_FILES: usize = 16;

/// The store a [`chain_restore_target`](super::chain_restore_target) input stands for, and
/// its flags.
pub fn input_store(data: &[u8]) -> (MemStore, u8) {
    let (flags, id, files) = store_files(data);
    let id = (flags & flag::NO_IDENTITY == 0).then_some(id);
    let files = files.into_iter().map(|(v, f)| (version_name(v), f));
    (MemStore::with_files(id, files), flags)
}

/// Split `data` at each file magic (the first [`MAX_FILES`] of them), name each piece, bind
/// and reseal it. Returns the flags, the store's identity (the first format-3 file's) and the
/// files by the version number they are named for; of two pieces for one number the later
/// wins.
fn store_files(data: &[u8]) -> (u8, StoreId, BTreeMap<u64, Vec<u8>>) {
    let mut starts: Vec<usize> = Vec::new();
    let mut at = 0;
    while starts.len() < MAX_FILES {
        match data[at..].windows(MAGIC.len()).position(|w| w == MAGIC) {
            Some(i) => {
                starts.push(at + i);
                at += i + MAGIC.len();
            }
            None => break,
        }
    }
    let flags = data[..starts.first().copied().unwrap_or(data.len())]
        .first()
        .copied()
        .unwrap_or(0);
    let mut files = BTreeMap::new();
    for (k, &s) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(data.len());
        let f = data[s..end].to_vec();
        let named = if flags & flag::NAME_BY_POSITION != 0 {
            k as u64 + 1
        } else if f.len() >= 24 {
            u64::from_le_bytes(f[16..24].try_into().expect("8 bytes"))
        } else {
            continue;
        };
        files.insert(named, f);
    }
    let bind = flags & flag::UNBOUND == 0;
    let pages = flags & flag::KEEP_PAGE_CRCS == 0;
    let id = files
        .values()
        .find_map(|f| store_id_of(f))
        .unwrap_or(StoreId(*b"fuzzed-store-id!"));
    // Ascending, so a parent (an older number) is sealed before the child records its CRC.
    let mut sealed_crc: BTreeMap<u64, u32> = BTreeMap::new();
    for (&v, f) in files.iter_mut() {
        if bind && store_id_of(f).is_some() {
            f[64..80].copy_from_slice(&id.0);
            if f[10] == 1 {
                let parent = u64::from_le_bytes(f[24..32].try_into().expect("8 bytes"));
                if let Some(c) = sealed_crc.get(&parent) {
                    f[80..84].copy_from_slice(&c.to_le_bytes());
                }
            }
        }
        reseal(f, pages);
        if f.len() >= 4 {
            let c = u32::from_le_bytes(f[f.len() - 4..].try_into().expect("4 bytes"));
            sealed_crc.insert(v, c);
        }
    }
    (flags, id, files)
}

/// The store identity a format-3 header carries, read as the catalog reads it: only when
/// the file is long enough to hold such a header.
fn store_id_of(f: &[u8]) -> Option<StoreId> {
    (f.len() >= HEADER_LEN && header_len_for(Header::peek_format_version(f)) == HEADER_LEN)
        .then(|| StoreId(f[64..80].try_into().expect("16 bytes")))
}
