//! `ickpt run` / `ickpt checkpoint` / `ickpt restart` on unmodified C programs: each is
//! checkpointed, killed with SIGKILL at a random moment, restarted, killed and restarted
//! again, and must end with exactly the output of a run that was never interrupted; `ickpt
//! verify` passes on the store afterwards.

use rand::Rng;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{ickpt, scratch, text};

const BIN: &str = env!("CARGO_BIN_EXE_ickpt");
/// Every wait of these tests ends by this bound.
const LIMIT: Duration = Duration::from_secs(120);

/// Compile `tests/transparent/<name>.c` into `dir`.
fn build(name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/transparent/{name}.c"));
    let exe = dir.join(name);
    let out = Command::new("cc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("cc runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Wait for `child` to exit, at most LIMIT; its stdout.
fn finish(mut child: Child) -> (i32, String) {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut out = String::new();
            use std::io::Read;
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            return (status.code().unwrap_or(-1), out);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the program did not finish within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn checkpoint_now(store: &Path) -> String {
    let out = ickpt(&[
        "checkpoint",
        "--dir",
        store.to_str().unwrap(),
        "--wait",
        "--timeout",
        "60s",
    ]);
    assert!(
        out.status.success(),
        "ickpt checkpoint failed: {}",
        text(&out)
    );
    text(&out)
}

/// Run `exe out args` uninterrupted, then under ickpt with `kills` kills and restarts.
fn generations(name: &str, args: &[&str], kills: usize) {
    let tmp = scratch(&format!("run-{name}"));
    std::fs::create_dir_all(tmp.as_path()).unwrap();
    let exe = build(name, tmp.as_path());
    let reference = tmp.as_path().join("reference.out");
    let plain = Command::new(&exe)
        .arg(&reference)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, expected_stdout) = finish(plain);
    assert_eq!(code, 0);
    let expected = std::fs::read(&reference).unwrap();

    let store = tmp.as_path().join("store");
    let output = tmp.as_path().join("run.out");
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--dir",
            store.to_str().unwrap(),
            "--interval",
            "200ms",
            "--",
        ])
        .arg(&exe)
        .arg(&output)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut rng = rand::thread_rng();
    for generation in 0..kills {
        checkpoint_now(&store);
        // Let it run on a little past the checkpoint (or not at all), then kill it.
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..150)));
        child.kill().unwrap();
        child.wait().unwrap();
        let verify = ickpt(&["verify", "--dir", store.to_str().unwrap()]);
        assert!(
            verify.status.success(),
            "generation {generation}: {}",
            text(&verify)
        );
        child = Command::new(BIN)
            .args(["restart", "--dir", store.to_str().unwrap()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
    }
    let (code, stdout) = finish(child);
    assert_eq!(code, 0, "the restarted program failed; stdout: {stdout}");
    assert_eq!(stdout, expected_stdout);
    assert_eq!(
        std::fs::read(&output).unwrap(),
        expected,
        "the program's output file differs"
    );
    let verify = ickpt(&["verify", "--dir", store.to_str().unwrap()]);
    assert!(verify.status.success(), "{}", text(&verify));
}

#[test]
fn a_single_threaded_program_survives_three_kills() {
    generations("heat", &["300", "65536"], 3);
}

#[test]
fn sixteen_threads_survive_three_kills() {
    generations("threads", &["400"], 3);
}
