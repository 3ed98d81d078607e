//! The whole store judged at once, by metadata and links: each version restorable or not
//! and why ([`Catalog::survey`]), and the orphans among them.

use super::{check_link, Catalog, Result, Summary};
use crate::error::ReadError;
use std::collections::{HashMap, HashSet};

/// What is wrong with one version: its own file, or a link of its chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file the problem is in, or the file that is missing.
    pub file: String,
    pub offset: Option<u64>,
    pub what: String,
}

impl Problem {
    fn of(e: &ReadError, file: String) -> Problem {
        let (file, offset) = match e {
            ReadError::Corrupt { file, source } => (file.clone(), source.offset()),
            ReadError::Foreign { file, .. } => (file.clone(), Some(64)),
            _ => (file, None),
        };
        Problem {
            file,
            offset,
            what: e.to_string(),
        }
    }
}

/// One version as [`Catalog::survey`] found it.
#[derive(Debug, Clone)]
pub struct Surveyed {
    pub version: u64,
    /// Size of its file; 0 when it could not be opened.
    pub bytes: u64,
    /// Its metadata, when its own file passed.
    pub summary: Option<Summary>,
    /// Why it cannot be restored: its own file, or its chain. None: restorable (as far as
    /// metadata goes; `verify` also reads every page).
    pub problem: Option<Problem>,
    /// The version its chain needs that is not in the store, when that is why it cannot be
    /// restored (its own file passed).
    pub missing: Option<u64>,
}

impl Surveyed {
    pub fn restorable(&self) -> bool {
        self.problem.is_none()
    }
}

impl Catalog<'_> {
    /// Every version with what is wrong with it, oldest first, by metadata and links alone
    /// (`verify` reads the pages too), reading one file at a time (a store of thousands of
    /// versions never holds more than one open). Versions a running writer removed (its
    /// garbage collection) while the survey ran are left out, not reported as missing.
    pub fn survey(&self) -> Result<Vec<Surveyed>> {
        let mut out = Vec::new();
        for v in self.versions()? {
            let (bytes, r) = match self.open(v) {
                Ok(ov) => (ov.bytes(), Ok(ov.summary())),
                Err(e) => (0, Err(Problem::of(&e, self.describe(v)))),
            };
            out.push(Surveyed {
                version: v,
                bytes,
                summary: r.as_ref().ok().cloned(),
                problem: r.err(),
                missing: None,
            });
        }
        self.check_chains(&mut out);
        if out.iter().any(|s| !s.restorable()) {
            // A writer's garbage collection may have removed versions since the listing
            // (newest of a chain first, so no kept version loses its parent): a version
            // gone now is no longer part of the store, not damage.
            // A store that cannot be listed again keeps the survey as it was.
            if let Ok(now) = self.versions() {
                let now: HashSet<u64> = now.into_iter().collect();
                let listed = out.len();
                out.retain(|s| now.contains(&s.version));
                if out.len() != listed {
                    self.check_chains(&mut out);
                }
            }
        }
        Ok(out)
    }

    /// A version whose own file passed is restorable when its parent is and the link
    /// between them passes. Parents are older, so one ascending pass settles every chain.
    fn check_chains(&self, out: &mut [Surveyed]) {
        let index: HashMap<u64, usize> = out
            .iter()
            .enumerate()
            .map(|(i, s)| (s.version, i))
            .collect();
        for i in 0..out.len() {
            let Some(child) = &out[i].summary else {
                continue;
            };
            let parent = child.header.parent;
            if parent == 0 {
                continue;
            }
            out[i].missing = match index.get(&parent).map(|&p| &out[p]) {
                None => Some(parent),
                Some(p) => p.missing,
            };
            let problem = match index.get(&parent).map(|&p| &out[p]) {
                None => Some(Problem {
                    file: self.describe(parent),
                    offset: None,
                    what: format!(
                        "chain broken: version {} needs version {parent}, which is missing",
                        out[i].version
                    ),
                }),
                Some(p) if !p.restorable() => Some(Problem {
                    file: self.describe(parent),
                    offset: None,
                    what: format!(
                        "chain broken: version {} needs version {parent}, which {}",
                        out[i].version,
                        if p.summary.is_some() {
                            "cannot be restored itself"
                        } else {
                            "is damaged"
                        }
                    ),
                }),
                Some(p) => {
                    let ps = p
                        .summary
                        .as_ref()
                        .expect("a restorable version has metadata");
                    check_link(child, ps, &|v| self.describe(v))
                        .err()
                        .map(|e| Problem::of(&e, self.describe(out[i].version)))
                }
            };
            out[i].problem = problem;
        }
    }
}

/// The orphans among `surveyed` (a [`Catalog::survey`]): versions whose own file passes but
/// whose chain reaches a version missing from the store, older than a version that passes.
/// No restore can use them and none will ever complete them (a writer never leaves a hole
/// in a chain; a crashed server that lost a version, or a hand, does). Judged by metadata
/// and links; `verify` reports the same kind by the pages a restore reads too. Oldest first.
pub fn orphans(surveyed: &[Surveyed]) -> Vec<u64> {
    let newest = surveyed
        .iter()
        .rev()
        .find(|s| s.restorable())
        .map_or(0, |s| s.version);
    surveyed
        .iter()
        .filter(|s| s.version < newest && s.summary.is_some() && s.missing.is_some())
        .map(|s| s.version)
        .collect()
}
