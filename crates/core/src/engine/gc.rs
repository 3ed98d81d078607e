//! Garbage collection of chains older than the configured number of full versions.

use super::Engine;
use crate::catalog;
use crate::error::{Error, Result};
use crate::policy;
use crate::store::version_name;
use ickpt_format::{Header, HEADER_LEN};

impl Engine {
    /// Delete versions no restore of a kept chain can need. Returns what was deleted.
    pub fn collect_garbage(&self) -> Result<Vec<u64>> {
        let _st = self.lock();
        self.collect_garbage_locked()
    }

    /// As `collect_garbage`, for a caller already holding the engine lock.
    pub(super) fn collect_garbage_locked(&self) -> Result<Vec<u64>> {
        let store = &*self.store;
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
        let doomed = policy::collectable(&known, self.cfg.keep_chains);
        for &v in &doomed {
            let name = version_name(v);
            store
                .remove(&name)
                .map_err(|e| Error::io(store.describe(&name), "remove", e))?;
        }
        Ok(doomed)
    }
}
