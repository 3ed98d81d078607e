//! `ickpt run` / `ickpt restart` need no privilege (docs/transparent.md): the heat, threads,
//! ids and timers programs run, are killed and restarted as an ordinary user (`ickpt-other`, made
//! by the tests), on a store that user owns, and end as an uninterrupted run does.

mod common;
use common::run::{build_c, generations, Program};
use common::{other_user, scratch};
use std::os::unix::fs::MetadataExt;

fn as_other_user(name: &str, args: &[&str], env: &[(&str, &str)]) {
    let (uid, gid) = other_user();
    let tmp = scratch(&format!("unprivileged-{name}"));
    std::fs::create_dir_all(tmp.as_path()).unwrap();
    // The program (built by root, mode 0755) is read there; the store and outputs are the
    // user's own.
    std::os::unix::fs::chown(tmp.as_path(), Some(uid), Some(gid)).unwrap();
    let mut p = Program::new(build_c(&format!("{name}.c"), &tmp), args);
    for (k, v) in env {
        p = p.env(k, v);
    }
    p.wrap = [
        "setpriv",
        &format!("--reuid={uid}"),
        &format!("--regid={gid}"),
        "--clear-groups",
    ]
    .iter()
    .map(Into::into)
    .collect();
    generations(&p, &tmp, 2);
    for made in ["store", "run.out", "store/ickpt-run.pid"] {
        let owner = std::fs::metadata(tmp.join(made)).unwrap().uid();
        assert_eq!(
            owner, uid,
            "{made} was not made by the unprivileged program"
        );
    }
}

#[test]
fn a_single_threaded_program_restarts_as_an_ordinary_user() {
    as_other_user("heat", &["300", "65536"], &[]);
}

#[test]
fn sixteen_threads_restart_as_an_ordinary_user() {
    as_other_user("threads", &["400"], &[]);
}

/// An ordinary user's restart chooses the threads' ids in the user namespace it makes, also
/// when `ickpt restart` has to run itself again (forced here), which an exec would otherwise
/// take the capability for away.
#[test]
fn thread_ids_come_back_as_an_ordinary_user() {
    as_other_user("ids", &["2000"], &[("ICKPT_RESTART_REEXEC", "1")]);
}

/// POSIX timers come back with their ids (`PR_TIMER_CREATE_RESTORE_IDS` needs no privilege),
/// and threads with their names.
#[test]
fn timers_and_thread_names_come_back_as_an_ordinary_user() {
    as_other_user("timers", &["2000"], &[]);
}
