//! `ickpt prune` and `ickpt rm` as a user runs them: a dry run removes nothing and shows
//! what a real one removes; what is left restores; chains and a running application's store
//! are refused with a message saying what to do.

mod common;
use common::{ickpt, json, scratch, text};
use ickpt::{Config, Engine};
use std::collections::BTreeSet;
use std::path::Path;

const PS: usize = 4096;
const PAGES: usize = 8;

/// Versions 1 (full) 2, 3 (full) 4, 5 (full) 6; nothing collected. Returns region 1's bytes
/// at each version.
fn make_store(dir: &Path, shared: Option<&Path>) -> Vec<Vec<u8>> {
    let mut c = Config::new(dir);
    c.full_every = 2;
    c.keep_chains = 100;
    c.shared_dir = shared.map(Path::to_path_buf);
    let e = Engine::open(c).unwrap();
    let p = e.alloc(1, PAGES * PS).unwrap();
    // SAFETY: alloc returned PAGES*PS bytes, live while `e` lives.
    let mem = unsafe { std::slice::from_raw_parts_mut(p, PAGES * PS) };
    let mut snaps = Vec::new();
    for v in 1..=6u8 {
        let page = v as usize % PAGES;
        mem[page * PS..(page + 1) * PS].fill(v);
        e.checkpoint().unwrap();
        snaps.push(mem.to_vec());
    }
    e.wait_drained().unwrap();
    snaps
}

fn held(dir: &Path) -> BTreeSet<u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| ickpt::store::parse_version_name(e.unwrap().file_name().to_str()?))
        .collect()
}

