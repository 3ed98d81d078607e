//! Why a directory could not be opened as a store. Each message names the path and says
//! what to do.

use super::dir::LOCK;
use super::marker::MARKER;
use std::io;

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{path}: {source}")]
    Io {
        /// The directory, or the entry in it, that failed.
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("{dir} does not exist")]
    NoSuchDir { dir: String },
    #[error("{dir} is a file, not a directory: give ickpt a directory for its store")]
    NotADirectory { dir: String },
    #[error("{dir} is a symbolic link: ickpt never writes a store through a link; give it the directory itself ('readlink -f {dir}')")]
    Symlink { dir: String },
    #[error("{}", unsafe_dir(dir, *owner, *mode, *uid))]
    Unsafe {
        dir: String,
        owner: u32,
        mode: u32,
        /// The effective uid of this process.
        uid: u32,
    },
    #[error("{dir} is not writable ({source}): ickpt must create files there; choose a writable directory")]
    NotWritable {
        dir: String,
        #[source]
        source: io::Error,
    },
    #[error("{dir} is not an ickpt store (no '{MARKER}' file, and '{first}' in it is not ickpt's): to read a store, name its directory; a new store needs an empty or new directory")]
    NotAStore { dir: String, first: String },
    #[error("{dir} is not an ickpt store (no '{MARKER}' file)")]
    Missing { dir: String },
    #[error(
        "{path} {what}, not ickpt's marker file; remove it if this directory is an ickpt store"
    )]
    BadMarker { path: String, what: &'static str },
    #[error("{dir} is in use by another ickpt process of yours (it holds {dir}/{LOCK}); give each process its own directory")]
    Locked { dir: String },
    /// `ickpt prune` or `ickpt rm` on a store an application has open.
    #[error("{dir} is in use by a running application (it holds the store's lock): stop it before removing versions by hand; while it runs, its own retention (keep_chains, keep_versions, keep_within) collects")]
    InUse { dir: String },
}

fn unsafe_dir(dir: &str, owner: u32, mode: u32, uid: u32) -> String {
    let found = format!("owner uid {owner}, mode {mode:04o}");
    if owner != uid {
        format!(
            "{dir} belongs to uid {owner}, not to you (uid {uid}) ({found}): ickpt writes \
             checkpoints only into a directory of its own user; use a directory you own"
        )
    } else {
        format!(
            "{dir} is writable by group or others ({found}): another user could replace \
             checkpoints there; run 'chmod go-w {dir}', or use a directory only you can write"
        )
    }
}
