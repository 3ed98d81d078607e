//! Whole-store verification: every version's metadata and page checksums, and that every
//! version's chain reaches a full version.

use crate::catalog;
use crate::error::Error;
use crate::store::{version_name, Store};
use ickpt_format::{verify_data, Kind};
use std::collections::HashMap;

/// One thing wrong with a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub version: u64,
    /// The file the problem is in, or the file that is missing.
    pub file: String,
    pub offset: Option<u64>,
    pub what: String,
}

/// What `verify_store` found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub versions: Vec<u64>,
    pub bytes_checked: u64,
    pub problems: Vec<Problem>,
}

/// Check every version in `store`. `progress(bytes done, bytes total)` is called as data is
/// checked. Listing failures are errors; everything else is reported as a problem.
pub fn verify_store(
    store: &dyn Store,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Report, Error> {
    let versions = catalog::versions(store)?;
    let mut report = Report {
        versions: versions.clone(),
        ..Report::default()
    };
    let mut opened = Vec::new();
    for &v in &versions {
        match catalog::open(store, v) {
            Ok(ov) => opened.push(ov),
            Err(e) => report.problems.push(problem(store, v, &e)),
        }
    }
    let total: u64 = opened.iter().map(|o| o.meta.data_bytes()).sum();
    let mut done_before = 0u64;
    let mut good: HashMap<u64, (Kind, u64)> = HashMap::new();
    for ov in &opened {
        let r = verify_data(&ov.meta, &*ov.file, &mut |d, _| {
            progress(done_before + d, total)
        });
        done_before += ov.meta.data_bytes();
        match r {
            Ok(()) => {
                good.insert(ov.version, (ov.kind(), ov.meta.header.parent));
            }
            Err(e) => report.problems.push(Problem {
                version: ov.version,
                file: store.describe(&version_name(ov.version)),
                offset: e.offset(),
                what: e.to_string(),
            }),
        }
    }
    report.bytes_checked = total;
    for ov in &opened {
        let mut v = ov.version;
        while let Some(&(kind, parent)) = good.get(&v) {
            if kind == Kind::Full {
                break;
            }
            if !good.contains_key(&parent) {
                let why = if versions.contains(&parent) {
                    "is damaged"
                } else {
                    "is missing"
                };
                report.problems.push(Problem {
                    version: ov.version,
                    file: store.describe(&version_name(parent)),
                    offset: None,
                    what: format!(
                        "chain broken: version {} needs version {parent}, which {why}",
                        ov.version
                    ),
                });
                break;
            }
            v = parent;
        }
    }
    report.problems.sort_by_key(|p| p.version);
    Ok(report)
}

fn problem(store: &dyn Store, v: u64, e: &Error) -> Problem {
    let offset = match e {
        Error::Corrupt { source, .. } => source.offset(),
        _ => None,
    };
    Problem {
        version: v,
        file: store.describe(&version_name(v)),
        offset,
        what: e.to_string(),
    }
}
