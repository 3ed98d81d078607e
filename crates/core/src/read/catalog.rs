//! What a store holds: its versions, their checked metadata and their chains.
//!
//! This is the one acceptance check for a version. A version is **restorable** when its own
//! file passes [`Catalog::open`] (metadata checksums and rules, the number in its name, the
//! store it belongs to) and every link of its chain down to a full version passes
//! [`check_link`], and every page its reverse scan reads passes its checksum as it is read.
//! Restore, `verify` (which walks each version's chain and its reverse scan's plan through
//! these, `read/verify.rs`), `ls`, the newest-restorable search and garbage collection all
//! decide through these functions, so "verify OK" means a restore succeeds with these bytes.

use crate::error::{FileError, ReadError};

type Result<T, E = ReadError> = std::result::Result<T, E>;
use crate::store::{parse_version_name, version_name, Store, StoreFile, StoreId};
use ickpt_format::{
    read_meta, CommitStats, Footer, FormatError, Header, Kind, RegionEntry, VersionMeta,
};
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

/// A version opened for reading, with its metadata checked.
pub struct OpenVersion {
    pub version: u64,
    /// Open from [`Catalog::open`]; closed in a [`Catalog::chain`], so that a chain of any
    /// length holds no descriptors: a restore opens each file as it scans it.
    file: Option<Box<dyn StoreFile>>,
    pub meta: VersionMeta,
}

impl OpenVersion {
    pub fn kind(&self) -> Kind {
        self.meta.header.kind
    }

    /// The file, while it is held open.
    pub fn file(&self) -> Option<&dyn StoreFile> {
        self.file.as_deref()
    }

    /// Close the file, keeping the checked metadata ([`Catalog::reopen`] opens it again).
    pub fn close(&mut self) {
        self.file = None;
    }

    /// Its size, as its footer says and as checked against the file.
    pub fn bytes(&self) -> u64 {
        self.meta.footer.file_length
    }

    /// What the chain checks need of it.
    pub fn summary(&self) -> Summary {
        Summary {
            header: self.meta.header.clone(),
            regions: self.meta.regions.clone(),
            footer: self.meta.footer.clone(),
            stats: self.meta.stats,
        }
    }
}

/// A version's metadata without its index and page checksums: what the chain checks and
/// listings need, small enough to keep for every version of a store while its files are
/// closed.
#[derive(Debug, Clone)]
pub struct Summary {
    pub header: Header,
    pub regions: Vec<RegionEntry>,
    pub footer: Footer,
    pub stats: Option<CommitStats>,
}

impl Summary {
    pub fn version(&self) -> u64 {
        self.header.version
    }
}

/// Committed version numbers, ascending: the names of the store's version files, whatever
/// their content. Other names in the store are ignored.
pub fn versions(store: &dyn Store) -> Result<Vec<u64>> {
    let names = store
        .list()
        .map_err(|e| ReadError::io(store.describe(""), "listing", e))?;
    let mut v: Vec<u64> = names.iter().filter_map(|n| parse_version_name(n)).collect();
    v.sort_unstable();
    Ok(v)
}

/// The identity a store's versions carry when the store has none recorded (a marker lost or
/// written before format 3): the one most of its format-3 files carry, the newest among
/// equals. Only headers are read. None when no file carries one.
pub fn infer_identity(store: &dyn Store) -> Result<Option<StoreId>> {
    let mut count: HashMap<[u8; 16], (usize, u64)> = HashMap::new();
    for v in versions(store)? {
        if let Some(Header {
            store_id: Some(id), ..
        }) = read_header(store, v)
        {
            let e = count.entry(id).or_default();
            e.0 += 1;
            e.1 = e.1.max(v);
        }
    }
    Ok(count
        .into_iter()
        .max_by_key(|&(_, rank)| rank)
        .map(|(id, _)| StoreId(id)))
}

/// Version `v`'s header alone, or None when it cannot be read or decoded (what only looks
/// at headers skips such a file; opening it checked says what is wrong).
fn read_header(store: &dyn Store, v: u64) -> Option<Header> {
    let file = store.open(&version_name(v)).ok()?;
    let mut b = [0u8; ickpt_format::HEADER_LEN];
    if file.len() < b.len() as u64 || file.read_exact_at(&mut b, 0).is_err() {
        return None;
    }
    Header::decode(&b).ok()
}

/// A store seen through its identity.
pub struct Catalog<'a> {
    store: &'a dyn Store,
    id: Option<StoreId>,
    /// The number of the store's first format-3 version of its own, once looked for.
    bound_from: OnceLock<Option<u64>>,
}

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

impl<'a> Catalog<'a> {
    /// The store with its recorded identity, or the one its files carry when none is
    /// recorded (nothing is written).
    pub fn new(store: &'a dyn Store) -> Result<Self> {
        let id = match store
            .identity()
            .map_err(|e| ReadError::io(store.describe(""), "reading the store's identity", e))?
        {
            Some(id) => Some(id),
            None => infer_identity(store)?,
        };
        Ok(Self::with_identity(store, id))
    }

