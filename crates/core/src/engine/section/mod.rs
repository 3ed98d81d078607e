//! Program sections (paper 003, Table I): only what a program changes between
//! `section_start` and `section_stop` is tracked, and each `section_save` stores the words
//! changed since the previous save (or the start) in the store, merged into the file of the
//! same name. A run that finds saves in its store recovers: the program re-runs its cheap
//! prefix, each `section_start` injects that section's saves and says how many there were,
//! and after the last saved section the run checkpoints again.

mod saved;
mod twins;

pub use saved::MAX_NAME;

use super::{Engine, State};
use crate::error::SectionError;
use crate::track::protocol::committer::give_back;
use crate::track::Guard;
use ickpt_format::{DeltaFile, RegionDelta};
use saved::Saved;
use std::collections::BTreeMap;
use twins::Twin;

/// What `section_start` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SectionStart {
    /// The section's saves a previous run made, now injected: the program resumes after
    /// that many saves (0 when the section runs afresh).
    pub resume: u64,
    /// Later sections are saved too: this one only replays its saves, the program skips to
    /// `section_stop` (a save here is refused). False once the run checkpoints again.
    pub recovering: bool,
}

/// What a save (or a take) found and wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SectionSave {
    /// Saves the file now holds (1 for a new name).
    pub saves: u64,
    /// Words changed since the previous save.
    pub words: u64,
    /// Pages written since the previous save, compared word by word.
    pub pages: u64,
    /// Bytes of this save's own delta (what a page-granular checkpoint would store as
    /// `pages` pages).
    pub delta_bytes: u64,
    /// Bytes of the file after merging (0 for a take, which writes none).
    pub file_bytes: u64,
}

#[derive(Default)]
pub(crate) struct Sections {
    /// Sections started in this process: the next one's number.
    started: u64,
    /// The saves the store held when the first section started, by section.
    saved: Option<BTreeMap<u64, Vec<Saved>>>,
    open: Option<Open>,
    /// Pages sections collected, by region, that the next checkpoint must still store:
    /// given back to the regions when a section stops or a checkpoint starts, not at every
    /// collect, or the section's next collect would compare them again.
    owed: BTreeMap<u64, Vec<u64>>,
}

struct Open {
    index: u64,
    /// Saves the section holds so far (replayed ones included).
    saves: u64,
    /// None while recovering: the section's saves were replayed and later sections follow.
    live: Option<Live>,
}

struct Live {
    twins: Vec<Twin>,
    /// The save file this section wrote last (or replayed last) and its delta: a save under
    /// its name merges into it.
    current: Option<(Saved, DeltaFile)>,
    /// Names this section saved under before `current`'s.
    earlier: Vec<String>,
    /// Words a failed save collected: the next save holds them.
    unsaved: Option<DeltaFile>,
}

fn order(what: String) -> SectionError {
    SectionError::Order(what)
}

impl Engine {
    /// Table I's `start`. Checkpointing: write-protect the regions and take their twins.
    /// Recovering (the store holds this section's saves): inject them in order, then, if no
    /// later section was saved, checkpoint from here as above. Every saved file is read and
    /// checked before any byte is written.
    pub fn section_start(&self) -> Result<SectionStart, SectionError> {
        let mut st = self.lock_for_change()?;
        self.settle(&mut st);
        if let Some(o) = &st.sections.open {
            return Err(order(format!(
                "section {} is open: call ickpt_section_stop before starting another",
                o.index
            )));
        }
        let index = st.sections.started;
        if st.sections.saved.is_none() {
            st.sections.saved = Some(saved::list(&*self.local)?);
        }
        let all = st.sections.saved.as_ref().expect("listed above");
        let files = all.get(&index).cloned().unwrap_or_default();
        let recovering = all.range(index + 1..).next().is_some();
        let mut deltas = Vec::with_capacity(files.len());
        let mut targets = Vec::with_capacity(files.len());
        for f in &files {
            let d = saved::load(&*self.local, f)?;
            targets.push(Self::inject_targets(&st, &d)?);
            deltas.push(d);
        }
        for (d, t) in deltas.iter().zip(&targets) {
            Self::inject_apply(d, t);
        }
        let resume = files.iter().map(|f| f.saves).sum();
        let live = if recovering {
            None
        } else {
            let twins = self.arm_and_twin(&mut st)?;
            let mut named: Vec<(Saved, DeltaFile)> = files.into_iter().zip(deltas).collect();
            let current = named.pop();
            Some(Live {
                twins,
                current,
                earlier: named.into_iter().map(|(s, _)| s.name).collect(),
                unsaved: None,
            })
        };
        st.sections.open = Some(Open {
            index,
            saves: resume,
            live,
        });
        st.sections.started += 1;
        Ok(SectionStart { resume, recovering })
    }

