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
/// The harness of the `ickpt run` tests.
pub mod run;

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

/// Page size and pages of the region [`four_versions`] writes.
pub const PS: usize = 4096;
pub const PAGES: usize = 16;

/// Versions 1 (full), 2 (pages 2, 3), 3 (page 5), 4 (pages 2, 9) of region 1 in the store
/// `cfg` opens, drained to its lower tiers; region 1's bytes at each.
pub fn four_versions(cfg: ickpt::Config) -> Vec<Vec<u8>> {
    let e = ickpt::Engine::open(cfg).unwrap();
    let p = e.alloc(1, PAGES * PS).unwrap();
    // SAFETY: alloc returned PAGES*PS bytes, live while `e` lives.
    let mem = unsafe { std::slice::from_raw_parts_mut(p, PAGES * PS) };
    let mut snaps = Vec::new();
    for (i, pages) in [vec![], vec![2usize, 3], vec![5], vec![2, 9]]
        .iter()
        .enumerate()
    {
        if i == 0 {
            mem.iter_mut().enumerate().for_each(|(k, b)| *b = k as u8);
        }
        for &pg in pages {
            mem[pg * PS..(pg + 1) * PS].fill(0x10 * i as u8 + pg as u8);
        }
        e.checkpoint().unwrap();
        snaps.push(mem.to_vec());
    }
    e.wait_drained().unwrap();
    snaps
}

/// Flip a bit of the byte at `at` of the file.
pub fn flip(path: &std::path::Path, at: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= 0x40;
    std::fs::write(path, b).unwrap();
}

/// Run the `ickpt` binary without `ICKPT_DIR` in its environment.
pub fn ickpt_no_dir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ickpt"))
        .args(args)
        .env_remove("ICKPT_DIR")
        .output()
        .unwrap()
}
