//! The job file of a coordinated job (`ickpt::job`, which the MPI layer writes through
//! `ickpt_job_prepare` and the `ickpt` command reads): written whole and owner-only by the
//! first run, accepted by a run of as many ranks, refused with nothing written otherwise.

use ickpt::job::{prepare, rank_dir, read_ranks, JOB_FILE};
use ickpt::JobError;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

fn fresh(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ickpt-job-file-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn the_first_run_writes_it_and_later_runs_check_it() {
    let root = fresh("first");
    std::fs::create_dir_all(&root).unwrap();
    let job = root.join("job");
    assert_eq!(read_ranks(&job).unwrap(), None);
    prepare(&job, 4).unwrap();
    let mode = std::fs::metadata(&job).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "the job directory is owner-only");
    let file = job.join(JOB_FILE);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "ickpt MPI job, format 1\nranks 4\n"
    );
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // Nothing but the job file: no temporary left behind.
    let names: Vec<_> = std::fs::read_dir(&job)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, [JOB_FILE]);
    assert_eq!(read_ranks(&job).unwrap(), Some(4));
    prepare(&job, 4).unwrap();
    match prepare(&job, 2) {
        Err(e @ JobError::OtherRanks { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("a job of 4 ranks, this job has 2"), "{msg}");
        }
        other => panic!("another number of ranks: {other:?}"),
    }
    assert_eq!(read_ranks(&job).unwrap(), Some(4), "nothing was rewritten");
    assert_eq!(rank_dir(&job, 7), job.join("rank-00007"));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn what_is_not_a_job_file_is_refused() {
    let job = fresh("bad");
    std::fs::create_dir_all(&job).unwrap();
    let file = job.join(JOB_FILE);
    for text in [
        "ickpt MPI job, format 1\nranks 2\nmore\n",
        "ickpt MPI job, format 1\nranks +2\n",
        "ickpt MPI job, format 1\nranks 0\n",
        "",
    ] {
        std::fs::write(&file, text).unwrap();
        for e in [read_ranks(&job).unwrap_err(), prepare(&job, 2).unwrap_err()] {
            assert!(matches!(e, JobError::NotAJobFile { .. }), "{text:?}: {e:?}");
            assert!(e.to_string().contains("is not an ickpt job file"), "{e}");
        }
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            text,
            "left as it was"
        );
    }
    // A link, even to a valid job file, is not one.
    std::fs::remove_file(&file).unwrap();
    let real = job.join("real");
    std::fs::write(&real, "ickpt MPI job, format 1\nranks 2\n").unwrap();
    std::os::unix::fs::symlink(&real, &file).unwrap();
    assert!(matches!(
        read_ranks(&job),
        Err(JobError::NotAJobFile { .. })
    ));
    std::fs::remove_dir_all(&job).unwrap();
}

#[test]
fn a_job_directory_must_be_a_directory() {
    let root = fresh("notdir");
    std::fs::create_dir_all(&root).unwrap();
    let file = root.join("file");
    std::fs::write(&file, "x").unwrap();
    assert!(matches!(
        prepare(&file, 2),
        Err(JobError::NotADirectory { .. })
    ));
    // Read through a file, it is no job (the store's own open says what the path is).
    assert_eq!(read_ranks(&file).unwrap(), None);
    let link = root.join("link");
    std::os::unix::fs::symlink(&root, &link).unwrap();
    assert!(matches!(
        prepare(&link, 2),
        Err(JobError::NotADirectory { .. })
    ));
    assert!(matches!(
        prepare(&root.join("zero"), 0),
        Err(JobError::Ranks { .. })
    ));
    assert!(!root.join("zero").exists(), "nothing made for 0 ranks");
    std::fs::remove_dir_all(&root).unwrap();
}
