//! `ickpt merge A B -o C`: two delta files of the same regions into one, word by word, the
//! later (B) winning (paper 003's merge). C is written whole under a temporary name and
//! renamed, so it never exists half written, and it may be A or B.

use crate::CmdResult;
use ickpt::format::DeltaFile;
use serde_json::json;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

pub fn run(a: &Path, b: &Path, out: &Path, json: bool) -> CmdResult {
    let read = ickpt::read::delta_file::read;
    let (da, db) = (read(a)?, read(b)?);
    let merged = da
        .merge(&db)
        .map_err(|e| format!("{} and {}: {e}", a.display(), b.display()))?;
    let bytes = merged.encode();
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = out
        .file_name()
        .ok_or_else(|| format!("{}: not a file name", out.display()))?;
    let tmp = dir.join(format!(
        ".tmp-{}.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, out)?;
        std::fs::File::open(dir)?.sync_all()
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{}: {e}", out.display()).into());
    }
    let words = |d: &DeltaFile| d.regions.iter().map(|r| r.words.len()).sum::<usize>();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "out": out, "bytes": bytes.len(), "regions": merged.regions.len(),
                "saves": merged.saves, "words": words(&merged),
                "inputs": [{"file": a, "words": words(&da)}, {"file": b, "words": words(&db)}],
            }))?
        );
    } else {
        println!(
            "{}: {} words of {} regions, {} bytes ({} + {} words merged, the later winning)",
            out.display(),
            words(&merged),
            merged.regions.len(),
            bytes.len(),
            words(&da),
            words(&db)
        );
    }
    Ok(ExitCode::SUCCESS)
}
