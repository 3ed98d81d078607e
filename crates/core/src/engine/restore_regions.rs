//! Engine::restore: fill every protected region from a committed version.

// Unsafe allowed here (lib.rs fences it): the reverse scan reads pages straight into the
// regions' memory, which takes a slice of each region, made on `protect`'s promise.
#![allow(unsafe_code)]

use super::{Engine, RestoreInfo, State};
use crate::error::RestoreError;
use crate::policy::Head;
use crate::read::reverse_scan::{reverse_scan, Sink};
use crate::store::retry_other_copies;
use crate::track::protocol::committer::give_back;
use std::time::Instant;

impl Engine {
    /// Restore every protected region from `version`. The regions protected now must be
    /// exactly the regions of that version, with the same lengths; this is checked before
    /// any byte is written. Afterwards the next checkpoint is an increment of `version`.
    ///
    /// With lower tiers, a file found damaged is read again from another tier's copy.
    pub fn restore(&self, version: u64) -> Result<RestoreInfo, RestoreError> {
        retry_other_copies(self.tiered.as_deref(), RestoreError::damaged_file, || {
            self.restore_once(version)
        })
    }

    fn restore_once(&self, version: u64) -> Result<RestoreInfo, RestoreError> {
        let started = Instant::now();
        let mut st = self.lock_for_change()?;
        self.settle(&mut st);
        if let Some(index) = st.sections.open_index() {
            return Err(RestoreError::SectionOpen(index));
        }
        // Memory is about to change behind tracking's back: nothing pre-copied holds.
        if let Some(p) = &mut st.precopy {
            p.discard();
        }
        let catalog = self.catalog();
        let chain = catalog.chain(version)?;
        let newest = &chain[0].meta;
        regions_match(&st, newest, version)?;

        let targets: Vec<std::sync::Arc<crate::track::TrackedRegion>> = newest
            .regions
            .iter()
            .map(|r| st.regions[&r.id].tr.clone())
            .collect();
        // From here memory matches no version until the scan completes, and opened regions
        // no longer record writes: forget the head first, so that whatever fails below, the
        // next checkpoint is full and stores every region whole.
        st.head = None;
        // Another chain than the one measured: the cost policy starts a new one.
        st.chain_costs.full = None;
        st.chain_bytes = None;
        st.previous = None;
        for s in st.regions.values_mut() {
            s.born = None;
        }
        for s in st.regions.values() {
            self.tracker
                .disarm(&s.tr)
                .map_err(|e| super::region_error(&s.tr, e))?;
        }
        let memory = targets
            .iter()
            .map(|tr| {
                // SAFETY: writable after disarm; mapped until unprotected, which waits
                // for the engine lock held here. One slice per region, and regions never
                // overlap (the registry refuses it), so these slices are disjoint; no other
                // reference to the bytes exists, and the slices end with the scan.
                Some(unsafe { tr.covering().bytes_mut(tr.page_offset(), tr.user_len) })
            })
            .collect();
        let report = reverse_scan::<RestoreError>(
            &catalog,
            &chain,
            &|_| true,
            Sink::Memory(memory),
            &mut |_, _| {},
        )?;

        self.rearm_as(&mut st, newest, version)?;
        st.chain_bytes = chain_bytes(&chain);
        let info = RestoreInfo {
            version,
            tag: newest.header.tag,
            chain_len: chain.len() as u32,
            pages: report.pages,
            duration: started.elapsed(),
        };
        st.stats.restores += 1;
        st.stats.pages_restored += report.pages;
        st.stats.restore_time += info.duration;
        Ok(info)
    }
}

/// Refuse a restore of `version` unless the regions protected now are exactly its regions,
/// with the same lengths.
pub(super) fn regions_match(
    st: &State,
    newest: &ickpt_format::VersionMeta,
    version: u64,
) -> Result<(), RestoreError> {
    for r in &newest.regions {
        match st.regions.get(&r.id) {
            None => {
                return Err(RestoreError::RegionMismatch {
                    id: r.id,
                    what: format!("version {version} holds it but it is not protected now; protect it (with {} bytes) before restoring", r.length),
                })
            }
            Some(s) if s.tr.user_len as u64 != r.length => {
                return Err(RestoreError::RegionMismatch {
                    id: r.id,
                    what: format!(
                        "size mismatch: protected with {} bytes, version {version} holds {} bytes",
                        s.tr.user_len, r.length
                    ),
                })
            }
            Some(_) => {}
        }
    }
    let held: std::collections::HashSet<u64> = newest.regions.iter().map(|r| r.id).collect();
    if let Some(id) = st.regions.keys().find(|id| !held.contains(id)) {
        return Err(RestoreError::RegionMismatch {
            id: *id,
            what: format!("protected now but absent from version {version}; restoring would leave it undefined (unprotect it first)"),
        });
    }
    Ok(())
}

impl Engine {
    /// Track every region again from here, memory now being `version` (`newest` its
    /// metadata): the next checkpoint is an increment of it.
    pub(super) fn rearm_as(
        &self,
        st: &mut State,
        newest: &ickpt_format::VersionMeta,
        version: u64,
    ) -> Result<(), RestoreError> {
        let mut scratch = Vec::new();
        // A version written with another page size cannot be continued page for page.
        let same_pages = newest.page_size() as usize == crate::sys::page_size();
        for r in &newest.regions {
            let s = st.regions.get_mut(&r.id).expect("checked above");
            let rearmed = self
                .tracker
                .rearm(&s.tr, &mut scratch, &mut |_| s.tr.monitor_every_piece());
            if let Err(e) = rearmed {
                // What was taken stays dirty: the next checkpoint stores it.
                give_back(&s.tr, &scratch);
                return Err(super::region_error(&s.tr, e).into());
            }
            // Same in-page offset: the stored pages line up with this process's pages, so the
            // chain continues. Otherwise the next checkpoint stores the region whole.
            s.born = (same_pages && r.page_offset as usize == s.tr.page_offset()).then_some(r.born);
        }
        st.head = same_pages.then_some(Head {
            version,
            chain_depth: newest.header.chain_depth,
            meta_crc: newest.footer.meta_crc,
        });
        Ok(())
    }
}

/// The bytes of the chain a restore read (newest first), which the next checkpoints extend.
pub(super) fn chain_bytes(
    chain: &[crate::read::catalog::OpenVersion],
) -> Option<crate::policy::ChainBytes> {
    crate::policy::ChainBytes::of_files(chain.iter().map(|ov| ov.meta.footer.file_length))
}
