//! The layering the code relies on, checked on the sources (issue 10): `sys`, the system-call
//! layer, depends on nothing above it, so what the kernel does and what ickpt decides stay
//! apart (`sys/fs.rs` once called into `track` from its fork handler); unsafe code is allowed
//! only where named; the environment is read in one module.

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
        "track", "engine", "store", "capi", "read", "io", "policy", "config",
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

/// Unsafe code is denied at the crate root and allowed only in `sys`, `capi` and the files
/// named here, each of which says why at its top. Adding one is a decision: make it here.
#[test]
fn unsafe_code_is_allowed_only_where_named() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    assert!(
        lib.contains("#![deny(unsafe_code)]"),
        "lib.rs must deny unsafe_code"
    );
    let mut allowed: Vec<String> = sources(&src)
        .into_iter()
        .filter(|(_, text)| text.contains("#![allow(unsafe_code)]"))
        .map(|(path, _)| {
            path.strip_prefix(&format!("{}/", src.display()))
                .unwrap()
                .to_string()
        })
        .collect();
    allowed.sort();
    assert_eq!(
        allowed,
        [
            "engine/inject.rs",
            "engine/mod.rs",
            "engine/restore_regions.rs",
            "track/backends/mprotect.rs",
            "track/backends/uffd.rs",
            "track/backends/uffd_shared.rs",
            "track/memory/own_mem.rs",
            "track/memory/registry.rs",
            "track/protocol/cow.rs",
            "track/protocol/first_write.rs",
        ]
    );
    assert!(
        lib.contains("#[allow(unsafe_code)]\npub mod capi;"),
        "lib.rs allows unsafe code in capi"
    );
    // `sys` is public only with the `raw-sys` feature (ickpt's benchmarks and tests).
    assert!(
        lib.contains(
            "#[allow(unsafe_code)]\n#[cfg(feature = \"raw-sys\")]\n#[doc(hidden)]\npub mod sys;"
        ),
        "lib.rs allows unsafe code in sys, public with raw-sys"
    );
    assert!(
        lib.contains("#[allow(unsafe_code)]\n#[cfg(not(feature = \"raw-sys\"))]\n#[allow(dead_code)]\nmod sys;"),
        "lib.rs allows unsafe code in sys, private without raw-sys"
    );
    // Nothing else in lib.rs allows it.
    assert_eq!(lib.matches("allow(unsafe_code)").count(), 3);
}

/// The environment is read in one place, `config/env.rs`, where each `ICKPT_*` variable's
/// name, accepted values and check are written once (issue 10: five places across three
/// layers read it before, `sys` among them).
#[test]
fn only_config_env_reads_the_environment() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (path, text) in sources(&src) {
        if path.ends_with("config/env.rs") {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            for pat in ["env::var", "var_os(", "getenv"] {
                assert!(
                    !code.contains(pat),
                    "{path}:{}: reads the environment outside config/env.rs: {line}",
                    n + 1
                );
            }
        }
    }
}
