//! `ickpt verify` says what a restore does, on every tier: each tier's damage is reported
//! whichever tier a restore reads, which versions restore from each tier alone and from the
//! tiers together is said, and a damaged page a newer version rewrote fails only the versions
//! that still read it. `ls` says it checks metadata only, and marks a copy whose metadata
//! fails on its tier.

use ickpt::store::version_name;
use ickpt::{Config, Engine};
use serde_json::{json, Value};
use std::path::Path;

mod common;
use common::{flip, ickpt, scratch, text, PAGES, PS};

/// The first stored page of a version with one region (its data follows the header page).
const FIRST_PAGE_AT: u64 = 4096;

/// The four versions of `common::four_versions`, drained to `shared` when given.
fn make_store(dir: &Path, shared: Option<&Path>) -> Vec<Vec<u8>> {
    let mut cfg = Config::new(dir);
    cfg.shared_dir = shared.map(Path::to_path_buf);
    common::four_versions(cfg)
}

fn verify_json(args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["verify", "--json"];
    all.extend_from_slice(args);
    let out = ickpt(&all);
    (out.status.code(), common::json(&out))
}

fn tier<'a>(j: &'a Value, name: &str) -> &'a Value {
    j["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tier {name} in {j}"))
}

#[test]
fn a_damaged_shared_copy_is_reported_though_the_local_one_restores() {
    let (local, shared) = (scratch("vt-local"), scratch("vt-shared"));
    make_store(&local, Some(&shared));
    // Version 3's only page, which version 4 reads: in the shared copy only.
    flip(&shared.join(version_name(3)), FIRST_PAGE_AT + 5);
    let (l, s) = (local.to_str().unwrap(), shared.to_str().unwrap());
    let (code, j) = verify_json(&["--dir", l, "--shared", s]);
    assert_eq!(code, Some(1), "{j}");
    assert_eq!(j["ok"], false);
    let damage = &j["problems"][0];
    assert_eq!(damage["tier"], "shared");
    assert_eq!(damage["kind"], "damage");
    assert_eq!(damage["version"], 3);
    assert_eq!(damage["offset"], FIRST_PAGE_AT);
    assert!(damage["file"].as_str().unwrap().starts_with(s), "{damage}");
    assert_eq!(tier(&j, "local")["restorable"], json!([1, 2, 3, 4]));
    assert_eq!(tier(&j, "shared")["restorable"], json!([1, 2]));
    assert_eq!(j["together"]["restorable"], json!([1, 2, 3, 4]));
    assert_eq!(j["restorable"], json!([1, 2, 3, 4]));
    let human = text(&ickpt(&["verify", "--dir", l, "--shared", s]));
    assert!(
        human.contains("DAMAGE (shared tier) version 3")
            && human.contains("restorable from it alone: 1-2")
            && human.contains("FAILED"),
        "{human}"
    );
    // Once the node is gone, the shared tier is all there is, and verify said so.
    std::fs::remove_dir_all(&*local).unwrap();
    let (code, j) = verify_json(&["--dir", l, "--shared", s]);
    assert_eq!(code, Some(1));
    assert_eq!(j["restorable"], json!([1, 2]));
}

