//! What a store holds: its versions, their checked metadata and their chains.

use crate::error::{Error, Result};
use crate::store::{parse_version_name, version_name, Store, StoreFile};
use ickpt_format::{read_meta, Kind, VersionMeta};

/// A version opened for reading, with its metadata checked.
pub struct OpenVersion {
    pub version: u64,
    pub file: Box<dyn StoreFile>,
    pub meta: VersionMeta,
}

impl OpenVersion {
    pub fn kind(&self) -> Kind {
        self.meta.header.kind
    }
}

/// Committed version numbers, ascending. Other files in the store are ignored.
pub fn versions(store: &dyn Store) -> Result<Vec<u64>> {
    let names = store
        .list()
        .map_err(|e| Error::io(store.describe(""), "listing", e))?;
    let mut v: Vec<u64> = names.iter().filter_map(|n| parse_version_name(n)).collect();
    v.sort_unstable();
    Ok(v)
}

/// Open `version` and check its metadata (not yet its page data).
pub fn open(store: &dyn Store, version: u64) -> Result<OpenVersion> {
    let name = version_name(version);
    let file = store.open(&name).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::NotFound {
                version,
                dir: store.describe(""),
            }
        } else {
            Error::io(store.describe(&name), "open", e)
        }
    })?;
    let meta =
        read_meta(&*file, file.len()).map_err(|e| Error::format(store.describe(&name), e))?;
    if meta.header.version != version {
        return Err(Error::Corrupt {
            file: store.describe(&name),
            source: ickpt_format::FormatError::Corrupt {
                offset: 16,
                what: format!("file holds version {}, not {version}", meta.header.version),
            },
        });
    }
    Ok(OpenVersion {
        version,
        file,
        meta,
    })
}

/// The chain restoring `version` needs: itself, its parent, … back to its full version.
pub fn chain(store: &dyn Store, version: u64) -> Result<Vec<OpenVersion>> {
    let mut out: Vec<OpenVersion> = Vec::new();
    let mut next = version;
    loop {
        let v = open(store, next).map_err(|e| match (e, out.last()) {
            (Error::NotFound { .. }, Some(child)) => Error::ChainBroken {
                version,
                missing: child.meta.header.parent,
                dir: store.describe(""),
            },
            (e, _) => e,
        })?;
        if let Some(child) = out.last() {
            if child.meta.header.chain_depth != v.meta.header.chain_depth + 1 {
                return Err(Error::Corrupt {
                    file: store.describe(&version_name(child.version)),
                    source: ickpt_format::FormatError::Corrupt {
                        offset: 32,
                        what: format!("chain depth does not follow its parent {}", v.version),
                    },
                });
            }
        }
        let parent = v.meta.header.parent;
        out.push(v);
        if parent == 0 {
            return Ok(out);
        }
        next = parent;
    }
}
