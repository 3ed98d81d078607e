//! A simulated disk for crash-consistency tests, in the manner of redb's: it keeps what is
//! *live* (what the running program sees) apart from what is *durable* (what would survive
//! a power cut). File data is durable once the file is fsynced; a directory entry created,
//! renamed, linked or removed is durable once the directory is fsynced. Cutting the power
//! fails every operation from a chosen one on, and [`CrashFs::after_power_loss`] gives the
//! disk as a power loss could leave it: unsynced data lost or torn (a prefix kept, the rest
//! missing or garbage), each unsynced directory change lost or kept, chosen from a seed.
//!
//! It holds one directory, which exists durably once created. Names hold regular files only.
//!
//! Here: the disk's state and its handle. Beside it: cutting the power and what a power loss
//! leaves (`power_loss.rs`), and the directory and file operations a store makes
//! (`dir.rs`, `file.rs`).

mod dir;
mod file;
mod power_loss;

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

/// Ways the simulated disk departs from a correct local file system.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CrashOptions {
    /// A file's fsync does nothing (shows a test catches a store that omits it).
    pub skip_file_sync: bool,
    /// The directory's fsync does nothing.
    pub skip_dir_sync: bool,
    /// `RENAME_NOREPLACE` fails with EINVAL, as on FUSE and NFS.
    pub no_rename_noreplace: bool,
    /// Hard links fail with EPERM, as on file systems without them.
    pub no_link: bool,
}

#[derive(Clone)]
pub struct CrashFs {
    state: Arc<Mutex<State>>,
}

struct Inode {
    live: Vec<u8>,
    durable: Vec<u8>,
}

/// A directory change not yet made durable, with the file it names.
enum Change {
    Create { name: String, ino: u64 },
    Rename { from: String, to: String, ino: u64 },
    Link { to: String, ino: u64 },
    Unlink { name: String, ino: u64 },
}

struct State {
    opts: CrashOptions,
    exists: bool,
    live: BTreeMap<String, u64>,
    durable: BTreeMap<String, u64>,
    pending: Vec<Change>,
    inodes: HashMap<u64, Inode>,
    next_ino: u64,
    /// Changing operations done (creates, writes, fsyncs, renames, links, unlinks).
    ops: u64,
    /// The operation at which the power fails: it and all after it fail with EIO.
    cut_at: Option<u64>,
    locked: bool,
    noreplace_refused: u64,
}

fn err(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

impl State {
    fn powered(&self) -> io::Result<()> {
        match self.cut_at {
            Some(c) if self.ops >= c => Err(err(libc::EIO)),
            _ => Ok(()),
        }
    }

    /// Count a changing operation, or fail it if the power is off.
    fn op(&mut self) -> io::Result<()> {
        self.powered()?;
        self.ops += 1;
        Ok(())
    }

    fn ino(&self, name: &str) -> io::Result<u64> {
        self.live
            .get(name)
            .copied()
            .ok_or_else(|| err(libc::ENOENT))
    }

    fn inode(&mut self, ino: u64) -> &mut Inode {
        self.inodes.get_mut(&ino).expect("inodes are never dropped")
    }
}

impl CrashFs {
    pub fn new(opts: CrashOptions) -> Self {
        CrashFs {
            state: Arc::new(Mutex::new(State {
                opts,
                exists: false,
                live: BTreeMap::new(),
                durable: BTreeMap::new(),
                pending: Vec::new(),
                inodes: HashMap::new(),
                next_ino: 1,
                ops: 0,
                cut_at: None,
                locked: false,
                noreplace_refused: 0,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Times `RENAME_NOREPLACE` was refused (with [`CrashOptions::no_rename_noreplace`]).
    pub fn noreplace_refusals(&self) -> u64 {
        self.lock().noreplace_refused
    }

    /// Names in the directory, as the running program sees them.
    pub fn names(&self) -> Vec<String> {
        self.lock().live.keys().cloned().collect()
    }
}
