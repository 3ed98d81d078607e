//! Which versions a store holds, and which of them a restart can use: through the catalog's
//! acceptance check, so a stray, damaged or foreign file never stands in the way of the
//! intact versions before it.

use super::{Engine, RestoreInfo};
use crate::error::{ReadError, RestoreError};
use crate::read::catalog::{Catalog, Surveyed};

impl Engine {
    /// The store as this engine sees it: its identity decides which files are its own.
    pub fn catalog(&self) -> Catalog<'_> {
        Catalog::with_identity(&*self.store, Some(self.id))
    }

    /// The newest version a restore accepts: its file and its whole chain pass every check
    /// (page data is checked as a restore reads it; [`Engine::restore_latest`] moves on to an
    /// older version when a page fails). Higher-numbered files that fail are passed over.
    pub fn latest(&self) -> Result<Option<u64>, ReadError> {
        self.catalog().newest_restorable()
    }

    /// Every version file in the store, oldest first, with what keeps it from being restored
    /// (its own file, or its chain), if anything. Page data is not read: `verify` does that.
    pub fn versions(&self) -> Result<Vec<Surveyed>, ReadError> {
        self.catalog().survey()
    }

    /// The tag `version` was checkpointed with ([`Engine::checkpoint_tagged`]; 0 when none
    /// was), from its checked metadata.
    pub fn version_tag(&self, version: u64) -> Result<u64, ReadError> {
        Ok(self.catalog().open(version)?.meta.header.tag)
    }

    /// Restore the newest version that restores completely, trying older ones while a
    /// version fails its checks or a page of its chain turns out damaged. `Ok(None)` when
    /// the store holds no version at all. A mismatch between the protected regions and the
    /// version's is the caller's to fix, so it is returned at once.
    pub fn restore_latest(&self) -> Result<Option<RestoreInfo>, RestoreError> {
        let versions = self.catalog().versions()?;
        if versions.is_empty() {
            return Ok(None);
        }
        let mut newest_error = None;
        let tried = versions.len();
        for v in versions.into_iter().rev() {
            match self.restore(v) {
                Ok(info) => return Ok(Some(info)),
                Err(e) if e.is_damage() => {
                    newest_error.get_or_insert_with(|| e.to_string());
                }
                Err(e) => return Err(e),
            }
        }
        Err(RestoreError::Read(ReadError::NoRestorable {
            dir: self.store.describe(""),
            tried,
            newest: newest_error.unwrap_or_default(),
        }))
    }
}
