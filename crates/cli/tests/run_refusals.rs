//! What `ickpt run`, its checkpoints and `ickpt restart` refuse, each with a message naming
//! what it refused, without hanging: a checkpoint while the program holds a socket, a pipe
//! between its threads, a child process, shared memory, a timer on a thread's CPU clock or a
//! thread blocking every signal (the program runs on unharmed, and the version before the refusal still restores); an MPI
//! rank and a statically linked program at `ickpt run`; a rebuilt executable and a program
//! still running at `ickpt restart`.

mod common;
use common::run::{
    assert_same, build_c, checkpoint_now, compile, reference, request_checkpoint,
    restart_expecting, verify, versions, Proc, Program,
};
use common::scratch;
use std::path::Path;

fn dir(name: &str) -> common::Scratch {
    let tmp = scratch(&format!("refuse-{name}"));
    std::fs::create_dir_all(tmp.as_path()).unwrap();
    tmp
}

/// The refusal program fed `script` on stdin, for its reference output.
fn scripted_reference(p: &Program, dir: &Path, script: &[&str]) -> common::run::Reference {
    let out = dir.join("reference.out");
    let mut proc = Proc::spawn(p.plain(&out), "the reference run");
    for line in script {
        proc.send(line);
    }
    let (code, stdout, stderr) = proc.finish();
    assert_eq!(code, 0, "the reference run failed: {stderr}");
    common::run::Reference {
        stdout,
        file: std::fs::read(&out).unwrap(),
    }
}

/// The refusal program holds `what` while a checkpoint is asked for: the checkpoint must be
/// refused with a message holding each of `named(held line)`, store nothing, and leave the
/// program unharmed; killed then, it restarts from the version before the refusal, takes
/// `what` again, gives it back, checkpoints again and ends as an uninterrupted run would.
fn refused_while_holding(what: &str, named: impl Fn(&str) -> Vec<String>) {
    let tmp = dir(what);
    let p = Program::new(build_c("refuse.c", &tmp), &[]);
    let hold = format!("hold {what}");
    let script = ["work", &hold, "release", "work", "finish"];
    let want = scripted_reference(&p, &tmp, &script);

    let store = tmp.join("store");
    let out = tmp.join("run.out");
    let mut proc = Proc::spawn(p.under_ickpt(&store, None, &out), "ickpt run");
    proc.expect("ready");
    proc.send("work");
    proc.expect("worked 1");
    let before = checkpoint_now(&store, &proc);
    proc.send(&hold);
    let held = proc.expect(&format!("held {what}"));
    request_checkpoint(&store);
    let message = proc.expect("ickpt run: checkpoint");
    for name in named(&held) {
        assert!(
            message.contains(&name),
            "the refusal does not name {name:?}: {message}"
        );
    }
    assert_eq!(
        versions(&store),
        vec![before],
        "a refused checkpoint stored a version"
    );
    proc.kill();
    verify(&store, "after the refusal");

    let mut proc = restart_expecting(&p, &store, before);
    proc.send(&hold);
    proc.expect(&format!("held {what}"));
    proc.send("release");
    proc.expect("released");
    proc.send("work");
    proc.expect("worked 2");
    let after = checkpoint_now(&store, &proc);
    assert!(after > before);
    proc.send("finish");
    assert_same(proc, &out, &want);
    verify(&store, "at the end");
}

/// The word after `key` in `line`.
fn after(line: &str, key: &str) -> String {
    line.split(key)
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no {key:?} in {line:?}"))
        .to_string()
}

#[test]
fn a_checkpoint_is_refused_while_a_socket_is_open() {
    refused_while_holding("socket", |held| {
        let fd = after(held, "fd ");
        vec![
            format!("descriptor {fd} is socket:["),
            "cannot reopen".into(),
        ]
    });
}

#[test]
fn a_checkpoint_is_refused_while_two_threads_share_a_pipe() {
    refused_while_holding("pipe", |held| {
        let fd = after(held, "fd ");
        vec![format!("descriptor {fd} is pipe:["), "cannot reopen".into()]
    });
}

#[test]
fn a_checkpoint_is_refused_while_a_child_process_lives() {
    refused_while_holding("child", |held| {
        let pid = after(held, "pid ");
        vec![format!("child process ({pid})")]
    });
}

#[test]
fn a_checkpoint_is_refused_while_memory_is_shared() {
    refused_while_holding("shared", |held| {
        let at = after(held, "at ");
        vec![format!("mapping 0x{at}-"), "shared memory".into()]
    });
}

#[test]
fn a_checkpoint_is_refused_while_a_timer_counts_a_threads_cpu_time() {
    refused_while_holding("cputimer", |held| {
        let id = after(held, "id ");
        vec![
            format!("POSIX timer {id} counts a thread's CPU time"),
            "cannot give back".into(),
        ]
    });
}

/// The checkpointing thread gives a thread 10 s to stop (STOP_LIMIT in
/// crates/run/src/checkpointer.rs), so this test takes that long.
#[test]
fn a_checkpoint_is_given_up_naming_a_thread_that_blocks_the_signal() {
    refused_while_holding("sigmask", |held| {
        let tid = after(held, "tid ");
        vec![
            format!("thread {tid} did not stop"),
            "nothing was stored".into(),
        ]
    });
}

