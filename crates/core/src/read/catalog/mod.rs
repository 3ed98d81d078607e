//! What a store holds: its versions, their checked metadata and their chains.
//!
//! This is the one acceptance check for a version. A version is **restorable** when its own
//! file passes [`Catalog::open`] (metadata checksums and rules, the number in its name, the
//! store it belongs to) and every link of its chain down to a full version passes
//! [`check_link`], and every page its reverse scan reads passes its checksum as it is read.
//! Restore, `verify` (which walks each version's chain and its reverse scan's plan through
//! these, `read/verify.rs`), `ls`, the newest-restorable search and garbage collection all
//! decide through these functions, so "verify OK" means a restore succeeds with these bytes.
//!
//! Here: the [`Catalog`], opening versions and their chains. Beside it: what a version is
//! once opened (`version.rs`), the rules of a link (`link.rs`), what names and headers alone
//! say (`listing.rs`), and the whole store judged at once (`survey.rs`).

mod link;
mod listing;
mod survey;
mod version;

pub use link::check_link;
pub(crate) use listing::numbered;
use listing::read_header;
pub use listing::{describe_versions, infer_identity, versions};
pub use survey::{orphans, Problem, Surveyed};
pub use version::{OpenVersion, Summary};

use crate::error::{FileError, ReadError};
use crate::store::{version_name, Store, StoreFile, StoreId};
use ickpt_format::{read_meta, FormatError};
use std::sync::OnceLock;

type Result<T, E = ReadError> = std::result::Result<T, E>;

/// A store seen through its identity.
pub struct Catalog<'a> {
    store: &'a dyn Store,
    id: Option<StoreId>,
    /// The number of the store's first format-3 version of its own, once looked for.
    bound_from: OnceLock<Option<u64>>,
}

impl<'a> Catalog<'a> {
    /// The store with its recorded identity, or the one its files carry when none is
    /// recorded (nothing is written).
    pub fn new(store: &'a dyn Store) -> Result<Self> {
        let id = match store
            .identity()
            .map_err(|e| ReadError::io(store.describe(""), "reading the store's identity", e))?
        {
            Some(id) => Some(id),
            None => infer_identity(store)?,
        };
        Ok(Self::with_identity(store, id))
    }

    /// The store, taking `id` as its identity (a writer that has just settled it).
    pub fn with_identity(store: &'a dyn Store, id: Option<StoreId>) -> Self {
        Catalog {
            store,
            id,
            bound_from: OnceLock::new(),
        }
    }

    /// The lowest-numbered version that carries this store's identity: from there on the
    /// store binds its files, so no file without binding (formats 1 and 2, which an older
    /// ickpt wrote before the store was upgraded) can come after it. Only headers are read,
    /// and only until the first such file.
    fn binding_began(&self) -> Option<u64> {
        let own = self.id?;
        *self.bound_from.get_or_init(|| {
            versions(self.store)
                .ok()?
                .into_iter()
                .find(|&v| read_header(self.store, v).is_some_and(|h| h.store_id == Some(own.0)))
        })
    }

    /// Open the file of a version checked before (in a chain), to read its pages: it must
    /// still be the size the checked metadata says (its pages are checked as they are read).
    pub fn reopen(&self, ov: &OpenVersion) -> Result<Box<dyn StoreFile>> {
        let name = version_name(ov.version);
        let file = self
            .store
            .open(&name)
            .map_err(|e| ReadError::io(self.store.describe(&name), "open", e))?;
        if file.len() != ov.bytes() {
            return Err(ReadError::format(
                self.store.describe(&name),
                FormatError::Corrupt {
                    offset: 0,
                    what: format!(
                        "changed while it was being restored ({} bytes, checked at {})",
                        file.len(),
                        ov.bytes()
                    ),
                },
            ));
        }
        Ok(file)
    }

