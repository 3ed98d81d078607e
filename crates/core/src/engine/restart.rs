//! Engine::resume_after_restart: the engine of a whole process (`ickpt run`), brought back by
//! `ickpt restart` together with the program's memory.
//!
//! The restart put back ickpt's own memory as it was just before the checkpoint of `version`
//! began (the engine state, its regions, its own mappings), the program's memory as that
//! version holds it, and the engine's descriptors (store, userfaultfd, pagemap) at their old
//! numbers. What the kernel kept per process is gone: the process id, and every region's
//! userfaultfd registration (the restart moved each mapping into place, which drops it).

use super::Engine;
use crate::error::RestoreError;

impl Engine {
    /// Take up `version`, whose memory the process now holds: own this process, register
    /// every region with the userfaultfd again and track it from here, so that the next
    /// checkpoint is an increment of `version`. Versions are numbered on after the newest in
    /// the store.
    pub fn resume_after_restart(&mut self, version: u64) -> Result<(), RestoreError> {
        self.pid = std::process::id();
        // Scratch memory came back as zeros: what lives there is made again before use.
        crate::sys::own_spans::scratch_lost();
        let mut st = self.lock();
        let catalog = self.catalog();
        let chain = catalog.chain(version)?;
        let newest = &chain[0].meta;
        super::restore_regions::regions_match(&st, newest, version)?;
        for s in st.regions.values() {
            s.tr.forget_commits();
            self.tracker
                .after_restart(&s.tr)
                .map_err(|e| super::region_error(&s.tr, e))?;
        }
        // Pages set aside as written before the checkpoint belong to `version`: rearming
        // drops them.
        self.rearm_as(&mut st, newest, version)?;
        st.chain_bytes = super::restore_regions::chain_bytes(&chain);
        st.previous = None;
        st.pending = None;
        if let Some(p) = &mut st.precopy {
            p.after_restart();
        }
        st.unreported = None;
        st.chain_costs.full = None;
        let latest = self.latest()?.unwrap_or(version);
        st.next_version = st.next_version.max(latest + 1);
        Ok(())
    }
}
