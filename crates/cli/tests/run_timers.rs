//! `ickpt run` / `ickpt restart` on a program with POSIX timers and named threads: a periodic
//! timer signalling the process, one signalling a named worker thread (`SIGEV_THREAD_ID`), a
//! disarmed one and a `SIGEV_NONE` one. After each restart the timers must tick again with
//! the ids the program holds, and each thread must have its name back; the program counts
//! steps, not time, so it must end with exactly the uninterrupted run's output.

mod common;
use common::run::{build_c, generations, Program};
use common::scratch;

#[test]
fn posix_timers_and_thread_names_survive_three_kills() {
    let tmp = scratch("timers");
    std::fs::create_dir_all(tmp.as_path()).unwrap();
    let exe = build_c("timers.c", &tmp);
    generations(&Program::new(exe, &["2000"]), &tmp, 3);
}
