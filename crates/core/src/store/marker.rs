//! The marker file that makes a directory (or an object-store prefix) an ickpt store: every
//! tier writes and reads it alike (`docs/FORMAT.md`, "Store").

use super::StoreId;

/// Marks a directory as an ickpt store, so ickpt never writes into or deletes from a
/// directory that holds something else.
pub const MARKER: &str = "ickpt-store";
/// Format 1 had only the first line (with "format 1"); format 2 adds the store's identity.
pub(crate) const MARKER_HEAD: &str = "ickpt checkpoint store, format 2\n";
/// Markers are a few lines; more is not ickpt's.
pub(crate) const MARKER_MAX: u64 = 4096;

/// The marker's text (format 2), with the store's identity when it has one; every tier writes
/// this (`object.rs` too).
pub(crate) fn marker_text(id: Option<StoreId>) -> String {
    let mut text = MARKER_HEAD.to_string();
    if let Some(id) = id {
        text.push_str(&format!("id {id}\n"));
    }
    text
}

/// The identity a marker's first `MARKER_MAX` bytes record, if any.
pub(crate) fn marker_identity(text: &[u8]) -> Option<StoreId> {
    String::from_utf8_lossy(text)
        .lines()
        .find_map(|l| l.strip_prefix("id ").and_then(StoreId::from_hex))
}