    /// The store, taking `id` as its identity (a writer that has just settled it).
    pub fn with_identity(store: &'a dyn Store, id: Option<StoreId>) -> Self {
        Catalog {
            store,
            id,
            bound_from: OnceLock::new(),
        }
    }

    /// The lowest-numbered version that carries this store's identity: from there on the
    /// store binds its files, so no file without binding (formats 1 and 2, which an older
    /// ickpt wrote before the store was upgraded) can come after it. Only headers are read,
    /// and only until the first such file.
    fn binding_began(&self) -> Option<u64> {
        let own = self.id?;
        *self.bound_from.get_or_init(|| {
            versions(self.store)
                .ok()?
                .into_iter()
                .find(|&v| read_header(self.store, v).is_some_and(|h| h.store_id == Some(own.0)))
        })
    }

    /// Open the file of a version checked before (in a chain), to read its pages: it must
    /// still be the size the checked metadata says (its pages are checked as they are read).
    pub fn reopen(&self, ov: &OpenVersion) -> Result<Box<dyn StoreFile>> {
        let name = version_name(ov.version);
        let file = self
            .store
            .open(&name)
            .map_err(|e| ReadError::io(self.store.describe(&name), "open", e))?;
        if file.len() != ov.bytes() {
            return Err(ReadError::format(
                self.store.describe(&name),
                FormatError::Corrupt {
                    offset: 0,
                    what: format!(
                        "changed while it was being restored ({} bytes, checked at {})",
                        file.len(),
                        ov.bytes()
                    ),
                },
            ));
        }
        Ok(file)
    }

