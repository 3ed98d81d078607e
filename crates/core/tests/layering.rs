//! The layering the code relies on, checked on the sources: every top-level module of
//! `crates/core/src` has a rank, and a module uses only modules of a lower rank (by path,
//! `crate::m`, `super::...::m` reaching the crate root, or a type the crate root re-exports
//! from one). So `sys`, the system-call layer, depends on nothing (what the kernel does and
//! what ickpt decides stay apart: `sys/fs.rs` once called into `track` from its fork
//! handler), settings are handed down as values (`track` and `store` once read the
//! environment through `config`), and a knot cannot form again. Unsafe code is allowed only
//! where named; the environment is read in one module.

use std::collections::HashMap;
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

/// Each top-level module's rank: a module may use those of lower rank only. Equal ranks do
/// not use each other.
const RANKS: &[(&str, u32)] = &[
    ("sys", 0),
    // System calls into tracked memory (read/pread/recv made safe to aim at it).
    ("tracked_io", 1),
    // Vocabulary and decisions with no mechanism: kind, cost, retention, flush order, pre-copy.
    ("policy", 1),
    ("track", 2),
    ("store", 2),
    // Settings: their types are the lower modules', their values come from here.
    ("config", 3),
    ("probe", 4),
    ("error", 4),
    ("private_file", 5),
    ("read", 6),
    // A coordinated job's directory: its job file, its ranks' stores.
    ("job", 6),
    // Files besides versions, written by the rules `read` checks them by.
    ("write", 7),
    ("engine", 8),
    ("maintain", 9),
    // What the library `ickpt run` preloads needs of the core besides the engine.
    ("whole_process", 9),
    ("capi", 10),
    ("fuzzing", 10),
];

fn rank(m: &str) -> Option<u32> {
    RANKS.iter().find(|(n, _)| *n == m).map(|&(_, r)| r)
}

/// The modules the crate root declares, and what its `pub use` lines re-export from which.
fn root(lib: &str) -> (Vec<String>, HashMap<String, String>) {
    let mut modules = Vec::new();
    let mut reexports = HashMap::new();
    let flat = lib.replace('\n', " ");
    for stmt in flat.split(';') {
        let words: Vec<&str> = stmt.split_whitespace().collect();
        if let Some(i) = words.iter().position(|w| *w == "mod") {
            if let Some(name) = words.get(i + 1) {
                modules.push(name.to_string());
            }
        }
        if let Some(rest) = stmt.trim().strip_prefix("pub use ") {
            let (module, names) = rest.split_once("::").unwrap_or((rest, ""));
            let names = names.trim_start_matches('{').trim_end_matches('}');
            for n in names.split(',') {
                let n = n.trim();
                if !n.is_empty() {
                    reexports.insert(n.to_string(), module.trim().to_string());
                }
            }
        }
    }
    (modules, reexports)
}

/// The top-level modules a line of `file` (a path below `src`, as "track/region.rs") names.
fn uses(file: &str, line: &str, reexports: &HashMap<String, String>) -> Vec<String> {
    let code = line.split("//").next().unwrap();
    let mut out = Vec::new();
    // The file's module path: src/a/b.rs is a::b, src/a/mod.rs is a.
    let mut path: Vec<&str> = file.trim_end_matches(".rs").split('/').collect();
    if path.last() == Some(&"mod") {
        path.pop();
    }
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in code.match_indices("crate::") {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let name = ident(&code[i + 7..]);
        match reexports.get(&name) {
            Some(m) => out.push(m.clone()),
            None => out.push(name),
        }
    }
    let mut at = 0;
    while let Some(i) = code[at..].find("super::") {
        let start = at + i;
        let mut ups = 0;
        let mut rest = &code[start..];
        while let Some(r) = rest.strip_prefix("super::") {
            ups += 1;
            rest = r;
        }
        at = code.len() - rest.len();
        if ups == path.len() {
            out.push(ident(rest));
        }
    }
    out
}

#[test]
fn modules_use_only_modules_ranked_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let (modules, reexports) = root(&lib);
    for m in &modules {
        assert!(rank(m).is_some(), "module `{m}` has no rank in RANKS");
    }
    for (m, _) in RANKS {
        assert!(
            modules.iter().any(|x| x == m),
            "RANKS names `{m}`, which lib.rs lacks"
        );
    }
    let files = sources(&src);
    assert!(files.len() > 50, "src not found at {}", src.display());
    let mut climbs = Vec::new();
    for (path, text) in &files {
        let file = path.strip_prefix(&format!("{}/", src.display())).unwrap();
        let top = file.split('/').next().unwrap().trim_end_matches(".rs");
        let Some(mine) = rank(top) else { continue };
        for (n, line) in text.lines().enumerate() {
            for used in uses(file, line, &reexports) {
                match rank(&used) {
                    Some(r) if used != top && r >= mine => climbs.push(format!(
                        "{file}:{}: `{top}` (rank {mine}) uses `{used}` (rank {r}): {}",
                        n + 1,
                        line.trim()
                    )),
                    _ => {}
                }
            }
        }
    }
    assert!(
        climbs.is_empty(),
        "imports that climb:\n{}",
        climbs.join("\n")
    );
}

/// The check itself: a use of a higher module, through each way of naming it, is found.
#[test]
fn the_rank_check_finds_each_way_of_naming_a_module() {
    let (_, reexports) = root("mod engine;\npub use engine::{Engine, Stats};\nmod track;");
    assert_eq!(
        uses("track/x.rs", "use crate::engine::Engine;", &reexports),
        ["engine"]
    );
    assert_eq!(
        uses("track/x.rs", "let e: crate::Engine;", &reexports),
        ["engine"]
    );
    assert_eq!(
        uses("track/x.rs", "use super::super::engine;", &reexports),
        ["engine"]
    );
    assert_eq!(
        uses("track/mod.rs", "use super::engine;", &reexports),
        ["engine"]
    );
    assert!(uses("track/a/b.rs", "use super::b2;", &reexports).is_empty());
    assert!(uses("track/x.rs", "// crate::engine in a comment", &reexports).is_empty());
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
            "engine/regions.rs",
            "engine/restore_regions.rs",
            "track/backends/mprotect.rs",
            "track/backends/uffd.rs",
            "track/backends/uffd_shared.rs",
            "track/memory/own_mem.rs",
            "track/protocol/cow.rs",
            "track/protocol/first_write.rs",
            "track/registry.rs",
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
/// name, accepted values and check are written once (before, five places across three
/// layers read it, `sys` among them).
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
