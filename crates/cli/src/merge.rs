//! `ickpt merge A B -o C`: two delta files of the same regions into one, word by word, the
//! later (B) winning (paper 003's merge). C is written whole under a temporary name, owner-only
//! (it holds application memory), and renamed, so it never exists half written; it may be A
//! or B, and a symbolic link is refused rather than replaced.

use crate::CmdResult;
use ickpt::format::DeltaFile;
use serde_json::json;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::ExitCode;

pub fn run(a: &Path, b: &Path, out: &Path, json: bool) -> CmdResult {
    let read = ickpt::read::delta_file::read;
    let (da, db) = (read(a)?, read(b)?);
    let merged = da
        .merge(&db)
        .map_err(|e| format!("{} and {}: {e}", a.display(), b.display()))?;
    let bytes = merged.encode();
    if bytes.len() as u64 > ickpt::read::delta_file::MAX_DELTA_FILE {
        return Err(format!(
            "{}: the merged delta would be {} bytes, more than ickpt reads back",
            out.display(),
            bytes.len()
        )
        .into());
    }
    if std::fs::symlink_metadata(out).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(format!("{}: a symbolic link; name the file itself", out.display()).into());
    }
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
        // One a crash left behind under this process's number goes first (never followed:
        // unlink removes a link itself).
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, out)
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{}: {e}", out.display()).into());
    }
    if let Err(e) = std::fs::File::open(dir).and_then(|d| d.sync_all()) {
        return Err(format!(
            "{}: written, but syncing its directory failed ({e}): a crash now may lose it",
            out.display()
        )
        .into());
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