    /// Table I's `save`: the words changed since the previous save (or the start) go to the
    /// store under `name`, merged into its file if this section's last save used `name`
    /// too. On error nothing saved before is touched, and the words stay for the next save.
    pub fn section_save(&self, name: &str) -> Result<SectionSave, SectionError> {
        saved::check_name(name).map_err(|why| SectionError::Name {
            name: name.into(),
            why,
        })?;
        let mut st = self.lock_for_change()?;
        self.settle(&mut st);
        let page_size = self.page_size_u32();
        let st = &mut *st;
        let (index, saves) = {
            let o = Self::live_section(st, "save")?;
            (o.index, o.saves)
        };
        // A name is one section's, and within it one stretch of saves: injecting files in
        // order must replay the saves in order.
        let taken_by = st
            .sections
            .saved
            .iter()
            .flat_map(|m| m.iter())
            .filter(|(&s, _)| s != index)
            .find(|(_, files)| files.iter().any(|f| f.name == name))
            .map(|(&s, _)| s);
        if let Some(s) = taken_by {
            return Err(SectionError::Name {
                name: name.into(),
                why: format!(
                    "section {s} saved under it; each section saves under names of its own"
                ),
            });
        }
        let live = st
            .sections
            .open
            .as_mut()
            .and_then(|o| o.live.as_mut())
            .expect("checked");
        if live.earlier.iter().any(|n| n == name) {
            return Err(SectionError::Name {
                name: name.into(),
                why: format!(
                    "this section saved under it before it saved under {:?}; a save merges only into the section's latest name",
                    live.current.as_ref().map(|c| c.0.name.as_str()).unwrap_or("")
                ),
            });
        }
        let (fresh, words, pages) = Self::collect_delta(
            &self.tracker,
            &st.regions,
            live,
            &mut st.sections.owed,
            page_size,
        )?;
        let delta = fresh;
        let merge_into = live.current.as_ref().filter(|(s, _)| s.name == name);
        let (file, old, delta_bytes) = match merge_into {
            Some((s, d)) => {
                let merged = d
                    .merge(&delta)
                    .map_err(|e| SectionError::Regions(e.to_string()));
                match merged {
                    Ok(m) => (m, Some(s.clone()), delta.encoded_len()),
                    Err(e) => {
                        live.unsaved = Some(delta);
                        return Err(e);
                    }
                }
            }
            None => (delta.clone(), None, 0),
        };
        let obj = Saved {
            section: index,
            seq: old.as_ref().map_or(saves + 1, |o| o.seq),
            saves: file.saves,
            name: name.into(),
        };
        let written = match saved::write(&*self.local, &obj, &file, old.as_ref()) {
            Ok(n) => n,
            Err(e) => {
                live.unsaved = Some(delta);
                return Err(e);
            }
        };
        if let Some((prev, _)) = live.current.take().filter(|(s, _)| s.name != name) {
            live.earlier.push(prev.name);
        }
        live.current = Some((obj.clone(), file));
        let o = st.sections.open.as_mut().expect("checked");
        o.saves += 1;
        let m = st.sections.saved.get_or_insert_with(BTreeMap::new);
        let files = m.entry(index).or_default();
        files.retain(|f| f.seq != obj.seq);
        files.push(obj.clone());
        Ok(SectionSave {
            saves: obj.saves,
            words,
            pages,
            delta_bytes: if delta_bytes == 0 {
                written
            } else {
                delta_bytes
            },
            file_bytes: written,
        })
    }

