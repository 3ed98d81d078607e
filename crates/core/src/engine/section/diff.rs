//! A section's changed words: diffing regions against their twins, keeping what a save or a
//! checkpoint has not taken yet, and the pages sections owe the next checkpoint.

use super::twins::Twin;
use super::{Engine, Live, State};
use crate::error::SectionError;
use crate::track::protocol::committer::give_back;
use ickpt_format::{DeltaFile, RegionDelta};
use std::collections::BTreeMap;

impl Engine {
    /// After an inject wrote `delta` while a section is open: its words are the section's
    /// too (the next save holds them), but a take must not send them on as this process's
    /// own, so the twins take them now.
    pub(in crate::engine) fn sections_after_inject(st: &mut State, delta: &DeltaFile) {
        let Some(live) = st.sections.open.as_mut().and_then(|o| o.live.as_mut()) else {
            return;
        };
        let regions = live
            .twins
            .iter_mut()
            .map(|t| {
                let words = delta
                    .regions
                    .iter()
                    .find(|r| r.id == t.id && r.length == t.len() as u64)
                    .map(|r| r.words.clone())
                    .unwrap_or_default();
                t.apply(delta.page_size, &words);
                RegionDelta {
                    id: t.id,
                    length: t.len() as u64,
                    words,
                }
            })
            .collect();
        let d = DeltaFile {
            page_size: delta.page_size,
            saves: 1,
            regions,
        };
        // Same layout as every other delta of these twins: the merge cannot fail.
        let _ = live.keep(d);
    }

    /// Write-protect every region and take its twin; the pages written before are owed to
    /// the next checkpoint.
    pub(super) fn arm_and_twin(&self, st: &mut State) -> Result<Vec<Twin>, SectionError> {
        let mut twins = Vec::with_capacity(st.regions.len());
        let mut bits = Vec::new();
        for s in st.regions.values() {
            let r = self
                .tracker
                .rearm(&s.tr, &mut bits, &mut |_| s.tr.monitor_every_piece());
            owe(&mut st.sections.owed, s.tr.id, &bits);
            r.map_err(|e| crate::engine::region_error(&s.tr, e))?;
            twins.push(Twin::take(&s.tr));
        }
        Ok(twins)
    }

    /// Before a checkpoint collects: the open section's words since its last save are
    /// diffed now and kept for its next save (the checkpoint's collect takes their pages),
    /// and the pages sections collected go back to the regions for the checkpoint to store.
    /// Regions protected or unprotected since the section started are left to its next
    /// save, which refuses them.
    pub(in crate::engine) fn sections_before_checkpoint(
        &self,
        st: &mut State,
    ) -> Result<(), crate::error::RegionError> {
        let page_size = self.page_size_u32();
        let sections = &mut st.sections;
        let mut failed = Ok(());
        if let Some(live) = sections.open.as_mut().and_then(|o| o.live.as_mut()) {
            let diffed = Self::collect_delta(
                &self.tracker,
                &st.regions,
                live,
                &mut sections.owed,
                page_size,
            )
            .and_then(|(d, _)| live.keep(d));
            if let Err(SectionError::Region(e)) = diffed {
                failed = Err(e);
            }
        }
        Self::pay_owed(st);
        failed
    }

    /// Give the pages sections collected back to their regions.
    pub(super) fn pay_owed(st: &mut State) {
        for (id, bits) in std::mem::take(&mut st.sections.owed) {
            if let Some(s) = st.regions.get(&id) {
                give_back(&s.tr, &bits);
            }
        }
    }

    /// The words each region changed since its twin, the twins brought up to date, and the
    /// pages compared; the pages collected are owed to the next checkpoint.
    pub(super) fn collect_delta(
        tracker: &std::sync::Arc<dyn crate::track::Tracker>,
        regions: &BTreeMap<u64, crate::engine::RegionSlot>,
        live: &mut Live,
        owed: &mut BTreeMap<u64, Vec<u64>>,
        page_size: u32,
    ) -> Result<(DeltaFile, u64), SectionError> {
        let same = regions.len() == live.twins.len()
            && regions
                .values()
                .zip(&live.twins)
                .all(|(s, t)| s.tr.id == t.id && s.tr.user_len == t.len());
        if !same {
            return Err(SectionError::Regions(
                "the protected regions changed since the section started: protect and unprotect outside sections".into(),
            ));
        }
        let mut out = Vec::with_capacity(regions.len());
        let mut pages = 0;
        let mut bits = Vec::new();
        for (s, twin) in regions.values().zip(&mut live.twins) {
            let r = tracker.rearm(&s.tr, &mut bits, &mut |_| s.tr.monitor_every_piece());
            if let Err(e) = r {
                // This region's pages go back to it, for the next collect to compare; the
                // regions diffed so far moved their twins on: their words wait for the next
                // save.
                give_back(&s.tr, &bits);
                let rest = regions.values().skip(out.len()).map(|s| RegionDelta {
                    id: s.tr.id,
                    length: s.tr.user_len as u64,
                    words: Vec::new(),
                });
                out.extend(rest);
                live.keep(DeltaFile {
                    page_size,
                    saves: 1,
                    regions: out,
                })?;
                return Err(crate::engine::region_error(&s.tr, e).into());
            }
            owe(owed, s.tr.id, &bits);
            let (w, p) = twin.diff(&s.tr, &bits);
            pages += p;
            out.push(RegionDelta {
                id: s.tr.id,
                length: s.tr.user_len as u64,
                words: w,
            });
        }
        Ok((
            DeltaFile {
                page_size,
                saves: 1,
                regions: out,
            },
            pages,
        ))
    }
}

/// Record `bits` as pages region `id`'s next checkpoint must store.
pub(super) fn owe(owed: &mut BTreeMap<u64, Vec<u64>>, id: u64, bits: &[u64]) {
    let o = owed.entry(id).or_default();
    if o.len() < bits.len() {
        o.resize(bits.len(), 0);
    }
    for (a, b) in o.iter_mut().zip(bits) {
        *a |= b;
    }
}

/// `a` then `b` as one save's words (a failed save's and the next's, or what a take, a
/// checkpoint or an inject left for the next save and its own).
pub(super) fn merge_saves(a: &DeltaFile, b: &DeltaFile) -> Result<DeltaFile, SectionError> {
    let mut m = a
        .merge(b)
        .map_err(|e| SectionError::Regions(e.to_string()))?;
    m.saves = 1;
    Ok(m)
}
