//! Helpers the `ickpt` command's tests share.
#![allow(dead_code)]

use serde_json::Value;
use std::process::{Command, Output};

#[path = "../../../core/tests/common/scratch.rs"]
mod scratch_dirs;
pub use scratch_dirs::Scratch;
#[path = "../../../core/tests/common/other_user.rs"]
mod other;
#[allow(unused_imports)]
pub use other::{as_other, as_other_ok, other_user};

pub fn scratch(name: &str) -> Scratch {
    scratch_dirs::scratch_dir(&format!("cli-{name}"))
}

/// Run the `ickpt` binary built with these tests.
pub fn ickpt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ickpt"))
        .args(args)
        .output()
        .unwrap()
}

/// The command's stdout as JSON, which must parse.
pub fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// stdout then stderr, for messages and assertion failures.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Run the `ickpt` binary without `ICKPT_DIR` in its environment.
pub fn ickpt_no_dir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ickpt"))
        .args(args)
        .env_remove("ICKPT_DIR")
        .output()
        .unwrap()
}