    pub fn store(&self) -> &'a dyn Store {
        self.store
    }

    pub fn identity(&self) -> Option<StoreId> {
        self.id
    }

    pub fn versions(&self) -> Result<Vec<u64>> {
        versions(self.store)
    }

    fn describe(&self, v: u64) -> String {
        self.store.describe(&version_name(v))
    }

    /// Open `version` and check its own file: metadata, the number in its name, and that it
    /// belongs to this store (not yet its page data, nor its chain).
    pub fn open(&self, version: u64) -> Result<OpenVersion> {
        let name = version_name(version);
        let file = self.store.open(&name).map_err(|e| {
            // Listed but not there to open (a dangling link, or removed meanwhile): name it.
            let listed = || self.versions().is_ok_and(|v| v.contains(&version));
            if e.kind() == std::io::ErrorKind::NotFound && !listed() {
                ReadError::NotFound {
                    version,
                    dir: self.store.describe(""),
                    available: self.available(),
                }
            } else {
                ReadError::io(self.store.describe(&name), "open", e)
            }
        })?;
        let corrupt = |source| ReadError::format(self.store.describe(&name), source);
        let meta = read_meta(&*file, file.len()).map_err(corrupt)?;
        if meta.header.version != version {
            return Err(corrupt(FormatError::Corrupt {
                offset: 16,
                what: format!("file holds version {}, not {version}", meta.header.version),
            }));
        }
        match (meta.header.store_id, self.id) {
            (Some(found), Some(own)) if found != own.0 => {
                return Err(ReadError::Foreign {
                    file: self.store.describe(&name),
                    found: StoreId(found),
                    own,
                });
            }
            (None, _) => match self.binding_began() {
                Some(first) if version > first => {
                    return Err(corrupt(FormatError::Corrupt {
                        offset: 8,
                        what: format!(
                            "a format-{} file numbered after version {first}, where this store \
                             began binding its files to it (format 3): no ickpt wrote it here \
                             after that, so it is not taken as part of this store",
                            meta.header.format_version
                        ),
                    }))
                }
                _ => {}
            },
            _ => {}
        }
        Ok(OpenVersion {
            version,
            file: Some(file),
            meta,
        })
    }

    /// "versions 1-9, 12" or "none", for messages about a version that is not there.
    pub fn available(&self) -> String {
        match self.versions() {
            Ok(v) => describe_versions(&v),
            Err(_) => "unknown (the store cannot be listed)".into(),
        }
    }

    /// The chain restoring `version` needs, newest first: itself, its parent, … back to its
    /// full version, each file and each link checked.
    pub fn chain(&self, version: u64) -> Result<Vec<OpenVersion>> {
        let mut out: Vec<OpenVersion> = Vec::new();
        let mut next = version;
        loop {
            let v = self.open(next).map_err(|e| match (e, out.last()) {
                (ReadError::NotFound { .. }, Some(child)) => ReadError::ChainBroken {
                    version,
                    missing: child.meta.header.parent,
                    dir: self.store.describe(""),
                },
                // Not damage: every version of a chain this long would fail alike.
                (ReadError::File(FileError::Io { source, .. }), _)
                    if matches!(source.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) =>
                {
                    ReadError::OutOfFiles {
                        version,
                        open: out.len(),
                    }
                }
                (e, _) => e,
            })?;
            if let Some(child) = out.last() {
                check_link(&child.summary(), &v.summary(), &|v| self.describe(v))?;
            }
            let parent = v.meta.header.parent;
            // Closed until a restore reads it: a chain holds no descriptors.
            out.push(OpenVersion { file: None, ..v });
            if parent == 0 {
                return Ok(out);
            }
            next = parent;
        }
    }

    /// The newest version whose file and chain pass their checks (page data is checked as a
    /// restore reads it). None when no version does. An error that is not about what a file
    /// holds (the store cannot be read at all) is returned, not taken for a damaged version.
    pub fn newest_restorable(&self) -> Result<Option<u64>> {
        for v in self.versions()?.into_iter().rev() {
            match self.chain(v) {
                Ok(_) => return Ok(Some(v)),
                Err(e) if e.is_damage() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }
}
