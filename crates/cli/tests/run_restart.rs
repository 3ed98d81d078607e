//! `ickpt run` / `ickpt checkpoint` / `ickpt restart` on unmodified C programs: each is
//! checkpointed, killed with SIGKILL at a random moment, restarted, killed and restarted
//! again, and must end with exactly the output of a run that was never interrupted; `ickpt
//! verify` passes on the store afterwards.

mod common;
use common::run::{build_c, generations, Program};
use common::scratch;

/// Build `tests/transparent/<name>.c` and run it through `kills` generations.
fn c_generations(name: &str, args: &[&str], kills: usize) {
    let tmp = scratch(&format!("run-{name}"));
    std::fs::create_dir_all(tmp.as_path()).unwrap();
    let exe = build_c(&format!("{name}.c"), &tmp);
    generations(&Program::new(exe, args), &tmp, kills);
}

#[test]
fn a_single_threaded_program_survives_three_kills() {
    c_generations("heat", &["300", "65536"], 3);
}

#[test]
fn sixteen_threads_survive_three_kills() {
    c_generations("threads", &["400"], 3);
}

/// Threads that own error-checking and recursive mutexes across a restart find them still
/// theirs: the restart gives back the process and thread ids.
#[test]
fn threads_keep_their_ids_and_their_mutexes_over_three_kills() {
    c_generations("ids", &["2000"], 3);
}
