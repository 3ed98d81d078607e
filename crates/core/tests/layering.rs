//! The layering the code relies on, checked on the sources (issue 10): `sys`, the system-call
//! layer, depends on nothing above it, so what the kernel does and what ickpt decides stay
//! apart (`sys/fs.rs` once called into `track` from its fork handler).

use std::path::Path;

/// Every `.rs` file below `dir`, with its text.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push((
                path.display().to_string(),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
    out
}

#[test]
fn sys_uses_nothing_above_it() {
    let sys = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sys");
    let files = sources(&sys);
    assert!(files.len() > 5, "src/sys not found at {}", sys.display());
    let above = [
        "track", "engine", "store", "capi", "catalog", "restore", "verify", "io", "policy",
    ];
    for (path, text) in files {
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            for m in above {
                for pat in [
                    format!("crate::{m}::"),
                    format!("crate::{m};"),
                    format!("super::super::{m}"),
                ] {
                    assert!(
                        !code.contains(&pat),
                        "{path}:{}: the system-call layer uses `{m}`: {line}",
                        n + 1
                    );
                }
            }
        }
    }
}