fn removed(out: &std::process::Output) -> Vec<(String, u64)> {
    assert!(out.status.success(), "{}", text(out));
    json(out)["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert!(r["bytes"].as_u64().unwrap() > 0, "{r}");
            (
                r["tier"].as_str().unwrap().to_string(),
                r["version"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn restores(dir: &str, version: u64, want: &[u8]) {
    let out_dir = scratch("prune-restore");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join("region1");
    let r = ickpt(&[
        "restore",
        "--dir",
        dir,
        "--version",
        &version.to_string(),
        "--region",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", text(&r));
    assert_eq!(std::fs::read(&out).unwrap(), want, "version {version}");
}

fn local(list: &[u64]) -> Vec<(String, u64)> {
    list.iter().map(|&v| ("local".to_string(), v)).collect()
}

#[test]
fn prune_dry_run_shows_what_prune_removes_and_what_is_left_restores() {
    let dir = scratch("prune");
    let snaps = make_store(&dir, None);
    let d = dir.to_str().unwrap();

    let none = ickpt(&["prune", "--dir", d]);
    assert!(!none.status.success());
    assert!(text(&none).contains("--keep-versions"), "{}", text(&none));

    let dry = ickpt(&[
        "--json",
        "prune",
        "--dir",
        d,
        "--keep-versions",
        "2",
        "--dry-run",
    ]);
    assert_eq!(removed(&dry), local(&[4, 3, 2, 1]));
    assert_eq!(json(&dry)["dry_run"], true);
    assert_eq!(held(&dir), (1..=6).collect());
    let human = ickpt(&["prune", "--dir", d, "--keep-versions", "2", "--dry-run"]);
    assert!(
        text(&human).contains("would remove version 4 from the local tier"),
        "{}",
        text(&human)
    );

    // The dry run lists exactly what the same command then removes.
    let args = ["--json", "prune", "--dir", d, "--keep-chains", "2"];
    let planned = removed(&ickpt(&[&args[..], &["--dry-run"]].concat()));
    let chains = ickpt(&args);
    assert_eq!(removed(&chains), planned);
    assert_eq!(planned, local(&[2, 1]));
    assert_eq!(held(&dir), (3..=6).collect());
    for v in 3..=6 {
        restores(d, v, &snaps[v as usize - 1]);
    }
    // A week keeps everything left; nothing to do is no error.
    let week = ickpt(&["prune", "--dir", d, "--keep-within", "7d"]);
    assert!(week.status.success(), "{}", text(&week));
    assert!(text(&week).contains("nothing to remove"), "{}", text(&week));
    let bad = ickpt(&["prune", "--dir", d, "--keep-within", "soon"]);
    assert!(!bad.status.success());
    assert!(text(&bad).contains("--keep-within"), "{}", text(&bad));
}

#[test]
fn rm_refuses_to_break_a_chain_unless_its_dependents_go_too() {
    let dir = scratch("rm");
    let snaps = make_store(&dir, None);
    let d = dir.to_str().unwrap();

    let refused = ickpt(&["rm", "--dir", d, "3"]);
    assert!(!refused.status.success());
    let msg = text(&refused);
    assert!(
        msg.contains("version 3") && msg.contains('4') && msg.contains("--with-dependents"),
        "{msg}"
    );
    assert_eq!(held(&dir), (1..=6).collect());

    let dry = ickpt(&[
        "--json",
        "rm",
        "--dir",
        d,
        "3",
        "--with-dependents",
        "--dry-run",
    ]);
    assert_eq!(removed(&dry), local(&[4, 3]));
    assert_eq!(held(&dir), (1..=6).collect());
    let done = ickpt(&["--json", "rm", "--dir", d, "3", "--with-dependents"]);
    assert_eq!(removed(&done), local(&[4, 3]));
    assert_eq!(held(&dir), [1, 2, 5, 6].into());
    restores(d, 2, &snaps[1]);
    restores(d, 6, &snaps[5]);

    let missing = ickpt(&["rm", "--dir", d, "3"]);
    assert!(!missing.status.success());
    assert!(
        text(&missing).contains("version 3 is in none of"),
        "{}",
        text(&missing)
    );
}

#[test]
fn a_store_an_application_holds_is_refused_and_left_alone() {
    let dir = scratch("prune-in-use");
    make_store(&dir, None);
    let d = dir.to_str().unwrap();
    let mut c = Config::new(&dir);
    c.keep_chains = 100;
    let running = Engine::open(c).unwrap();
    for args in [
        &["prune", "--dir", d, "--keep-chains", "1"][..],
        &["rm", "--dir", d, "6"][..],
    ] {
        let r = ickpt(args);
        assert!(!r.status.success(), "{args:?}");
        assert!(
            text(&r).contains("in use by a running application"),
            "{}",
            text(&r)
        );
    }
    assert_eq!(held(&dir), (1..=6).collect());
    drop(running);
}

#[test]
fn prune_with_shared_keeps_on_local_what_the_drain_has_not_copied() {
    let dir = scratch("prune-local");
    let shared = scratch("prune-shared");
    make_store(&dir, Some(&shared));
    // As if the drain, oldest first, had copied only versions 1 and 2.
    for v in 3..=6 {
        std::fs::remove_file(shared.join(ickpt::store::version_name(v))).unwrap();
    }
    let (d, s) = (dir.to_str().unwrap(), shared.to_str().unwrap());
    let r = ickpt(&[
        "--json",
        "prune",
        "--dir",
        d,
        "--shared",
        s,
        "--keep-versions",
        "1",
    ]);
    // One version kept would be 5 and 6; 3 and 4 are on no other tier yet, so they stay on
    // local; 1 and 2 are safe on the shared tier, whose newest chain they are.
    assert_eq!(removed(&r), local(&[2, 1]));
    assert_eq!(held(&dir), [3, 4, 5, 6].into());
    assert_eq!(held(&shared), [1, 2].into());
}

/// A version left without its chain's full version (a crashed server lost it after the
/// drain's copy, or a hand removed it) while newer chains restore: `verify` names it as an
/// orphan without failing the store, and `prune` removes it, with `--orphans` alone or with
/// any retention.
#[test]
fn orphans_are_reported_without_failing_and_pruned() {
    let (dir, shared) = (scratch("orphans-local"), scratch("orphans-shared"));
    make_store(&dir, Some(&shared));
    std::fs::remove_file(shared.join(ickpt::store::version_name(3))).unwrap();
    let (d, s) = (dir.to_str().unwrap(), shared.to_str().unwrap());
    // The shared tier alone, as a store of its own, and with the local tier.
    for args in [vec!["--dir", s], vec!["--dir", d, "--shared", s]] {
        let mut v = vec!["verify", "--json"];
        v.extend(&args);
        let out = ickpt(&v);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        let j = json(&out);
        let orphans = j["orphans"].as_array().unwrap();
        assert_eq!(orphans.len(), 1, "{j}");
        assert_eq!(orphans[0]["version"], 4);
        assert!(orphans[0]["file"].as_str().unwrap().starts_with(s), "{j}");
        let mut v = vec!["verify"];
        v.extend(&args);
        let t = text(&ickpt(&v));
        assert!(t.contains("orphans:") && t.contains("OK"), "{t}");
    }
    // Dry run, then for real; the local tier keeps everything.
    let dry = ickpt(&[
        "prune",
        "--dir",
        d,
        "--shared",
        s,
        "--orphans",
        "--dry-run",
        "--json",
    ]);
    assert_eq!(removed(&dry), vec![("shared".to_string(), 4)]);
    assert!(held(&shared).contains(&4));
    let real = ickpt(&["prune", "--dir", d, "--shared", s, "--orphans", "--json"]);
    assert_eq!(removed(&real), vec![("shared".to_string(), 4)]);
    assert_eq!(held(&shared), BTreeSet::from([1, 2, 5, 6]));
    assert_eq!(held(&dir), (1..=6).collect());
    let out = ickpt(&["verify", "--json", "--dir", d, "--shared", s]);
    assert!(json(&out)["orphans"].as_array().unwrap().is_empty());
    // With a retention too: the orphan goes along with what the retention lets go.
    std::fs::remove_file(dir.join(ickpt::store::version_name(1))).unwrap();
    let out = ickpt(&["prune", "--dir", d, "--keep-chains", "3", "--json"]);
    assert_eq!(removed(&out), local(&[2]));
    // Neither option: refused, naming both.
    let out = ickpt(&["prune", "--dir", d]);
    assert!(!out.status.success());
    assert!(text(&out).contains("--orphans"), "{}", text(&out));
}
