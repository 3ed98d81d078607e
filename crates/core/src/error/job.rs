//! A job directory of a coordinated job that cannot be used (`crate::job`).

use super::FileError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum JobError {
    /// Creating the job directory or writing its job file failed.
    #[error(transparent)]
    File(#[from] FileError),
    /// The job file is there but cannot be read.
    #[error("{0}; the job file cannot be read: give the job a directory of its own")]
    Unreadable(FileError),
    #[error("the job directory {dir} is not a directory (a link or a file is there); give the job a directory of its own")]
    NotADirectory { dir: String },
    #[error("{file} is not an ickpt job file (\"ickpt MPI job, format 1\" and the ranks): move it out of the job directory")]
    NotAJobFile { file: String },
    #[error("the job directory {dir} holds the checkpoints of a job of {recorded} ranks, this job has {ranks}: restart with {recorded} ranks, or give this job another directory")]
    OtherRanks {
        dir: String,
        recorded: u32,
        ranks: u32,
    },
    #[error("a job of {ranks} ranks in {dir}: a job has 1 to 2147483647 ranks")]
    Ranks { dir: String, ranks: u32 },
}
