//! What a store's file names and headers alone say: its version numbers, the identity its
//! files carry when none is recorded, and version lists written for messages.

use super::Result;
use crate::error::ReadError;
use crate::store::{parse_version_name, version_name, Store, StoreId};
use ickpt_format::Header;
use std::collections::HashMap;

/// Committed version numbers, ascending: the names of the store's version files, whatever
/// their content. Other names in the store are ignored.
pub fn versions(store: &dyn Store) -> Result<Vec<u64>> {
    numbered(store, parse_version_name)
}

/// The numbers `parse` reads from the names of the store's files, ascending; names it does
/// not take are ignored.
pub(crate) fn numbered(store: &dyn Store, parse: fn(&str) -> Option<u64>) -> Result<Vec<u64>> {
    let names = store
        .list()
        .map_err(|e| ReadError::io(store.describe(""), "listing", e))?;
    let mut v: Vec<u64> = names.iter().filter_map(|n| parse(n)).collect();
    v.sort_unstable();
    Ok(v)
}

/// The identity a store's versions carry when the store has none recorded (a marker lost or
/// written before format 3): the one most of its format-3 files carry, the newest among
/// equals. Only headers are read. None when no file carries one.
pub fn infer_identity(store: &dyn Store) -> Result<Option<StoreId>> {
    let mut count: HashMap<[u8; 16], (usize, u64)> = HashMap::new();
    for v in versions(store)? {
        if let Some(Header {
            store_id: Some(id), ..
        }) = read_header(store, v)
        {
            let e = count.entry(id).or_default();
            e.0 += 1;
            e.1 = e.1.max(v);
        }
    }
    Ok(count
        .into_iter()
        .max_by_key(|&(_, rank)| rank)
        .map(|(id, _)| StoreId(id)))
}

/// Version `v`'s header alone, or None when it cannot be read or decoded (what only looks
/// at headers skips such a file; opening it checked says what is wrong).
pub(super) fn read_header(store: &dyn Store, v: u64) -> Option<Header> {
    let file = store.open(&version_name(v)).ok()?;
    let mut b = [0u8; ickpt_format::HEADER_LEN];
    if file.len() < b.len() as u64 || file.read_exact_at(&mut b, 0).is_err() {
        return None;
    }
    Header::decode(&b).ok()
}

/// "1-9, 12" for a sorted list of versions; "none" when empty.
pub fn describe_versions(v: &[u64]) -> String {
    if v.is_empty() {
        return "none".into();
    }
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if j == i {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::describe_versions;

    #[test]
    fn version_lists_are_compressed_into_ranges() {
        assert_eq!(describe_versions(&[]), "none");
        assert_eq!(describe_versions(&[4]), "4");
        assert_eq!(describe_versions(&[1, 2, 3, 5, 7, 8]), "1-3, 5, 7-8");
    }
}