    /// The words changed since the previous save or take (or the start), as a delta of
    /// every protected region, kept in memory rather than stored: what CAPE's parallel loop
    /// sends to the other ranks. The section's saves are untouched.
    pub fn section_take(&self) -> Result<(DeltaFile, SectionSave), SectionError> {
        let mut st = self.lock_for_change()?;
        self.settle(&mut st);
        let page_size = self.page_size_u32();
        let st = &mut *st;
        Self::live_section(st, "take")?;
        let sections = &mut st.sections;
        let live = sections
            .open
            .as_mut()
            .and_then(|o| o.live.as_mut())
            .expect("checked");
        let (d, words, pages) = Self::collect_delta(
            &self.tracker,
            &st.regions,
            live,
            &mut sections.owed,
            page_size,
        )?;
        let info = SectionSave {
            saves: 0,
            words,
            pages,
            delta_bytes: d.encoded_len(),
            file_bytes: 0,
        };
        Ok((d, info))
    }

    /// Table I's `stop`: regions no checkpoint has stored yet go back to untracked (their
    /// writes take no fault until the next start or checkpoint); the twins are dropped.
    /// Regions a checkpoint stored stay tracked for the next one.
    pub fn section_stop(&self) -> Result<(), SectionError> {
        let mut st = self.lock_for_change()?;
        self.settle(&mut st);
        if st.sections.open.take().is_none() {
            return Err(order(
                "no section is open: ickpt_section_stop follows an ickpt_section_start".into(),
            ));
        }
        Self::pay_owed(&mut st);
        for s in st.regions.values().filter(|s| s.born.is_none()) {
            self.tracker
                .open_for_restore(&s.tr)
                .map_err(|e| super::region_error(&s.tr, e))?;
        }
        Ok(())
    }

    /// Remove every section save from the store, so the program's sections run afresh
    /// (no section may be open).
    pub fn section_reset(&self) -> Result<(), SectionError> {
        let mut st = self.lock_for_change()?;
        if let Some(o) = &st.sections.open {
            return Err(order(format!(
                "section {} is open: call ickpt_section_stop first",
                o.index
            )));
        }
        for files in saved::list(&*self.local)?.values() {
            for f in files {
                self.local.remove(&f.object()).map_err(|e| {
                    crate::error::FileError::new(self.local.describe(&f.object()), "remove", e)
                })?;
            }
        }
        st.sections.saved = Some(BTreeMap::new());
        Ok(())
    }

