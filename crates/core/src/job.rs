//! The directory of a coordinated job (`ickpt_mpi_init`, docs/mpi.md): rank r's store is
//! `rank-NNNNN` in it, and the job file `ickpt-job` records the number of ranks the stores
//! were made for, so that a restart with another number is refused. The file is written and
//! read here only: by the MPI layer (through `ickpt_job_prepare`) and by the `ickpt` command,
//! which shows a job's global versions.
//!
//! The job file is exactly `ickpt MPI job, format 1\nranks N\n`, N a decimal from 1 to
//! 2^31 - 1 (an MPI communicator's size is a C `int`), digits only: anything longer, shorter
//! or else is not a job file. The job's first run writes it once, whole, as
//! [`write_private`] writes (a new owner-only temporary, fsync, rename, the directory fsynced),
//! so a crash leaves either no job file or a complete one.

use crate::error::{FileError, JobError};
use crate::private_file::write_private;
use std::fs::{DirBuilder, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The job file's name in the job directory.
pub const JOB_FILE: &str = "ickpt-job";

/// What the job file holds before the number of ranks.
const HEADER: &str = "ickpt MPI job, format 1\nranks ";

/// The most ranks a job can have: an MPI communicator's size is a C `int`.
pub const MAX_RANKS: u32 = i32::MAX as u32;

/// More bytes than any job file has.
const MAX_LEN: u64 = 128;

/// Rank `rank`'s store in the job directory `dir`.
pub fn rank_dir(dir: &Path, rank: u32) -> PathBuf {
    dir.join(format!("rank-{rank:05}"))
}

/// The number of ranks the job directory `dir` records; None when it has no job file.
pub fn read_ranks(dir: &Path) -> Result<Option<u32>, JobError> {
    let file = dir.join(JOB_FILE);
    let shown = || file.display().to_string();
    let not_a_job_file = || JobError::NotAJobFile { file: shown() };
    // A link at its name is not a job file, whatever it points to.
    let mut f = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&file)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        // `dir` is a file: no job there, and opening it as a store says what it is.
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(not_a_job_file()),
        Err(e) => return Err(JobError::Unreadable(FileError::new(shown(), "open", e))),
    };
    let meta = f
        .metadata()
        .map_err(|e| JobError::Unreadable(FileError::new(shown(), "stat", e)))?;
    if !meta.is_file() || meta.len() > MAX_LEN {
        return Err(not_a_job_file());
    }
    let mut bytes = Vec::new();
    f.by_ref()
        .take(MAX_LEN + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| JobError::Unreadable(FileError::new(shown(), "read", e)))?;
    parse(&bytes).map(Some).ok_or_else(not_a_job_file)
}

/// The number of ranks in a job file's bytes, or None when they are not a job file.
fn parse(bytes: &[u8]) -> Option<u32> {
    let n = std::str::from_utf8(bytes)
        .ok()?
        .strip_prefix(HEADER)?
        .strip_suffix('\n')?;
    // u32's parse takes a leading '+': digits only here.
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse::<u32>()
        .ok()
        .filter(|r| (1..=MAX_RANKS).contains(r))
}

/// Make `dir` the directory of a job of `ranks` ranks: create it (owner-only) unless it
/// exists, then check that its job file records `ranks`, or write one that does. A
/// directory recording another number, a link or a file at `dir`, or a job file that is not
/// one is refused, with nothing written.
pub fn prepare(dir: &Path, ranks: u32) -> Result<(), JobError> {
    let shown = dir.display().to_string();
    if !(1..=MAX_RANKS).contains(&ranks) {
        return Err(JobError::Ranks { dir: shown, ranks });
    }
    match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(FileError::new(shown, "create the job directory", e).into()),
    }
    let is_dir = std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
    if !is_dir {
        return Err(JobError::NotADirectory { dir: shown });
    }
    match read_ranks(dir)? {
        None => Ok(write_private(
            &dir.join(JOB_FILE),
            format!("{HEADER}{ranks}\n").as_bytes(),
        )?),
        Some(recorded) if recorded == ranks => Ok(()),
        Some(recorded) => Err(JobError::OtherRanks {
            dir: shown,
            recorded,
            ranks,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn only_the_exact_text_is_a_job_file() {
        assert_eq!(parse(b"ickpt MPI job, format 1\nranks 4\n"), Some(4));
        assert_eq!(
            parse(b"ickpt MPI job, format 1\nranks 2147483647\n"),
            Some(i32::MAX as u32)
        );
        for bad in [
            &b"ickpt MPI job, format 1\nranks 4"[..],
            b"ickpt MPI job, format 1\nranks 4\n\n",
            b"ickpt MPI job, format 1\nranks 4\nmore\n",
            b"ickpt MPI job, format 1\nranks +4\n",
            b"ickpt MPI job, format 1\nranks -4\n",
            b"ickpt MPI job, format 1\nranks  4\n",
            b"ickpt MPI job, format 1\nranks 0\n",
            b"ickpt MPI job, format 1\nranks 2147483648\n",
            b"ickpt MPI job, format 1\nranks \n",
            b"ickpt MPI job, format 2\nranks 4\n",
            b"",
        ] {
            assert_eq!(parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
