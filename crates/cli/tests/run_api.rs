//! A program written for the C API, run under `ickpt run`: its own `ickpt_checkpoint()`
//! checkpoints the whole process, it is killed at a random moment and restarted three times,
//! ends with the uninterrupted run's output, and after each restart `ickpt_restarted` says
//! how many restarts brought it back.

use rand::Rng;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{ickpt, json, scratch};

const BIN: &str = env!("CARGO_BIN_EXE_ickpt");
const LIMIT: Duration = Duration::from_secs(120);

/// The directory of the ickpt binary, where cargo put libickpt.so too.
fn target_dir() -> PathBuf {
    Path::new(BIN).parent().unwrap().to_path_buf()
}

fn build(dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let exe = dir.join("api_loop");
    // cargo's libickpt.so, under the name its SONAME asks for (make install makes the link).
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    let built = target_dir().join("libickpt.so");
    assert!(
        built.is_file(),
        "{} is missing: make build-testing builds it",
        built.display()
    );
    let _ = std::fs::remove_file(lib.join("libickpt.so.0"));
    std::os::unix::fs::symlink(&built, lib.join("libickpt.so.0")).unwrap();
    std::os::unix::fs::symlink(&built, lib.join("libickpt.so")).unwrap();
    let out = Command::new("cc")
        .arg("-O1")
        .arg("-I")
        .arg(root.join("include"))
        .arg(root.join("crates/cli/tests/transparent/api_loop.c"))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lickpt")
        .output()
        .expect("cc runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The newest version in the store, 0 before the first. Not a count of versions: the store
/// keeps two chains, and once the restart bound makes every version full (a small program,
/// mostly ickpt's own state) the count stops growing.
fn newest(store: &Path) -> u64 {
    let out = ickpt(&["ls", "--json", "--dir", store.to_str().unwrap()]);
    if !out.status.success() {
        return 0;
    }
    json(&out)["versions"]
        .as_array()
        .and_then(|v| v.iter().filter_map(|v| v["version"].as_u64()).max())
        .unwrap_or(0)
}

/// Wait until the store holds a version newer than `n` (the program checkpoints itself).
fn wait_for_version_after(store: &Path, n: u64) {
    let deadline = Instant::now() + LIMIT;
    while newest(store) <= n {
        assert!(Instant::now() < deadline, "no new version within {LIMIT:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn finish(mut child: std::process::Child) -> (i32, String, String) {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            use std::io::Read;
            let (mut out, mut err) = (String::new(), String::new());
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code().unwrap_or(-1), out, err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the program did not finish within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_programs_own_checkpoints_restart_and_say_so() {
    let tmp = scratch("run-api");
    std::fs::create_dir_all(tmp.as_path()).unwrap();
    let exe = build(tmp.as_path());
    let reference = tmp.as_path().join("reference.out");
    // Without ickpt run the program checkpoints its buffer through the API, into a store of
    // its own.
    let plain = Command::new(&exe)
        .env("ICKPT_DIR", tmp.as_path().join("plain-store"))
        .arg(&reference)
        .arg("200")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, expected_stdout, err) = finish(plain);
    assert_eq!(code, 0, "{err}");
    let store = tmp.as_path().join("store");
    let output = tmp.as_path().join("run.out");
    let spawn = |args: &[&std::ffi::OsStr]| {
        Command::new(BIN)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut child = spawn(&[
        "run".as_ref(),
        "--dir".as_ref(),
        store.as_os_str(),
        "--".as_ref(),
        exe.as_os_str(),
        output.as_os_str(),
        "200".as_ref(),
    ]);
    let mut rng = rand::thread_rng();
    for _ in 0..3 {
        wait_for_version_after(&store, newest(&store));
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..30)));
        child.kill().unwrap();
        child.wait().unwrap();
        child = spawn(&["restart".as_ref(), "--dir".as_ref(), store.as_os_str()]);
    }
    let (code, stdout, stderr) = finish(child);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, expected_stdout);
    assert!(stderr.contains("restarted 3 at step"), "{stderr}");
    assert_eq!(
        std::fs::read(&output).unwrap(),
        std::fs::read(&reference).unwrap()
    );
}