#[test]
fn an_mpi_rank_is_refused_pointing_at_the_mpi_api() {
    let tmp = dir("mpi");
    let p =
        Program::new(build_c("heat.c", &tmp), &["100", "1024"]).env("OMPI_COMM_WORLD_RANK", "0");
    let store = tmp.join("store");
    let proc = Proc::spawn(
        p.under_ickpt(&store, None, &tmp.join("run.out")),
        "ickpt run",
    );
    let (code, stdout, stderr) = proc.finish();
    assert_ne!(code, 0, "an MPI rank ran under ickpt run: {stdout}");
    for name in ["OMPI_COMM_WORLD_RANK", "ickpt_mpi.h"] {
        assert!(
            stderr.contains(name),
            "the refusal does not name {name}: {stderr}"
        );
    }
    assert!(stdout.is_empty(), "the program ran: {stdout}");
    let left = std::fs::read_dir(&store).map_or(0, |d| d.count());
    assert_eq!(left, 0, "the refused run left something in its store");
}

#[test]
fn a_statically_linked_program_is_refused_by_name() {
    let tmp = dir("static");
    let exe = compile("cc", "heat.c", &tmp, &["-O1", "-static"]);
    let p = Program::new(exe.clone(), &["100", "1024"]);
    let proc = Proc::spawn(
        p.under_ickpt(&tmp.join("store"), None, &tmp.join("run.out")),
        "ickpt run",
    );
    let (code, stdout, stderr) = proc.finish();
    assert_ne!(code, 0, "a static program ran under ickpt run: {stdout}");
    assert!(
        stderr.contains(&format!("{} is statically linked", exe.display())),
        "{stderr}"
    );
    assert!(!tmp.join("run.out").exists(), "the program ran");
}

/// A switch of `ickpt run` set to something that is neither 0 nor 1 is refused, naming it,
/// before the program runs: a mistyped `off` must not leave the switch on without a word.
#[test]
fn a_switch_set_to_neither_0_nor_1_is_refused_by_name() {
    let tmp = dir("switch");
    let exe = build_c("heat.c", &tmp);
    for var in ["ICKPT_RUN_PRECOPY", "ICKPT_RUN_WHOLE_FENCE"] {
        let p = Program::new(exe.clone(), &["100", "1024"])
            .env("ICKPT_MODE", "async")
            .env(var, "off");
        let out = tmp.join(format!("{var}.out"));
        let proc = Proc::spawn(p.under_ickpt(&tmp.join(var), None, &out), "ickpt run");
        let (code, stdout, stderr) = proc.finish();
        assert_ne!(code, 0, "{var}=off was taken: {stdout}");
        assert!(
            stderr.contains(&format!("{var}=\"off\" is neither 0 nor 1")),
            "{stderr}"
        );
        assert!(!out.exists(), "the program ran with {var}=off");
    }
}

#[test]
fn a_restart_refuses_a_rebuilt_executable_by_name() {
    let tmp = dir("rebuilt");
    let exe = build_c("heat.c", &tmp);
    let p = Program::new(exe.clone(), &["3000", "65536"]);
    let store = tmp.join("store");
    let proc = Proc::spawn(
        p.under_ickpt(&store, None, &tmp.join("run.out")),
        "ickpt run",
    );
    checkpoint_now(&store, &proc);
    proc.kill();
    // The same source built again: another file at the same path.
    std::fs::remove_file(&exe).unwrap();
    assert_eq!(build_c("heat.c", &tmp), exe);
    let (code, stdout, stderr) = Proc::spawn(p.restart(&store), "ickpt restart").finish();
    assert_ne!(code, 0, "a restart over a rebuilt executable ran: {stdout}");
    assert!(
        stderr.contains(&exe.display().to_string())
            && stderr.contains("rebuilt or updated since the checkpoint"),
        "{stderr}"
    );
    assert!(stdout.is_empty(), "the program ran on: {stdout}");
}

#[test]
fn a_restart_is_refused_while_the_program_still_runs() {
    let tmp = dir("running");
    let p = Program::new(build_c("heat.c", &tmp), &["3000", "65536"]);
    let want = reference(&p, &tmp);
    let store = tmp.join("store");
    let out = tmp.join("run.out");
    let proc = Proc::spawn(p.under_ickpt(&store, None, &out), "ickpt run");
    let first = checkpoint_now(&store, &proc);
    let (code, stdout, stderr) = Proc::spawn(p.restart(&store), "ickpt restart").finish();
    assert_ne!(code, 0, "a second copy was restarted: {stdout}");
    assert!(
        stderr.contains("ickpt-lock") && stderr.contains("is the program still running"),
        "{stderr}"
    );
    // The running program is untouched: it checkpoints on and ends as it would have.
    assert!(checkpoint_now(&store, &proc) > first);
    assert_same(proc, &out, &want);
    verify(&store, "at the end");
}

/// `ickpt checkpoint` trusts `ickpt-run.pid` only as far as it checks it: a signal that is not
/// a real-time one, or a link planted at the file's name, is refused, and the process the
/// file names gets no signal.
#[test]
fn a_forged_pid_file_is_refused_and_signals_nobody() {
    let tmp = dir("pid-file");
    let store = tmp.as_path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let mut victim = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let pid_file = store.join("ickpt-run.pid");
    let ask = || {
        common::ickpt(&[
            "checkpoint",
            "--dir",
            store.to_str().unwrap(),
            "--timeout",
            "1s",
        ])
    };
    // SIGTERM (15): not the checkpoint signal of any ickpt run.
    std::fs::write(&pid_file, format!("{} 15\n", victim.id())).unwrap();
    let out = ask();
    assert!(!out.status.success());
    assert!(
        common::text(&out).contains("real-time signal"),
        "{}",
        common::text(&out)
    );
    std::fs::remove_file(&pid_file).unwrap();
    let elsewhere = tmp.as_path().join("elsewhere.pid");
    std::fs::write(&elsewhere, format!("{} 37\n", victim.id())).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &pid_file).unwrap();
    let out = ask();
    assert!(!out.status.success(), "{}", common::text(&out));
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the process named was signalled"
    );
    victim.kill().unwrap();
    victim.wait().unwrap();
}
