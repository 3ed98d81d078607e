//! The directory of a coordinated job: `ickpt_job_prepare`.

use super::*;

/// Make `dir` the directory of a coordinated job of `ranks` processes (libickpt_mpi's rank 0
/// calls it from ickpt_mpi_init, with the communicator's size, before any rank opens its
/// store in it): create it, owner-only, unless it exists, then check that its job file
/// (`dir/ickpt-job`) records `ranks`, or write one that does, whole (a crash leaves no job
/// file or a complete one). Refused with nothing written: another number of ranks recorded
/// (ICKPT_ERR_INVALID_ARGUMENT, naming both), a link or a file at `dir`, or a job file that
/// is not one (ICKPT_ERR_NOT_A_STORE). Needs no ickpt_init.
#[no_mangle]
pub extern "C" fn ickpt_job_prepare(dir: *const c_char, ranks: i32) -> ickpt_result {
    guard(|| {
        let dir = c_path("dir", dir)?.ok_or(Error::Null { what: "dir" })?;
        let ranks = u32::try_from(ranks).map_err(|_| {
            SettingError::new("ranks", ranks.to_string(), "the job's number of processes")
        })?;
        crate::job::prepare(&dir, ranks)?;
        Ok(())
    })
}
