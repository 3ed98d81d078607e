//! A version as the catalog hands it out: opened and checked ([`OpenVersion`]), or only
//! what the chain checks and listings need of it ([`Summary`]), kept while its file is closed.

use crate::store::StoreFile;
use ickpt_format::{CommitStats, Footer, Header, Kind, RegionEntry, VersionMeta};

/// A version opened for reading, with its metadata checked.
pub struct OpenVersion {
    pub version: u64,
    /// Open from [`Catalog::open`](super::Catalog::open); closed in a
    /// [`Catalog::chain`](super::Catalog::chain), so that a chain of any length holds no
    /// descriptors: a restore opens each file as it scans it.
    pub(super) file: Option<Box<dyn StoreFile>>,
    pub meta: VersionMeta,
}

impl OpenVersion {
    pub fn kind(&self) -> Kind {
        self.meta.header.kind
    }

    /// The file, while it is held open.
    pub fn file(&self) -> Option<&dyn StoreFile> {
        self.file.as_deref()
    }

    /// Close the file, keeping the checked metadata
    /// ([`Catalog::reopen`](super::Catalog::reopen) opens it again).
    pub fn close(&mut self) {
        self.file = None;
    }

    /// Its size, as its footer says and as checked against the file.
    pub fn bytes(&self) -> u64 {
        self.meta.footer.file_length
    }

    /// What the chain checks need of it.
    pub fn summary(&self) -> Summary {
        Summary {
            header: self.meta.header.clone(),
            regions: self.meta.regions.clone(),
            footer: self.meta.footer.clone(),
            stats: self.meta.stats,
        }
    }
}

/// A version's metadata without its index and page checksums: what the chain checks and
/// listings need, small enough to keep for every version of a store while its files are
/// closed.
#[derive(Debug, Clone)]
pub struct Summary {
    pub header: Header,
    pub regions: Vec<RegionEntry>,
    pub footer: Footer,
    pub stats: Option<CommitStats>,
}

impl Summary {
    pub fn version(&self) -> u64 {
        self.header.version
    }
}
