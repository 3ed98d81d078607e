//! Whole-store verification: every version's metadata and page checksums, and every chain,
//! through the same checks a restore makes (`catalog`), one file open at a time.

use crate::error::ReadError;
use crate::read::catalog::Catalog;
use crate::store::Store;

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
    /// Versions a restore accepts (every page read and checked).
    pub restorable: Vec<u64>,
    pub bytes_checked: u64,
    pub problems: Vec<Problem>,
}

/// Check every version in `store`. `progress(bytes done, bytes total)` is called as data is
/// checked. Listing failures are errors; everything else is reported as a problem. A version
/// without problems restores with exactly the bytes checked here.
pub fn verify_store(
    store: &dyn Store,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Report, ReadError> {
    let catalog = Catalog::new(store)?;
    let surveyed = catalog.survey(Some(progress))?;
    let mut report = Report::default();
    for s in surveyed {
        // Pages checked: those of versions whose every page passed (a failed version stopped
        // at its first bad page, and the bytes planned for it were not all read).
        if let Some(m) = &s.summary {
            report.bytes_checked += m.footer.page_count * u64::from(m.header.page_size);
        }
        report.versions.push(s.version);
        match s.problem {
            None => report.restorable.push(s.version),
            Some(p) => report.problems.push(Problem {
                version: s.version,
                file: p.file,
                offset: p.offset,
                what: p.what,
            }),
        }
    }
    Ok(report)
}