    /// The open section, if it may save (or take): not when none is open nor when it is
    /// being replayed.
    fn live_section<'a>(st: &'a mut State, call: &str) -> Result<&'a mut Open, SectionError> {
        let o = st.sections.open.as_mut().ok_or_else(|| {
            order(format!(
                "no section is open: call ickpt_section_start before ickpt_section_{call}"
            ))
        })?;
        if o.live.is_none() {
            return Err(order(format!(
                "section {} replayed its {} saves from the store and later sections are saved too: the program skips to ickpt_section_stop (its saves are in memory already)",
                o.index, o.saves
            )));
        }
        Ok(o)
    }

    fn page_size_u32(&self) -> u32 {
        crate::sys::page_size() as u32
    }

    /// Write-protect every region and take its twin; the pages written before are owed to
    /// the next checkpoint.
    fn arm_and_twin(&self, st: &mut State) -> Result<Vec<Twin>, SectionError> {
        let mut twins = Vec::with_capacity(st.regions.len());
        let mut bits = Vec::new();
        for s in st.regions.values() {
            let r = self
                .tracker
                .collect(&s.tr, Guard::Rearm, &mut bits, &mut |_| {
                    s.tr.monitor_every_piece()
                });
            self.tracker.release(&s.tr, Guard::Rearm);
            owe(&mut st.sections.owed, s.tr.id, &bits);
            r.map_err(|e| super::region_error(&s.tr, e))?;
            twins.push(Twin::take(&s.tr));
        }
        Ok(twins)
    }

    /// Before a checkpoint collects: the open section's words since its last save are
    /// diffed now and kept for its next save (the checkpoint's collect takes their pages),
    /// and the pages sections collected go back to the regions for the checkpoint to store.
    /// Regions protected or unprotected since the section started are left to its next
    /// save, which refuses them.
    pub(super) fn sections_before_checkpoint(
        &self,
        st: &mut State,
    ) -> Result<(), crate::error::RegionError> {
        let page_size = self.page_size_u32();
        let sections = &mut st.sections;
        if let Some(live) = sections.open.as_mut().and_then(|o| o.live.as_mut()) {
            let diffed = Self::collect_delta(
                &self.tracker,
                &st.regions,
                live,
                &mut sections.owed,
                page_size,
            )
            .map(|(d, _, _)| d);
            match diffed {
                Ok(d) => live.unsaved = Some(d),
                Err(SectionError::Region(e)) => {
                    Self::pay_owed(st);
                    return Err(e);
                }
                Err(_) => {}
            }
        }
        Self::pay_owed(st);
        Ok(())
    }

    /// Give the pages sections collected back to their regions.
    fn pay_owed(st: &mut State) {
        for (id, bits) in std::mem::take(&mut st.sections.owed) {
            if let Some(s) = st.regions.get(&id) {
                give_back(&s.tr, &bits);
            }
        }
    }

    /// The words each region changed since its twin, the twins brought up to date; the
    /// pages collected are given back to the next checkpoint.
    fn collect_delta(
        tracker: &std::sync::Arc<dyn crate::track::Tracker>,
        regions: &BTreeMap<u64, super::RegionSlot>,
        live: &mut Live,
        owed: &mut BTreeMap<u64, Vec<u64>>,
        page_size: u32,
    ) -> Result<(DeltaFile, u64, u64), SectionError> {
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
            let r = tracker.collect(&s.tr, Guard::Rearm, &mut bits, &mut |_| {
                s.tr.monitor_every_piece()
            });
            tracker.release(&s.tr, Guard::Rearm);
            owe(owed, s.tr.id, &bits);
            if let Err(e) = r {
                // The regions diffed so far moved their twins on: their words wait in
                // `unsaved` for the next save.
                let rest = regions.values().skip(out.len()).map(|s| RegionDelta {
                    id: s.tr.id,
                    length: s.tr.user_len as u64,
                    words: Vec::new(),
                });
                out.extend(rest);
                let partial = DeltaFile {
                    page_size,
                    saves: 1,
                    regions: out,
                };
                live.unsaved = Some(match live.unsaved.take() {
                    Some(u) => merge_saves(&u, &partial)?,
                    None => partial,
                });
                return Err(super::region_error(&s.tr, e).into());
            }
            let (w, p) = twin.diff(&s.tr, &bits);
            pages += p;
            out.push(RegionDelta {
                id: s.tr.id,
                length: s.tr.user_len as u64,
                words: w,
            });
        }
        let fresh = DeltaFile {
            page_size,
            saves: 1,
            regions: out,
        };
        // Words a failed save, or a checkpoint inside the section, diffed before: this
        // delta holds them too.
        let d = match live.unsaved.take() {
            Some(u) => merge_saves(&u, &fresh)?,
            None => fresh,
        };
        let words = d.regions.iter().map(|r| r.words.len() as u64).sum();
        Ok((d, words, pages))
    }
}

/// Record `bits` as pages region `id`'s next checkpoint must store.
fn owe(owed: &mut BTreeMap<u64, Vec<u64>>, id: u64, bits: &[u64]) {
    let o = owed.entry(id).or_default();
    if o.len() < bits.len() {
        o.resize(bits.len(), 0);
    }
    for (a, b) in o.iter_mut().zip(bits) {
        *a |= b;
    }
}

/// A failed save's words, then the next save's, as one save.
fn merge_saves(a: &DeltaFile, b: &DeltaFile) -> Result<DeltaFile, SectionError> {
    let mut m = a
        .merge(b)
        .map_err(|e| SectionError::Regions(e.to_string()))?;
    m.saves = 1;
    Ok(m)
}
