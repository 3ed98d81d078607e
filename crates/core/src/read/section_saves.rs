//! Section saves in a store (docs/FORMAT.md, "Section saves in a store"): one file per name a
//! section saved under, its name carrying the section, the save that first used the name and
//! how many saves the file holds. The store never replaces a file, so a merge writes the file
//! under its new count and then removes the old one (`write/section_save.rs`); a crash between
//! leaves both, and the larger count wins.

use crate::error::{FileError, InjectError, SectionError};
use crate::read::delta_file::read_whole;
use crate::store::Store;
use ickpt_format::{DeltaFile, FormatError};
use std::collections::BTreeMap;

/// The longest save name.
pub const MAX_NAME: usize = 64;

/// One saved file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// The section (0 for the process's first `start`).
    pub section: u64,
    /// The save, counted from 1 within the section, that first used this name.
    pub seq: u64,
    /// Saves merged into the file.
    pub saves: u64,
    pub name: String,
}

impl Saved {
    pub fn object(&self) -> String {
        format!(
            "s{:08}.{:08}.{:08}.{}.section",
            self.section, self.seq, self.saves, self.name
        )
    }

    /// The file `object` names, if it is one of these (only the spelling `object` gives).
    pub fn parse(object: &str) -> Option<Saved> {
        let rest = object.strip_prefix('s')?.strip_suffix(".section")?;
        let mut parts = rest.splitn(4, '.');
        let mut num = || -> Option<u64> {
            let p = parts.next()?;
            (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse().ok())
                .flatten()
        };
        let (section, seq, saves) = (num()?, num()?, num()?);
        let name = parts.next()?.to_string();
        let s = Saved {
            section,
            seq,
            saves,
            name,
        };
        (seq >= 1 && saves >= 1 && check_name(&s.name).is_ok() && s.object() == object).then_some(s)
    }
}

/// Why `name` cannot name a save: file names are built from it, in a directory others may
/// look into, so only a plain word is taken.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("must be 1 to {MAX_NAME} characters"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(format!(
            "{c:?} is not allowed: use letters, digits, '_' and '-'"
        ));
    }
    Ok(())
}

/// The saves `store` holds, by section, each section's in the order they were made, and the
/// files a crash left behind under an older count (which the next save or start removes).
pub type Survey = (BTreeMap<u64, Vec<Saved>>, Vec<Saved>);

/// What `store` holds of section saves, changing nothing (`ickpt sections`).
pub fn survey(store: &dyn Store) -> Result<Survey, SectionError> {
    let names = store
        .list()
        .map_err(|e| FileError::new(store.describe(""), "listing section saves", e))?;
    let mut newest: BTreeMap<(u64, u64), Saved> = BTreeMap::new();
    let mut stale = Vec::new();
    for s in names.iter().filter_map(|n| Saved::parse(n)) {
        match newest.get(&(s.section, s.seq)) {
            Some(old) if old.saves >= s.saves => stale.push(s),
            _ => {
                if let Some(old) = newest.insert((s.section, s.seq), s) {
                    stale.push(old);
                }
            }
        }
    }
    let mut out: BTreeMap<u64, Vec<Saved>> = BTreeMap::new();
    for ((section, _), s) in newest {
        out.entry(section).or_default().push(s);
    }
    Ok((out, stale))
}

/// [`survey`], the stale files removed (best effort: a failure only leaves them for next
/// time). The engine's, which holds the store's lock.
pub(crate) fn list(store: &dyn Store) -> Result<BTreeMap<u64, Vec<Saved>>, SectionError> {
    let (out, stale) = survey(store)?;
    for s in stale {
        let _ = store.remove(&s.object());
    }
    Ok(out)
}

/// The delta `s` holds, read whole and checked, its count matching its name's.
pub fn load(store: &dyn Store, s: &Saved) -> Result<DeltaFile, SectionError> {
    let object = s.object();
    let file = store.describe(&object);
    let io = |op, e| SectionError::File(FileError::new(&file, op, e));
    let f = store.open(&object).map_err(|e| io("open", e))?;
    let d = read_whole(&file, f.len(), &|buf| f.read_exact_at(buf, 0)).map_err(|e| match e {
        InjectError::Corrupt { file, source } => SectionError::Corrupt { file, source },
        InjectError::File(e) => SectionError::File(e),
        other => SectionError::Inject(other),
    })?;
    if d.saves != s.saves {
        return Err(SectionError::Corrupt {
            file,
            source: FormatError::Corrupt {
                offset: 0,
                what: format!("holds {} saves where its name says {}", d.saves, s.saves),
            },
        });
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_only_their_own_spelling_parses() {
        let s = Saved {
            section: 3,
            seq: 2,
            saves: 50,
            name: "markov_V-2".into(),
        };
        assert_eq!(s.object(), "s00000003.00000002.00000050.markov_V-2.section");
        assert_eq!(Saved::parse(&s.object()), Some(s));
        for bad in [
            "s3.00000002.00000050.x.section",
            "s00000003.00000000.00000050.x.section",
            "s00000003.00000001.00000000.x.section",
            "s00000003.00000001.00000001..section",
            "s00000003.00000001.00000001.a.b.section",
            "s00000003.00000001.00000001.x.ickpt",
            "v00000001.ickpt",
        ] {
            assert_eq!(Saved::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn names_are_plain_words() {
        assert!(check_name("loop-2_x").is_ok());
        for bad in ["", "a/b", "..", "a.b", "a b", &"x".repeat(65), "é"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
