//! `ickpt run` / `ickpt checkpoint` / `ickpt restart` on unmodified C programs: each is
//! checkpointed, killed with SIGKILL at a random moment, restarted, killed and restarted
//! again, and must end with exactly the output of a run that was never interrupted; `ickpt
//! verify` passes on the store afterwards.

mod common;
use common::run::{build_c, checkpoint_now, generations, restart_expecting, verify, Proc, Program};
use common::scratch;

/// Build `tests/transparent/<name>.c` and run it through `kills` generations, with `env`.
fn c_generations_with(name: &str, args: &[&str], kills: usize, env: &[(&str, &str)]) {
    let tag = env.iter().map(|(_, v)| format!("-{v}")).collect::<String>();
    let tmp = scratch(&format!("run-{name}{tag}"));
    std::fs::create_dir_all(tmp.as_path()).unwrap();
    let exe = build_c(&format!("{name}.c"), &tmp);
    let p = env
        .iter()
        .fold(Program::new(exe, args), |p, (k, v)| p.env(k, v));
    generations(&p, &tmp, kills);
}

fn c_generations(name: &str, args: &[&str], kills: usize) {
    c_generations_with(name, args, kills, &[]);
}

/// Async commits: the pages written are copied before each stop and the stop fences only
/// those written since, so the program's writes during the commit meet a fence on some
/// pages and none on the rest.
#[test]
fn a_single_threaded_program_survives_three_kills_in_async_mode() {
    c_generations_with("heat", &["300", "65536"], 3, &[("ICKPT_MODE", "async")]);
}

#[test]
fn sixteen_threads_survive_three_kills_in_async_mode() {
    c_generations_with("threads", &["400"], 3, &[("ICKPT_MODE", "async")]);
}

/// Async without the copy before the stop (`ICKPT_RUN_PRECOPY=0`): the stop fences what it
/// collected, every page the program wrote since the last version.
#[test]
fn a_single_threaded_program_survives_three_kills_in_async_mode_without_precopy() {
    let env = [("ICKPT_MODE", "async"), ("ICKPT_RUN_PRECOPY", "0")];
    c_generations_with("heat", &["300", "65536"], 3, &env);
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

/// Wait until `file` holds exactly `want`.
fn wait_for_file(file: &std::path::Path, want: &str) {
    let deadline = std::time::Instant::now() + common::run::LIMIT;
    while std::fs::read_to_string(file).unwrap_or_default() != want {
        assert!(
            std::time::Instant::now() < deadline,
            "{} never held {want:?}",
            file.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// After a restart ickpt takes its record buffer as written only up to the restored record's
/// length: a record shorter than that one must still clear the rest, or the next version's
/// record would end in the old one's tail and a restart would pass over it.
#[test]
fn a_record_that_shrinks_after_a_restart_restores() {
    let tmp = scratch("run-shrink");
    std::fs::create_dir_all(tmp.as_path()).unwrap();
    let exe = build_c("shrink.c", &tmp);
    let go = tmp.join("go");
    let out = tmp.join("run.out");
    let store = tmp.join("store");
    let p = Program::new(exe, &[go.to_str().unwrap()]);
    let proc = Proc::spawn(p.under_ickpt(&store, None, &out), "ickpt run");
    wait_for_file(&out, "mapped\n");
    let many = checkpoint_now(&store, &proc);
    proc.kill();
    let proc = restart_expecting(&p, &store, many);
    std::fs::write(&go, "").unwrap();
    wait_for_file(&out, "mapped\nunmapped\n");
    let few = checkpoint_now(&store, &proc);
    proc.kill();
    let proc = restart_expecting(&p, &store, few);
    std::fs::remove_file(&go).unwrap();
    let (code, _, stderr) = proc.finish();
    assert_eq!(code, 0, "the restarted program failed: {stderr}");
    wait_for_file(&out, "mapped\nunmapped\ndone\n");
    verify(&store, "at the end");
}
