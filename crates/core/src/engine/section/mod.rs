//! Program sections (CAPE, Table I): only what a program changes between
//! `section_start` and `section_stop` is tracked, and each `section_save` stores the words
//! changed since the previous save (or the start) in the store, merged into the file of the
//! same name. A run that finds saves in its store recovers: the program re-runs its cheap
//! prefix, each `section_start` injects that section's saves and says how many there were,
//! and after the last saved section the run checkpoints again.

mod diff;
mod twins;

pub use crate::read::section_saves::MAX_NAME;

use super::{Engine, State};
use crate::error::SectionError;
use crate::read::delta_file::MAX_DELTA_FILE;
use crate::read::section_saves::{self as saved, Saved};
use diff::merge_saves;
use ickpt_format::DeltaFile;
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

impl Sections {
    /// The open section's number, if one is open.
    pub(crate) fn open_index(&self) -> Option<u64> {
        self.open.as_ref().map(|o| o.index)
    }
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
    /// Words the next save holds beyond its own diff: what a failed save, a take, a
    /// checkpoint inside the section or an inject found or wrote since the last save (each
    /// moved the twins on).
    pending: Option<DeltaFile>,
    /// Saves that failed since the last that succeeded: the next one counts them too, so a
    /// restart resumes after as many saves as the program made.
    failed: u64,
}

impl Live {
    /// Add `d` (of the twins' regions) to what the next save holds.
    fn keep(&mut self, d: DeltaFile) -> Result<(), SectionError> {
        self.pending = Some(match self.pending.take() {
            Some(p) => merge_saves(&p, &d)?,
            None => d,
        });
        Ok(())
    }
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
        let deltas = files
            .iter()
            .map(|f| saved::load(&*self.local, f))
            .collect::<Result<Vec<_>, _>>()?;
        // No section is open yet: the words are the program's state, not this section's.
        Self::inject_locked(&mut st, &deltas)?;
        let resume = files
            .iter()
            .try_fold(0u64, |a, f| a.checked_add(f.saves))
            .ok_or_else(|| SectionError::Corrupt {
                file: self.local.describe(""),
                source: ickpt_format::FormatError::Corrupt {
                    offset: 0,
                    what: format!("section {index}'s save counts add up past 2^64"),
                },
            })?;
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
                pending: None,
                failed: 0,
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
        let (fresh, pages) = Self::collect_delta(
            &self.tracker,
            &st.regions,
            live,
            &mut st.sections.owed,
            page_size,
        )?;
        let mut delta = match live.pending.take() {
            Some(p) => merge_saves(&p, &fresh)?,
            None => fresh,
        };
        let words = delta.regions.iter().map(|r| r.words.len() as u64).sum();
        // This save and those that failed before it.
        delta.saves = live.failed + 1;
        let merge_into = live.current.as_ref().filter(|(s, _)| s.name == name);
        let written = (|| {
            let (file, old) = match merge_into {
                Some((s, d)) => (
                    d.merge(&delta)
                        .map_err(|e| SectionError::Regions(e.to_string()))?,
                    Some(s.clone()),
                ),
                None => (delta.clone(), None),
            };
            let bytes = file.encoded_len();
            if bytes > MAX_DELTA_FILE {
                return Err(SectionError::TooLarge {
                    name: name.into(),
                    bytes,
                });
            }
            let obj = Saved {
                section: index,
                seq: match &old {
                    Some(o) => o.seq,
                    None => saves.checked_add(1).ok_or_else(|| {
                        order(format!("section {index} holds 2^64 saves: no more"))
                    })?,
                },
                saves: file.saves,
                name: name.into(),
            };
            let n = crate::write::section_save(&*self.local, &obj, &file, old.as_ref())?;
            Ok((obj, file, n))
        })();
        let (obj, file, file_bytes) = match written {
            Ok(w) => w,
            Err(e) => {
                // Kept for the next save, which counts this one too.
                delta.saves = 1;
                live.pending = Some(delta);
                live.failed += 1;
                return Err(e);
            }
        };
        let counted = delta.saves;
        live.failed = 0;
        if let Some((prev, _)) = live.current.take().filter(|(s, _)| s.name != name) {
            live.earlier.push(prev.name);
        }
        live.current = Some((obj.clone(), file));
        let o = st.sections.open.as_mut().expect("checked");
        o.saves = o.saves.saturating_add(counted);
        let m = st.sections.saved.get_or_insert_with(BTreeMap::new);
        let files = m.entry(index).or_default();
        files.retain(|f| f.seq != obj.seq);
        files.push(obj.clone());
        Ok(SectionSave {
            saves: obj.saves,
            words,
            pages,
            delta_bytes: delta.encoded_len(),
            file_bytes,
        })
    }

    /// The words changed since the previous save or take (or the start), as a delta of
    /// every protected region, kept in memory rather than stored: what CAPE's parallel loop
    /// sends to the other ranks. The next save still holds them.
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
        let (d, pages) = Self::collect_delta(
            &self.tracker,
            &st.regions,
            live,
            &mut sections.owed,
            page_size,
        )?;
        live.keep(d.clone())?;
        let info = SectionSave {
            saves: 0,
            words: d.regions.iter().map(|r| r.words.len() as u64).sum(),
            pages,
            delta_bytes: d.encoded_len(),
            file_bytes: 0,
        };
        Ok((d, info))
    }

    /// Whether the open section only replays (`SectionStart::recovering`); None outside a
    /// section.
    pub fn section_replaying(&self) -> Option<bool> {
        let st = self.lock();
        st.sections.open.as_ref().map(|o| o.live.is_none())
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
                .disarm(&s.tr)
                .map_err(|e| super::region_error(&s.tr, e))?;
        }
        Ok(())
    }

    /// Remove every section save from the store, so the program's sections run afresh.
    /// Only before the process's first `section_start`: sections are numbered from there.
    pub fn section_reset(&self) -> Result<(), SectionError> {
        let mut st = self.lock_for_change()?;
        if st.sections.started > 0 {
            return Err(order(format!(
                "{} section(s) started already: ickpt_section_reset comes before the first ickpt_section_start",
                st.sections.started
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
}
