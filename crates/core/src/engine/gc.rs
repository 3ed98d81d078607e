//! Garbage collection of chains older than the configured number of full versions.

use super::Engine;
use crate::catalog;
use crate::error::{Error, Result};
use crate::policy;
use crate::store::{version_name, Store};
use ickpt_format::{Header, HEADER_LEN};

impl Engine {
    /// Delete versions no restore of a kept chain can need. Returns what was deleted.
    pub fn collect_garbage(&self) -> Result<Vec<u64>> {
        let mut st = self.lock_for_change()?;
        self.settle(&mut st);
        collect(&*self.store, self.cfg.keep_chains)
    }
}

/// Delete the versions of `store` that no restore of its `keep_chains` newest chains needs.
pub(super) fn collect(store: &dyn Store, keep_chains: u32) -> Result<Vec<u64>> {
    let mut known = Vec::new();
    for v in catalog::versions(store)? {
        // Headers are enough to see chains; a version whose header cannot be read is
        // left alone for `verify` to report.
        let Ok(file) = store.open(&version_name(v)) else {
            continue;
        };
        let mut b = [0u8; HEADER_LEN];
        if file.read_exact_at(&mut b, 0).is_err() {
            continue;
        }
        if let Ok(h) = Header::decode(&b) {
            if h.version == v {
                known.push((v, h.kind, h.parent));
            }
        }
    }
    let doomed = policy::collectable(&known, keep_chains);
    for &v in &doomed {
        let name = version_name(v);
        store
            .remove(&name)
            .map_err(|e| Error::io(store.describe(&name), "remove", e))?;
    }
    Ok(doomed)
}
