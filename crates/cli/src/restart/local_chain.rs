//! A restart from the bucket on a node whose local store lost the versions: the restored
//! chain is copied into the local store first. The restarted program's engine opens only its
//! local (and shared) tier, and the base of its next increment must be there for its
//! collection and its own restores to read.

use ickpt::store::{version_name, DirStore, Store};
use std::path::Path;

/// Bytes a copy moves per read and write.
const CHUNK: usize = 4 << 20;

/// Copy each of `chain`'s version files that the store `dir` lacks from `from` (the tiers);
/// how many were copied.
pub fn fill(dir: &Path, from: &dyn Store, chain: &[u64]) -> Result<usize, String> {
    let held = DirStore::open_read(dir)
        .map_err(|e| e.to_string())?
        .list()
        .map_err(|e| format!("listing {}: {e}", dir.display()))?;
    let missing: Vec<String> = chain
        .iter()
        .map(|&v| version_name(v))
        .filter(|n| !held.contains(n))
        .collect();
    if missing.is_empty() {
        return Ok(0);
    }
    eprintln!(
        "ickpt restart: copying {} version file{} of the chain into {}",
        missing.len(),
        if missing.len() == 1 { "" } else { "s" },
        dir.display()
    );
    let local = DirStore::open_write(dir).map_err(|e| e.to_string())?;
    for name in &missing {
        copy(from, &local, name)?;
    }
    Ok(missing.len())
}

fn copy(from: &dyn Store, to: &DirStore, name: &str) -> Result<(), String> {
    let src = |op: &str, e: std::io::Error| format!("{} {op}: {e}", from.describe(name));
    let dst = |op: &str, e: std::io::Error| format!("{} {op}: {e}", to.describe(name));
    let file = from.open(name).map_err(|e| src("open", e))?;
    let mut out = to.create(name).map_err(|e| dst("create", e))?;
    let mut buf = vec![0u8; CHUNK.min(file.len() as usize)];
    let mut at = 0u64;
    while at < file.len() {
        let n = CHUNK.min((file.len() - at) as usize);
        file.read_exact_at(&mut buf[..n], at)
            .map_err(|e| src("read", e))?;
        out.write_all(&buf[..n]).map_err(|e| dst("write", e))?;
        at += n as u64;
    }
    out.commit().map_err(|e| dst("commit", e))
}
