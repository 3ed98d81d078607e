//! `ickpt merge A B -o C`: two delta files of the same regions into one, word by word, the
//! later (B) winning (CAPE's merge); the library's `merge_files` writes C.

use crate::CmdResult;
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;

pub fn run(a: &Path, b: &Path, out: &Path, json: bool) -> CmdResult {
    for (input, which) in [(a, "first"), (b, "second")] {
        if same_file(input, out) {
            return Err(format!(
                "{}: the output is the {which} input, which the merge would replace: write it \
                 to a new file (and rename it over {} yourself if that is what you want)",
                out.display(),
                input.display()
            )
            .into());
        }
    }
    let m = ickpt::write::merge_files(a, b, out)?;
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

/// Whether the two paths name one file (the same path spelt otherwise, a hard link, or a link
/// to it); false when either does not exist.
fn same_file(x: &Path, y: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(x), std::fs::metadata(y)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}