#[test]
fn a_damaged_local_copy_restores_from_the_shared_one_and_verify_says_so() {
    let (local, shared) = (scratch("vt2-local"), scratch("vt2-shared"));
    let snaps = make_store(&local, Some(&shared));
    flip(&local.join(version_name(3)), FIRST_PAGE_AT + 5);
    let (l, s) = (local.to_str().unwrap(), shared.to_str().unwrap());
    let (code, j) = verify_json(&["--dir", l, "--shared", s]);
    assert_eq!(code, Some(1), "the local damage is a problem: {j}");
    assert_eq!(j["problems"].as_array().unwrap().len(), 1, "{j}");
    assert_eq!(j["problems"][0]["tier"], "local");
    assert_eq!(tier(&j, "local")["restorable"], json!([1, 2]));
    assert_eq!(tier(&j, "shared")["restorable"], json!([1, 2, 3, 4]));
    assert_eq!(j["newest_restorable"], 4, "{j}");
    // ... which is what `ickpt restore` does: version 4, from the shared copy of 3.
    let out_dir = scratch("vt2-out");
    std::fs::create_dir_all(&*out_dir).unwrap();
    let out = out_dir.join("r.bin");
    let r = ickpt(&[
        "restore",
        "--dir",
        l,
        "--shared",
        s,
        "--region",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(r.status.success(), "{}", text(&r));
    assert_eq!(common::json(&r)["version"], 4);
    assert!(
        std::fs::read(&out).unwrap() == snaps[3],
        "version 4's bytes"
    );
    // ... and the library's restart.
    let mut cfg = Config::new(&*local);
    cfg.shared_dir = Some(shared.to_path_buf());
    let e = Engine::open(cfg).unwrap();
    let p = e.alloc(1, PAGES * PS).unwrap();
    let info = e.restore_latest().unwrap().unwrap();
    assert_eq!(info.version, 4);
    // SAFETY: alloc returned PAGES*PS bytes, live while `e` lives.
    let mem = unsafe { std::slice::from_raw_parts(p, PAGES * PS) };
    assert!(mem == &snaps[3][..], "restored bytes");
}

#[test]
fn a_damaged_page_a_newer_version_rewrote_fails_only_the_versions_that_read_it() {
    let dir = scratch("vt-superseded");
    let snaps = make_store(&dir, None);
    // Version 2's page 2, which version 4 rewrote; version 3 still reads it.
    flip(&dir.join(version_name(2)), FIRST_PAGE_AT + 5);
    let d = dir.to_str().unwrap();
    let (code, j) = verify_json(&["--dir", d]);
    assert_eq!(code, Some(1), "{j}");
    assert_eq!(j["restorable"], json!([1, 4]), "{j}");
    assert_eq!(j["newest_restorable"], 4);
    let problems = j["problems"].as_array().unwrap();
    let of = |v: u64| -> Vec<&Value> { problems.iter().filter(|p| p["version"] == v).collect() };
    assert_eq!(of(2)[0]["kind"], "damage", "{j}");
    assert_eq!(of(3)[0]["kind"], "unrestorable", "{j}");
    assert!(
        of(3)[0]["file"]
            .as_str()
            .unwrap()
            .ends_with(&version_name(2)),
        "version 3 fails on version 2's page: {j}"
    );
    assert!(of(4).is_empty(), "{j}");
    // The restart agrees: version 4, exactly.
    let e = Engine::open(Config::new(&*dir)).unwrap();
    let p = e.alloc(1, PAGES * PS).unwrap();
    assert_eq!(e.restore_latest().unwrap().unwrap().version, 4);
    // SAFETY: alloc returned PAGES*PS bytes, live while `e` lives.
    let mem = unsafe { std::slice::from_raw_parts(p, PAGES * PS) };
    assert!(mem == &snaps[3][..], "restored bytes");
    assert!(e.restore(3).is_err(), "version 3 reads the damaged page");
    // ls says what it checked, and calls nothing "ok" outright.
    let ls = text(&ickpt(&["ls", "--dir", d]));
    assert!(
        ls.contains("STATUS checks headers, metadata and chain links (not pages"),
        "{ls}"
    );
    for row in ls.lines().skip(1).take(4) {
        assert!(row.ends_with("  metadata ok"), "{ls}");
    }
}

#[test]
fn ls_marks_a_copy_whose_metadata_fails_on_its_tier() {
    let (local, shared) = (scratch("ls-local"), scratch("ls-shared"));
    make_store(&local, Some(&shared));
    // A header byte of the shared copy of version 2.
    flip(&shared.join(version_name(2)), 20);
    let (l, s) = (local.to_str().unwrap(), shared.to_str().unwrap());
    let ls = text(&ickpt(&["ls", "--dir", l, "--shared", s]));
    let row = ls.lines().find(|r| r.starts_with("2 ")).unwrap();
    assert!(row.contains("local+shared(DAMAGED)"), "{ls}");
    assert!(ls.contains("1 copy(ies) on a tier fail"), "{ls}");
    let j = common::json(&ickpt(&["ls", "--dir", l, "--shared", s, "--json"]));
    assert_eq!(j["versions"][1]["damaged_on"], json!(["shared"]), "{j}");
    let (code, v) = verify_json(&["--dir", l, "--shared", s]);
    assert_eq!(code, Some(1));
    assert_eq!(v["problems"][0]["tier"], "shared");
}
