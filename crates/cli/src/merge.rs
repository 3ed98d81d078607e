//! `ickpt merge A B -o C`: two delta files of the same regions into one, word by word, the
//! later (B) winning (paper 003's merge); the library's `merge_files` writes C.

use crate::CmdResult;
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;

pub fn run(a: &Path, b: &Path, out: &Path, json: bool) -> CmdResult {
    let m = ickpt::read::delta_file::merge_files(a, b, out)?;
    let words: u64 = m.delta.regions.iter().map(|r| r.words.len() as u64).sum();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "out": out, "bytes": m.bytes, "regions": m.delta.regions.len(),
                "saves": m.delta.saves, "words": words,
                "inputs": [{"file": a, "words": m.inputs[0]}, {"file": b, "words": m.inputs[1]}],
            }))?
        );
    } else {
        println!(
            "{}: {words} words of {} regions, {} bytes ({} + {} words merged, the later winning)",
            out.display(),
            m.delta.regions.len(),
            m.bytes,
            m.inputs[0],
            m.inputs[1]
        );
    }
    Ok(ExitCode::SUCCESS)
}