    pub fn store(&self) -> &'a dyn Store {
        self.store
    }

    pub fn identity(&self) -> Option<StoreId> {
        self.id
    }

    pub fn versions(&self) -> Result<Vec<u64>> {
        versions(self.store)
    }

    fn describe(&self, v: u64) -> String {
        self.store.describe(&version_name(v))
    }

    /// Open `version` and check its own file: metadata, the number in its name, and that it
    /// belongs to this store (not yet its page data, nor its chain).
    pub fn open(&self, version: u64) -> Result<OpenVersion> {
        let name = version_name(version);
        let file = self.store.open(&name).map_err(|e| {
            // Listed but not there to open (a dangling link, or removed meanwhile): name it.
            let listed = || self.versions().is_ok_and(|v| v.contains(&version));
            if e.kind() == std::io::ErrorKind::NotFound && !listed() {
                ReadError::NotFound {
                    version,
                    dir: self.store.describe(""),
                    available: self.available(),
                }
            } else {
                ReadError::io(self.store.describe(&name), "open", e)
            }
        })?;
        let corrupt = |source| ReadError::format(self.store.describe(&name), source);
        let meta = read_meta(&*file, file.len()).map_err(corrupt)?;
        if meta.header.version != version {
            return Err(corrupt(FormatError::Corrupt {
                offset: 16,
                what: format!("file holds version {}, not {version}", meta.header.version),
            }));
        }
        match (meta.header.store_id, self.id) {
            (Some(found), Some(own)) if found != own.0 => {
                return Err(ReadError::Foreign {
                    file: self.store.describe(&name),
                    found: StoreId(found),
                    own,
                });
            }
            (None, _) => match self.binding_began() {
                Some(first) if version > first => {
                    return Err(corrupt(FormatError::Corrupt {
                        offset: 8,
                        what: format!(
                            "a format-{} file numbered after version {first}, where this store \
                             began binding its files to it (format 3): no ickpt wrote it here \
                             after that, so it is not taken as part of this store",
                            meta.header.format_version
                        ),
                    }))
                }
                _ => {}
            },
            _ => {}
        }
        Ok(OpenVersion {
            version,
            file: Some(file),
            meta,
        })
    }

    /// "versions 1-9, 12" or "none", for messages about a version that is not there.
    pub fn available(&self) -> String {
        match self.versions() {
            Ok(v) => describe_versions(&v),
            Err(_) => "unknown (the store cannot be listed)".into(),
        }
    }

    /// The chain restoring `version` needs, newest first: itself, its parent, … back to its
    /// full version, each file and each link checked.
    pub fn chain(&self, version: u64) -> Result<Vec<OpenVersion>> {
        let mut out: Vec<OpenVersion> = Vec::new();
        let mut next = version;
        loop {
            let v = self.open(next).map_err(|e| match (e, out.last()) {
                (ReadError::NotFound { .. }, Some(child)) => ReadError::ChainBroken {
                    version,
                    missing: child.meta.header.parent,
                    dir: self.store.describe(""),
                },
                // Not damage: every version of a chain this long would fail alike.
                (ReadError::File(FileError::Io { source, .. }), _)
                    if matches!(source.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) =>
                {
                    ReadError::OutOfFiles {
                        version,
                        open: out.len(),
                    }
                }
                (e, _) => e,
            })?;
            if let Some(child) = out.last() {
                check_link(&child.summary(), &v.summary(), &|v| self.describe(v))?;
            }
            let parent = v.meta.header.parent;
            // Closed until a restore reads it: a chain holds no descriptors.
            out.push(OpenVersion { file: None, ..v });
            if parent == 0 {
                return Ok(out);
            }
            next = parent;
        }
    }

    /// The newest version whose file and chain pass their checks (page data is checked as a
    /// restore reads it). None when no version does. An error that is not about what a file
    /// holds (the store cannot be read at all) is returned, not taken for a damaged version.
    pub fn newest_restorable(&self) -> Result<Option<u64>> {
        for v in self.versions()?.into_iter().rev() {
            match self.chain(v) {
                Ok(_) => return Ok(Some(v)),
                Err(e) if e.is_damage() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

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

/// The rules between a version and its parent. With the parent's own rules and, in turn,
/// its parent's, they make every page of every region of `child` stored in the chain, in
/// the same layout, by versions written one after the other into this store:
/// - the parent is the file the child was written after (format 3: its `meta_crc`), so a
///   stale or foreign file given the parent's number is refused;
/// - depths follow, page sizes agree, no older format follows a newer one (it could not be
///   bound to its parent);
/// - each region the parent already held (born at or before it) is there with the same
///   incarnation and shape; each region born after the parent is born in the child, which
///   the child's own rules make it store whole.
pub fn check_link(
    child: &Summary,
    parent: &Summary,
    describe: &dyn Fn(u64) -> String,
) -> Result<()> {
    let (c, p) = (&child.header, &parent.header);
    let bad = |offset: u64, what: String| ReadError::Corrupt {
        file: describe(c.version),
        source: FormatError::Corrupt { offset, what },
    };
    debug_assert_eq!(c.parent, p.version);
    if c.chain_depth != p.chain_depth + 1 {
        return Err(bad(
            32,
            format!("chain depth does not follow its parent {}", p.version),
        ));
    }
    if c.page_size != p.page_size {
        return Err(bad(
            12,
            format!(
                "page size {} differs from its parent {}'s ({})",
                c.page_size, p.version, p.page_size
            ),
        ));
    }
    // Binding began with format 3; a format-3 increment of a format-4 parent (a store taken
    // back to an older ickpt) is bound as well.
    if c.format_version < 3 && p.format_version >= 3 {
        return Err(bad(
            8,
            format!(
                "format {} version after its parent {} in format {}: an older writer cannot \
                 be bound to its parent, so this file is not taken as part of the chain",
                c.format_version, p.version, p.format_version
            ),
        ));
    }
    if c.format_version >= 3 && c.parent_meta_crc != parent.footer.meta_crc {
        return Err(bad(
            80,
            format!(
                "its parent {} is not the file it was written after (parent checksum {:08x}, \
                 the file there has {:08x}): that file comes from another run or store",
                describe(p.version),
                c.parent_meta_crc,
                parent.footer.meta_crc
            ),
        ));
    }
    let in_parent: HashMap<u64, &RegionEntry> = parent.regions.iter().map(|r| (r.id, r)).collect();
    for r in &child.regions {
        if r.born > p.version {
            if r.born != c.version {
                return Err(bad(
                    0,
                    format!(
                        "region {} was born in version {}, which is not in its chain",
                        r.id, r.born
                    ),
                ));
            }
            continue;
        }
        match in_parent.get(&r.id).copied() {
            Some(o) if o == r => {}
            Some(o) => {
                return Err(bad(
                    0,
                    format!(
                        "region {} changes within one incarnation: {} bytes at page offset {} \
                         born {} here, {} bytes at {} born {} in its parent {}",
                        r.id,
                        r.length,
                        r.page_offset,
                        r.born,
                        o.length,
                        o.page_offset,
                        o.born,
                        p.version
                    ),
                ))
            }
            None => {
                return Err(bad(
                    0,
                    format!(
                        "region {} (born in version {}) is missing from its parent {}",
                        r.id, r.born, p.version
                    ),
                ))
            }
        }
    }
    Ok(())
}

/// "1-9, 12" for a sorted list of versions; "none" when empty.
pub fn describe_versions(v: &[u64]) -> String {
    if v.is_empty() {
        return "none".into();
    }
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if j == i {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::describe_versions;

    #[test]
    fn version_lists_are_compressed_into_ranges() {
        assert_eq!(describe_versions(&[]), "none");
        assert_eq!(describe_versions(&[4]), "4");
        assert_eq!(describe_versions(&[1, 2, 3, 5, 7, 8]), "1-3, 5, 7-8");
    }
}
