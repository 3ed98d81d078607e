//! Global versions of a coordinated job (the hybrid full/incremental paper's coordinated
//! checkpoints of MPI ranks): the MPI layer records, in each rank's store, which local
//! version holds that rank's part of each global version, once every rank has committed it;
//! a restart agrees on the newest global version every rank recorded and discards what is
//! newer. The records are small immutable files (`docs/FORMAT.md`, "Global-commit
//! records"); a commit keeps the one it makes, the one before it and a pinned one
//! ([`Engine::global_pin`]), and garbage collection keeps what restoring any record present
//! reads.

use super::Engine;
use crate::error::{FileError, GlobalError, ReadError};
use crate::read::global_records::{record, record_numbers, records};
use crate::store::version_name;
use ickpt_format::{global_name, limits, GlobalRecord};

impl Engine {
    /// Record durably that global version `global` of the job is this store's `version`
    /// (which must be committed with an intact chain: the one this engine committed or
    /// restored last, or one whose chain passes the catalog's checks), and drop records
    /// older than the one before it. `global` must be above every number recorded so far.
    pub fn global_commit(&self, global: u64, version: u64) -> Result<(), GlobalError> {
        let mut st = self.lock_for_change()?;
        self.settle(&mut st);
        if global == 0 || global > limits::MAX_VERSION {
            return Err(GlobalError::BadNumber {
                global,
                max: limits::MAX_VERSION,
            });
        }
        let catalog = self.catalog();
        // Every record file counts here, intact or not: the new one's name must be free.
        let numbers = record_numbers(&*self.store)?;
        if let Some(&highest) = numbers.last().filter(|&&n| n >= global) {
            return Err(GlobalError::OutOfOrder {
                global,
                newest: highest,
                dir: self.store.describe(""),
            });
        }
        let previous = records(&catalog)?.last().map(|r| r.global);
        // The version this engine just committed (or restored) is known intact, with its
        // checksum: reading its chain back would cost a metadata read per version of it.
        let version_meta_crc = match st.head {
            Some(h) if h.version == version => h.meta_crc,
            _ => catalog.chain(version)?[0].meta.footer.meta_crc,
        };
        let record = GlobalRecord {
            global,
            version,
            version_meta_crc,
            store_id: self.id.0,
        };
        let name = global_name(global);
        let file_error = |op, e| FileError::new(self.store.describe(&name), op, e);
        let mut w = self
            .store
            .create(&name)
            .map_err(|e| file_error("create", e))?;
        w.write_all(&record.encode())
            .map_err(|e| file_error("write", e))?;
        w.commit().map_err(|e| file_error("commit", e))?;
        // Recorded. Every other record file but the previous intact one and those from the
        // pinned one on goes, damaged ones too; best effort, as garbage collection is: one
        // left behind is passed over, and a failure here must not report the record just
        // made as not made.
        let pinned = st.pinned_global;
        for n in numbers
            .into_iter()
            .filter(|&n| Some(n) != previous && (pinned == 0 || n < pinned))
        {
            let _ = self.store.remove(&global_name(n));
        }
        Ok(())
    }

    /// The newest global version recorded in this store whose record is intact and still
    /// names its version file as written; None when there is none.
    pub fn global_latest(&self) -> Result<Option<GlobalRecord>, ReadError> {
        Ok(records(&self.catalog())?.pop())
    }

    /// Keep the records of global version `global` and of every one after it, and what
    /// restoring their versions reads, on every tier, until another is pinned (0: none; then
    /// the newest two are kept). The MPI layer pins the newest global version every rank has
    /// drained to every lower tier: the records after it stay until each rank's drain has
    /// copied them (a slow drain would otherwise find them removed before it got to them, and
    /// never advance), so a job whose ranks' drains lag differently, restarted from the lower
    /// tiers after losing its nodes, finds a global version every rank holds there: the pinned
    /// one at worst. Only the engine's own record removals heed it: a record already gone is
    /// not brought back.
    pub fn global_pin(&self, global: u64) -> Result<(), GlobalError> {
        self.lock_for_change()?.pinned_global = global;
        Ok(())
    }

    /// The newest global version whose record is on every lower tier (so is what restoring
    /// it reads: the drain copies records after versions), as far as the drain knows; without
    /// lower tiers, the newest record. 0: none.
    pub fn drained_global(&self) -> Result<u64, ReadError> {
        Ok(match &self.drain {
            Some(d) => d.drained_global(),
            None => record_numbers(&*self.local)?.last().copied().unwrap_or(0),
        })
    }

    /// The newest global version not above `bound` whose record this store holds intact,
    /// naming its version file as written (a restart's agreement walks down with it).
    pub fn global_at_most(&self, bound: u64) -> Result<Option<GlobalRecord>, ReadError> {
        Ok(records(&self.catalog())?
            .into_iter()
            .rfind(|r| r.global <= bound))
    }

    /// The record of global version `global`, if this store holds it intact and its version
    /// file is the one it named.
    pub fn global_version(&self, global: u64) -> Result<Option<GlobalRecord>, ReadError> {
        record(&self.catalog(), global)
    }

    /// Delete every version newer than `version`, and first every global record naming one
    /// and every record file numbered above the newest record kept (damaged ones too, so the
    /// numbers are free for the job's next global versions); newest first, so a crash midway
    /// leaves a prefix of the versions and no record naming a deleted one. If the engine's
    /// next checkpoint was to increment a deleted version, it will be full. Returns the
    /// versions deleted, newest first.
    pub fn discard_newer(&self, version: u64) -> Result<Vec<u64>, GlobalError> {
        let mut st = self.lock_for_change()?;
        self.settle(&mut st);
        // First: whatever fails below, the next checkpoint must not increment a version
        // that may be gone.
        if st.head.is_some_and(|h| h.version > version) {
            st.head = None;
            st.previous = None;
        }
        let catalog = self.catalog();
        let intact = records(&catalog)?;
        let kept_max = intact
            .iter()
            .filter(|r| r.version <= version)
            .map(|r| r.global)
            .max()
            .unwrap_or(0);
        let names_newer = |g: u64| intact.iter().any(|r| r.global == g && r.version > version);
        let (doomed, left): (Vec<u64>, Vec<u64>) = record_numbers(&*self.store)?
            .into_iter()
            .partition(|&g| g > kept_max || names_newer(g));
        let drain = self.drain.as_ref().filter(|_| !doomed.is_empty());
        if let Some(d) = drain {
            d.discarded(&left);
        }
        for g in doomed.into_iter().rev() {
            super::gc::remove(&*self.store, &global_name(g))?;
        }
        if let Some(d) = drain {
            d.discarded(&left);
        }
        let mut doomed: Vec<u64> = catalog
            .versions()?
            .into_iter()
            .filter(|&v| v > version)
            .collect();
        doomed.reverse();
        for &v in &doomed {
            super::gc::remove(&*self.store, &version_name(v))?;
        }
        Ok(doomed)
    }
}
