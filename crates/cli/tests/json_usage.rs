//! With `--json` anywhere on the line, a script reads every error as `{"error": ...}` on
//! stdout, the command line's own mistakes (a misspelt option or command) included.

use std::process::Command;

mod common;
use common::{ickpt_no_dir, json, text};

#[test]
fn usage_errors_come_as_json_on_stdout_with_json() {
    let cases: [(&[&str], &str); 4] = [
        (&["ls", "--dri", "X", "--json"], "--dri"),
        (&["--json", "lss"], "lss"),
        (&["restore", "--json", "--dir", "D"], "--region"),
        (&["verify", "--json", "--dir"], "--dir"),
    ];
    for (args, want) in cases {
        let out = ickpt_no_dir(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(out.stderr.is_empty(), "{args:?}: stderr {}", text(&out));
        let j = json(&out);
        let e = j["error"].as_str().unwrap();
        assert!(e.contains(want), "{args:?}: {e}");
        assert_eq!(j["usage"], true);
    }
}

#[test]
fn without_json_usage_errors_stay_text_on_stderr_and_help_is_help() {
    let out = Command::new(env!("CARGO_BIN_EXE_ickpt"))
        .args(["ls", "--dri", "X"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--dri"));
    // Help asked for with --json is still help, on stdout, exit 0.
    let out = Command::new(env!("CARGO_BIN_EXE_ickpt"))
        .args(["--json", "ls", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"));
}
