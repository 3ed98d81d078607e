//! The `ickpt` command against real stores: listing, inspecting, verifying, restoring, and
//! refusing damaged stores with the file and offset named.

use ickpt::store::version_name;
use ickpt::{Config, Engine};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{flip, ickpt, json, scratch, text, PAGES, PS};

/// A store with versions 1 (full), 2, 3, 4 (increments). Returns region 1's bytes at each.
fn make_store(dir: &Path) -> Vec<Vec<u8>> {
    make_store_with(Config::new(dir))
}

fn make_store_with(cfg: Config) -> Vec<Vec<u8>> {
    common::four_versions(cfg)
}

/// `ickpt restore STORE_ARGS --region 1 --out OUT`, which must succeed.
fn restore_region_1(store_args: &[&str], out: &Path) {
    let mut args = vec!["restore"];
    args.extend_from_slice(store_args);
    args.extend(["--region", "1", "--out", out.to_str().unwrap()]);
    let r = ickpt(&args);
    assert!(r.status.success(), "{}", text(&r));
}

#[test]
fn ls_inspect_verify_restore_on_a_healthy_store() {
    let dir = scratch("healthy");
    let snaps = make_store(&dir);
    let d = dir.to_str().unwrap();

    let ls = json(&ickpt(&["ls", "--dir", d, "--json"]));
    let vs = ls["versions"].as_array().unwrap();
    assert_eq!(vs.len(), 4);
    assert_eq!(vs[0]["kind"], "full");
    assert_eq!(vs[0]["pages"], PAGES as u64);
    assert_eq!(vs[1]["kind"], "incremental");
    assert_eq!(vs[1]["parent"], 1);
    assert_eq!(vs[1]["pages"], 2);
    let table = text(&ickpt(&["ls", "--dir", d]));
    assert!(
        table.contains("VERSION") && table.contains("incremental"),
        "{table}"
    );

    let insp = json(&ickpt(&["inspect", "--dir", d, "--json", "4"]));
    assert_eq!(insp["chain"], serde_json::json!([4, 3, 2, 1]));
    assert_eq!(insp["regions"][0]["pages_stored"], 2);

    let v = ickpt(&["verify", "--dir", d, "--json"]);
    assert!(v.status.success(), "{}", text(&v));
    assert_eq!(json(&v)["ok"], true);

    for (version, snap) in snaps.iter().enumerate() {
        let out = dir.join(format!("r{version}.bin"));
        let v = (version + 1).to_string();
        restore_region_1(&["--dir", d, "--version", &v], &out);
        assert!(
            std::fs::read(&out).unwrap() == *snap,
            "version {} restored wrong bytes",
            version + 1
        );
    }
    let r = ickpt(&[
        "restore",
        "--dir",
        d,
        "--region",
        "7",
        "--out",
        dir.join("x").to_str().unwrap(),
    ]);
    assert!(!r.status.success());
    assert!(text(&r).contains("no region 7"), "{}", text(&r));
}

#[test]
fn with_shared_the_commands_read_both_tiers_and_show_where_each_version_is() {
    let (dir, shared) = (scratch("tier-local"), scratch("tier-shared"));
    let mut cfg = Config::new(&*dir);
    cfg.shared_dir = Some(shared.to_path_buf());
    let snaps = make_store_with(cfg);
    let (d, sh) = (dir.to_str().unwrap(), shared.to_str().unwrap());
    let tiers_of = |ls: &Value| -> Vec<Value> {
        ls["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["tiers"].clone())
            .collect()
    };
    let ls = json(&ickpt(&["ls", "--dir", d, "--shared", sh, "--json"]));
    assert_eq!(
        tiers_of(&ls),
        vec![serde_json::json!(["local", "shared"]); 4]
    );
    let table = text(&ickpt(&["ls", "--dir", d, "--shared", sh]));
    assert!(
        table.contains("TIERS") && table.contains("local+shared"),
        "{table}"
    );

    // The node is gone: everything is read from the shared tier.
    std::fs::remove_dir_all(&*dir).unwrap();
    let ls = json(&ickpt(&["ls", "--dir", d, "--shared", sh, "--json"]));
    assert_eq!(tiers_of(&ls), vec![serde_json::json!(["shared"]); 4]);
    assert_eq!(ls["newest_by_metadata"], 4);
    let out_dir = scratch("tier-out");
    std::fs::create_dir_all(&*out_dir).unwrap();
    let out = out_dir.join("r.bin");
    restore_region_1(&["--dir", d, "--shared", sh], &out);
    assert!(
        std::fs::read(&out).unwrap() == snaps[3],
        "restored wrong bytes"
    );
    let v = ickpt(&["verify", "--dir", d, "--shared", sh]);
    assert!(v.status.success(), "{}", text(&v));
    // Damage in the only copy is found.
    flip(&shared.join(version_name(1)), 4096 + 17);
    let v = ickpt(&["verify", "--dir", d, "--shared", sh]);
    assert_eq!(v.status.code(), Some(1), "{}", text(&v));
}

#[test]
fn a_flipped_byte_is_reported_with_file_and_offset_and_restore_refuses() {
    let dir = scratch("flip");
    let snaps = make_store(&dir);
    let d = dir.to_str().unwrap();
    // Version 3 stores page 5 only; it is not overwritten by version 4, so restore needs it.
    let file = dir.join(version_name(3));
    let page_at = 4096u64; // the first stored page of a version with one region
                           // Inside the page data, compressed or not (a zstd frame is never under 9 bytes).
    flip(&file, page_at + 5);
    let v = ickpt(&["verify", "--dir", d, "--json"]);
    assert!(!v.status.success());
    let j = json(&v);
    assert_eq!(j["ok"], false);
    let p = &j["problems"][0];
    assert_eq!(p["version"], 3);
    assert_eq!(p["offset"], page_at);
    assert!(p["file"].as_str().unwrap().ends_with("v00000003.ickpt"));
    // Every page is read and counted, the damaged version's too: verify goes on past a bad
    // page to find every one (16 + 2 + 1 + 2 pages).
    assert_eq!(j["bytes_checked"], 21 * PS as u64, "{j}");
    let human = text(&ickpt(&["verify", "--dir", d]));
    assert!(
        human.contains("v00000003.ickpt") && human.contains("FAILED"),
        "{human}"
    );
    // verify does not tell its reader to run verify.
    assert!(!human.contains("run 'ickpt verify'"), "{human}");
    // ls keeps a damaged version's reason in the STATUS column.
    let flat = dir.join(version_name(9));
    std::fs::write(&flat, b"not a version").unwrap();
    let ls = text(&ickpt(&["ls", "--dir", d]));
    let row = ls.lines().find(|l| l.starts_with('9')).unwrap();
    let header = ls.lines().next().unwrap();
    assert_eq!(
        row.find("DAMAGED:"),
        header.find("STATUS"),
        "the reason is not under STATUS:\n{ls}"
    );
    std::fs::remove_file(&flat).unwrap();

    let out = dir.join("out.bin");
    let restore = |extra: &[&str]| {
        let mut args = vec!["restore", "--dir", d, "--region", "1", "--out"];
        args.push(out.to_str().unwrap());
        args.extend_from_slice(extra);
        ickpt(&args)
    };
    // Version 4 needs the damaged page: asked for by number, it is refused.
    let r = restore(&["--version", "4"]);
    assert!(!r.status.success());
    assert!(
        text(&r).contains("v00000003.ickpt") && text(&r).contains("checksum"),
        "{}",
        text(&r)
    );
    // Without a number, the newest version that restores completely: 4 and 3 need the
    // damaged page and are passed over (and named); 2 is intact.
    let r = restore(&["--json"]);
    assert!(r.status.success(), "{}", text(&r));
    assert_eq!(json(&r)["version"], 2);
    assert!(
        std::fs::read(&out).unwrap() == snaps[1],
        "version 2's bytes"
    );
    let said = String::from_utf8_lossy(&r.stderr);
    assert!(
        said.contains("passing over version 4") && said.contains("passing over version 3"),
        "{said}"
    );

    // The library refuses too, before returning any wrong byte.
    let e = Engine::open(Config::new(&dir)).unwrap();
    e.alloc(1, PAGES * PS).unwrap();
    let err = e.restore(4).unwrap_err();
    assert!(
        matches!(
            err,
            ickpt::RestoreError::Read(ickpt::ReadError::Corrupt { .. })
        ),
        "{err}"
    );
}

#[test]
fn a_flipped_header_byte_and_a_truncated_file_are_rejected() {
    let dir = scratch("trunc");
    make_store(&dir);
    let d = dir.to_str().unwrap();
    flip(&dir.join(version_name(2)), 20);
    let f4 = dir.join(version_name(4));
    let len = std::fs::metadata(&f4).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f4)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let j = json(&ickpt(&["verify", "--dir", d, "--json"]));
    let versions: Vec<u64> = j["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["version"].as_u64().unwrap())
        .collect();
    assert!(versions.contains(&2) && versions.contains(&4), "{j}");
    // Version 3's chain runs through the damaged version 2.
    assert!(versions.contains(&3), "{j}");
    let ls = text(&ickpt(&["ls", "--dir", d]));
    assert!(ls.contains("DAMAGED"), "{ls}");
    let e = Engine::open(Config::new(&dir)).unwrap();
    e.alloc(1, PAGES * PS).unwrap();
    for v in [4, 3] {
        assert!(matches!(
            e.restore(v),
            Err(ickpt::RestoreError::Read(ickpt::ReadError::Corrupt { .. }))
        ));
    }
    e.restore(1).unwrap();
}

#[test]
fn a_deleted_middle_increment_breaks_the_chain_and_says_so() {
    let dir = scratch("missing");
    let snaps = make_store(&dir);
    let d = dir.to_str().unwrap();
    std::fs::remove_file(dir.join(version_name(2))).unwrap();
    let v = ickpt(&["verify", "--dir", d]);
    assert!(!v.status.success());
    let t = text(&v);
    assert!(t.contains("needs version 2, which is missing"), "{t}");
    let e = Engine::open(Config::new(&dir)).unwrap();
    let p = e.alloc(1, PAGES * PS).unwrap();
    let err = e.restore(4).unwrap_err();
    assert!(
        matches!(
            err,
            ickpt::RestoreError::Read(ickpt::ReadError::ChainBroken { missing: 2, .. })
        ),
        "{err}"
    );
    e.restore(1).unwrap();
    // SAFETY: alloc returned PAGES*PS bytes.
    assert!(unsafe { std::slice::from_raw_parts(p, PAGES * PS) } == &snaps[0][..]);
}

#[test]
fn not_a_store_is_refused_with_a_hint() {
    let dir = scratch("notstore");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("data.txt"), "x").unwrap();
    let out = ickpt(&["ls", "--dir", dir.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(text(&out).contains("not an ickpt store"), "{}", text(&out));
    assert!(matches!(
        Engine::open(Config::new(&dir)),
        Err(ickpt::InitError::Store(
            ickpt::store::OpenError::NotAStore { .. }
        ))
    ));
}

#[test]
fn ls_and_inspect_report_commit_stats() {
    let dir = scratch("stats");
    make_store(&dir);
    let d = dir.to_str().unwrap();

    let ls = json(&ickpt(&["ls", "--dir", d, "--json"]));
    let vs = ls["versions"].as_array().unwrap();
    for (i, v) in vs.iter().enumerate() {
        let st = &v["stats"];
        assert!(st.is_object(), "{v}");
        assert_eq!(st["mode"], "sync", "{v}");
        for k in [
            "flush_order",
            "backend",
            "commit_ns",
            "wait_ns",
            "peak_cow_bytes",
            "cow_limit_bytes",
            "cow",
            "wait",
            "avoided",
        ] {
            assert!(!st[k].is_null(), "{k} missing: {v}");
        }
        // AFTER is recorded by the next version, so the newest has none yet.
        assert_eq!(st["after"].is_null(), i + 1 == vs.len(), "{v}");
    }
    let table = text(&ickpt(&["ls", "--dir", d]));
    assert!(
        table.contains("MODE") && table.contains("WAITS") && table.contains("COMMIT"),
        "{table}"
    );
    assert!(table.contains("sync"), "{table}");

    let insp = json(&ickpt(&["inspect", "--dir", d, "--json", "2"]));
    let st = &insp["stats"];
    assert_eq!(insp["format_version"], ickpt::format::FORMAT_VERSION);
    assert_eq!(st["mode"], "sync", "{insp}");
    assert!(
        st["commit_ns"].is_u64() && st["after_previous"].is_u64(),
        "{insp}"
    );
    // Version 2's AFTER is what version 3 recorded as after_previous.
    let v3 = json(&ickpt(&["inspect", "--dir", d, "--json", "3"]));
    assert_eq!(st["after"], v3["stats"]["after_previous"], "{insp}");
    assert_eq!(vs[1]["stats"]["after"], st["after"]);
    // The phases of the commit (format 4 on), each measured, and the attempts.
    let phases = &st["phases_ns"];
    for k in ["collect", "copy", "crc", "release", "write"] {
        assert!(phases[k].is_u64(), "{k} missing: {insp}");
    }
    assert!(phases["copy"].as_u64() > Some(0), "{insp}");
    assert!(phases["write"].as_u64() > Some(0), "{insp}");
    assert!(st["attempts"].as_u64() >= Some(1), "{insp}");
    let human = text(&ickpt(&["inspect", "--dir", d]));
    assert!(
        human.contains("commit       sync") && human.contains("commit time"),
        "{human}"
    );
    assert!(human.contains("phases       collect "), "{human}");
}

#[test]
fn format_v1_versions_show_no_commit_stats() {
    // A copy, so nothing can touch the checked-in fixture.
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../core/tests/fixtures/format-v1");
    let dir = scratch("v1");
    std::fs::create_dir_all(&dir).unwrap();
    for f in std::fs::read_dir(&fixture).expect("fixture present") {
        let f = f.unwrap();
        std::fs::copy(f.path(), dir.join(f.file_name())).unwrap();
    }
    let d = dir.to_str().unwrap();
    let ls = json(&ickpt(&["ls", "--dir", d, "--json"]));
    let vs = ls["versions"].as_array().unwrap();
    assert_eq!(vs.len(), 3);
    assert!(
        vs.iter()
            .all(|v| v["metadata_ok"] == true && v["stats"].is_null()),
        "{ls}"
    );
    let insp = json(&ickpt(&["inspect", "--dir", d, "--json"]));
    assert_eq!(insp["format_version"], 1);
    assert!(insp["stats"].is_null(), "{insp}");
    let table = text(&ickpt(&["ls", "--dir", d]));
    assert!(table.contains("MODE"), "{table}");
    let human = text(&ickpt(&["inspect", "--dir", d]));
    assert!(human.contains("not recorded"), "{human}");
}

#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    let dir = scratch("pipe");
    make_store(&dir);
    // Reader closed before the command writes: it must die of SIGPIPE (or finish, if it
    // wrote into the pipe first), never panic.
    let mut child = Command::new(env!("CARGO_BIN_EXE_ickpt"))
        .args(["ls", "--json", "--dir", dir.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(out.status.code(), Some(101), "{stderr}");
}

#[test]
fn probe_reports_the_kernel_features_and_the_forced_fallback() {
    let out = ickpt(&["probe", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let j = json(&out);
    for k in [
        "userfaultfd",
        "uffd_write_protect",
        "uffd_write_protect_async",
        "pagemap_scan",
    ] {
        assert!(j[k].is_boolean(), "{k}: {j}");
    }
    let forced = Command::new(env!("CARGO_BIN_EXE_ickpt"))
        .args(["probe", "--json"])
        .env("ICKPT_NO_UFFD", "1")
        .output()
        .unwrap();
    let j = json(&forced);
    assert_eq!(j["userfaultfd"], false);
    assert_eq!(j["pagemap_scan"], false);
    assert!(j["notes"][0].as_str().unwrap().contains("ICKPT_NO_UFFD"));
    assert_eq!(j["backends"], serde_json::json!(["mprotect"]));
    assert_eq!(j["auto"], "mprotect");
    let no_scan = Command::new(env!("CARGO_BIN_EXE_ickpt"))
        .args(["probe", "--list"])
        .env("ICKPT_NO_PAGEMAP_SCAN", "1")
        .output()
        .unwrap();
    let listed = String::from_utf8(no_scan.stdout).unwrap();
    assert!(!listed.contains("uffd-async"), "{listed}");
    assert!(listed.lines().any(|l| l == "mprotect"), "{listed}");
}

#[test]
fn bench_tracking_runs_every_case_and_reports_exact_pages() {
    let dir = scratch("bench-tracking");
    let out = ickpt(&[
        "bench",
        "tracking",
        "--size-mib",
        "4",
        "--reps",
        "1",
        "--dir",
        dir.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let j = json(&out);
    let first = j["first_write"].as_array().unwrap();
    let available = ickpt::probe::available().unwrap();
    for b in &available {
        for order in ["sequential", "random"] {
            assert!(
                first
                    .iter()
                    .any(|c| c["tracker"] == b.as_str() && c["order"] == order),
                "{} {order} missing: {j}",
                b.as_str()
            );
        }
    }
    for c in first {
        if c["tracker"].as_str().unwrap().starts_with("raw-") {
            continue;
        }
        assert_eq!(c["backend_in_use"], c["tracker"], "{c}");
        assert!(c["tracked_ns_per_page"].as_f64().unwrap() > 0.0, "{c}");
    }
    let acck = j["acck"].as_array().unwrap();
    let per_workload: usize = available
        .iter()
        .map(|&b| if b == ickpt::Backend::UffdAsync { 1 } else { 2 })
        .sum();
    assert_eq!(acck.len(), 3 * per_workload, "{j}");
    for c in acck {
        let (written, stored) = (
            c["written_pages"].as_u64().unwrap(),
            c["stored_pages"].as_u64().unwrap(),
        );
        assert!(stored >= written, "{c}");
        if c["granularity"] == "page" {
            assert_eq!(stored, written, "page granularity stores exactly: {c}");
        }
    }
}

#[test]
fn benchmarks_never_delete_what_they_did_not_create() {
    // Outside testing: `bench incremental --dir D` deleted D and everything in it. Each
    // benchmark now works in a directory it makes inside D, and removes only that.
    let dir = scratch("bench-dirs");
    for (name, body) in [
        ("precious.txt", "mine"),
        ("store/a", "mine too"),
        ("baseline/b", "and this"),
    ] {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, body).unwrap();
    }
    let snapshot = |d: &Path| {
        let mut v: Vec<String> = walk(d)
            .into_iter()
            .map(|p| p.display().to_string())
            .collect();
        v.sort();
        v
    };
    let before = snapshot(&dir);
    let d = dir.to_str().unwrap();
    for args in [
        &small_bench_incremental(d)[..],
        &[
            "bench",
            "aickpt",
            "--size-mib",
            "2",
            "--iterations",
            "3",
            "--every",
            "1",
            "--patterns",
            "ascending",
            "--dir",
            d,
        ][..],
        &[
            "bench",
            "restore",
            "--size-mib",
            "2",
            "--reps",
            "1",
            "--dir",
            d,
        ][..],
    ] {
        let out = ickpt(args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        assert_eq!(
            snapshot(&dir),
            before,
            "{args:?} changed what it did not create"
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("precious.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn bench_incremental_reports_paired_ratios() {
    // `bench incremental` at its smallest: every comparison, each repetition's pair, the
    // keys scripts/bench-compare*.{sh,py} read, and the files --out writes.
    let dir = scratch("bench-incremental");
    let out_dir = dir.join("out");
    let out = ickpt(&[
        "bench",
        "incremental",
        "--size-mib",
        "2",
        "--reps",
        "2",
        "--dir",
        dir.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let j = json(&out);
    let backends = ["mprotect", "uffd", "uffd-async"];
    assert!(backends.contains(&j["backend"].as_str().unwrap()), "{j}");
    for key in ["machine", "cpu", "kernel", "git_commit"] {
        assert!(!j[key].as_str().unwrap().is_empty(), "{key}: {j}");
    }
    let positive = |v: &Value, what: &str| {
        let x = v
            .as_f64()
            .unwrap_or_else(|| panic!("{what} is not a number: {v}"));
        assert!(x > 0.0 && x.is_finite(), "{what} = {x}");
    };
    let comps = j["comparisons"].as_array().unwrap();
    let mut names = Vec::new();
    for c in comps {
        let name = c["name"].as_str().unwrap();
        names.push(format!("{name} {}", c["dirty_percent"]));
        for k in [
            "median_ratio",
            "min_ratio",
            "max_ratio",
            "ickpt_ms",
            "baseline_ms",
        ] {
            positive(&c[k], &format!("{name}.{k}"));
        }
        let reps = c["reps"].as_array().unwrap();
        assert_eq!(reps.len(), 2, "{c}");
        for (i, r) in reps.iter().enumerate() {
            positive(&r["ratio"], &format!("{name} rep {i} ratio"));
            assert_eq!(r["ickpt_first"], i % 2 == 0, "interleaved: {c}");
        }
    }
    for pct in [1, 10, 50, 100] {
        for name in [
            "sync_checkpoint",
            "sync_checkpoint_vs_writeback",
            "async_call",
            "async_call_and_wait",
        ] {
            assert!(
                names.contains(&format!("{name} {pct}")),
                "{name} {pct}: {names:?}"
            );
        }
    }
    for name in [
        "restore_warm",
        "restore_cold",
        "chain_restore_warm",
        "chain_restore_cold",
    ] {
        assert!(names.contains(&format!("{name} null")), "{name}: {names:?}");
    }
    // What the comparison scripts read.
    for c in j["cases"].as_array().unwrap() {
        positive(&c["checkpoint_ms"], "checkpoint_ms");
        positive(&c["plain_write_ms"], "plain_write_ms");
        for p in ["collect", "copy_and_crc", "release", "write", "commit"] {
            assert!(c["phases_ms"][p].is_number(), "{p}: {c}");
        }
    }
    positive(&j["restart"]["chain_ms"], "restart.chain_ms");
    positive(&j["restart"]["full_ms"], "restart.full_ms");
    assert_eq!(j["restart"]["chain_versions"], 10);
    positive(&j["full_checkpoint"]["ms"], "full_checkpoint.ms");

    let written: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("incremental.json")).unwrap()).unwrap();
    assert_eq!(written["comparisons"], j["comparisons"]);
    let csv = std::fs::read_to_string(out_dir.join("incremental.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 2 * comps.len(), "{csv}");
    let columns = lines[0].split(',').count();
    assert!(
        lines.iter().all(|l| l.split(',').count() == columns),
        "{csv}"
    );
    // Only its own work directory was made in --dir, and it is gone.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["out"], "{left:?}");
}

/// `bench incremental` at its smallest (2 MiB, one repetition), working in `dir`.
fn small_bench_incremental(dir: &str) -> [&str; 8] {
    [
        "bench",
        "incremental",
        "--size-mib",
        "2",
        "--reps",
        "1",
        "--dir",
        dir,
    ]
}

/// Every file and directory below `d`.
fn walk(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

#[test]
fn after_counts_are_shown_only_for_the_version_they_follow() {
    // Outside testing: ls/inspect showed version v+1's after_previous as v's AFTER count even
    // when v+1 was written by another process (after a restart), whose writes say nothing
    // about v. Format 3 records which version after_previous follows.
    let dir = scratch("after");
    {
        let e = Engine::open(Config::new(&dir)).unwrap();
        let p = e.alloc(1, 4 * PS).unwrap();
        for v in 1..=2u8 {
            // SAFETY: alloc returned 4 pages, live while `e` lives.
            unsafe { *p.add(PS * v as usize) = v };
            e.checkpoint().unwrap();
        }
    }
    {
        // A restart: restore version 2, then write version 3.
        let e = Engine::open(Config::new(&dir)).unwrap();
        let p = e.alloc(1, 4 * PS).unwrap();
        e.restore(2).unwrap();
        // SAFETY: as above.
        unsafe { *p = 3 };
        assert_eq!(e.checkpoint().unwrap().version, 3);
        // SAFETY: as above.
        unsafe { *p.add(1) = 4 };
        assert_eq!(e.checkpoint().unwrap().version, 4);
    }
    let d = dir.to_str().unwrap();
    let ls = json(&ickpt(&["ls", "--dir", d, "--json"]));
    let after: Vec<&Value> = ls["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| &v["stats"]["after"])
        .collect();
    // 1 is followed by 2 in the same process; 2 by nothing of its process (3 came after a
    // restart); 3 by 4; 4 by nothing yet.
    assert!(after[0].is_u64() && after[2].is_u64(), "{ls}");
    assert!(after[1].is_null() && after[3].is_null(), "{ls}");
    let insp = json(&ickpt(&["inspect", "--dir", d, "--json", "2"]));
    assert!(insp["stats"]["after"].is_null(), "{insp}");
    let insp = json(&ickpt(&["inspect", "--dir", d, "--json", "3"]));
    assert_eq!(insp["stats"]["after"], after[2].clone(), "{insp}");
}

#[test]
fn errors_say_what_is_wrong_and_come_as_json_with_json() {
    let dir = scratch("errors");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let missing = dir.join("missing");
    let cases: [(&[&str], &str); 3] = [
        (&["ls"], "no store directory: give --dir"),
        (
            &["ls", "--dir", missing.to_str().unwrap()],
            "does not exist",
        ),
        (
            &["verify", "--dir", file.to_str().unwrap()],
            "is a file, not a directory",
        ),
    ];
    for (args, want) in cases {
        let out = common::ickpt_no_dir(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(text(&out).contains(want), "{args:?}: {}", text(&out));
        // With --json, scripts get the error as JSON on stdout.
        let mut with_json = args.to_vec();
        with_json.push("--json");
        let out = Command::new(env!("CARGO_BIN_EXE_ickpt"))
            .args(&with_json)
            .env_remove("ICKPT_DIR")
            .output()
            .unwrap();
        assert!(!out.status.success());
        let j = json(&out);
        assert!(j["error"].as_str().unwrap().contains(want), "{j}");
        // ... and with --json before the command (clap's usage text before).
        let before: Vec<&str> = std::iter::once("--json")
            .chain(args.iter().copied())
            .collect();
        let out = Command::new(env!("CARGO_BIN_EXE_ickpt"))
            .args(&before)
            .env_remove("ICKPT_DIR")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{before:?}: {}", text(&out));
        let j = json(&out);
        assert!(j["error"].as_str().unwrap().contains(want), "{j}");
    }
    // A version that is not there: the message lists what the store holds.
    let store = scratch("errors-store");
    make_store(&store);
    let out = ickpt(&["inspect", "--dir", store.to_str().unwrap(), "42"]);
    assert!(text(&out).contains("it holds: 1-4"), "{}", text(&out));
}

#[test]
fn benchmarks_work_under_any_umask_and_name_a_bad_dir() {
    // Outside testing: under umask 000 the benchmark made its stores 0777 and the writer then
    // refused them as writable by others; `--dir FILE` said "File exists (os error 17)".
    let dir = scratch("bench-umask");
    let d = dir.to_str().unwrap();
    let out = Command::new("sh")
        .args(["-c", "umask 000; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_ickpt"))
        .args(small_bench_incremental(d))
        .output()
        .unwrap();
    assert!(out.status.success(), "under umask 000: {}", text(&out));
    let file = dir.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let f = file.to_str().unwrap();
    let out = ickpt(&["bench", "incremental", "--size-mib", "2", "--dir", f]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains(&format!("{f} is not a directory")),
        "{}",
        text(&out)
    );
}

#[test]
fn merge_combines_two_deltas_the_later_winning_and_refuses_other_layouts() {
    use ickpt::format::{DeltaFile, RegionDelta};
    let dir = scratch("merge");
    std::fs::create_dir_all(&*dir).unwrap();
    let delta = |len: u64, words: Vec<(u64, [u8; 4])>| DeltaFile {
        page_size: 4096,
        saves: 1,
        regions: vec![RegionDelta {
            id: 3,
            length: len,
            words,
        }],
    };
    let (a, b, c, odd) = (dir.join("a"), dir.join("b"), dir.join("c"), dir.join("odd"));
    std::fs::write(&a, delta(100, vec![(0, [1; 4]), (8, [1; 4])]).encode()).unwrap();
    std::fs::write(&b, delta(100, vec![(8, [2; 4]), (96, [2; 4])]).encode()).unwrap();
    std::fs::write(&odd, delta(104, vec![(8, [2; 4])]).encode()).unwrap();
    let p = |x: &Path| x.to_str().unwrap().to_string();
    let r = ickpt(&["--json", "merge", &p(&a), &p(&b), "-o", &p(&c)]);
    assert!(r.status.success(), "{}", text(&r));
    assert_eq!(json(&r)["words"], 3);
    let m = DeltaFile::decode(&std::fs::read(&c).unwrap()).unwrap();
    assert_eq!(
        m.regions[0].words,
        vec![(0, [1; 4]), (8, [2; 4]), (96, [2; 4])]
    );
    assert_eq!(m.saves, 2);
    // Owner-only, whatever the umask (it holds application memory).
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&c).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A symbolic link as output is refused, not replaced.
    let link = dir.join("link");
    std::os::unix::fs::symlink(&c, &link).unwrap();
    let t = text(&ickpt(&["merge", &p(&a), &p(&b), "-o", &p(&link)]));
    assert!(t.contains("symbolic link"), "{t}");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    // Other regions: refused, naming both files, and nothing written.
    let r = ickpt(&["merge", &p(&a), &p(&odd), "-o", &p(&dir.join("no"))]);
    assert!(!r.status.success());
    let t = text(&r);
    assert!(
        t.contains("different regions") && t.contains(&p(&odd)),
        "{t}"
    );
    assert!(!dir.join("no").exists());
    // A damaged input names itself.
    let mut bad = std::fs::read(&a).unwrap();
    bad[40] ^= 1;
    std::fs::write(&a, bad).unwrap();
    let t = text(&ickpt(&["merge", &p(&a), &p(&b), "-o", &p(&c)]));
    assert!(t.contains(&p(&a)) && t.contains("checksum"), "{t}");
}

#[test]
fn sections_lists_the_saves_and_names_a_damaged_one() {
    let dir = scratch("sections");
    {
        let e = Engine::open(Config::new(&*dir)).unwrap();
        let mut buf = vec![0u8; 3 * 4096];
        // SAFETY: the buffer outlives the engine (dropped at the end of this block first).
        unsafe { e.protect(1, buf.as_mut_ptr(), buf.len()).unwrap() };
        e.section_start().unwrap();
        for i in 0..3u8 {
            buf[100 * i as usize] = i + 1;
            e.section_save("loop").unwrap();
        }
        e.section_stop().unwrap();
        drop(e);
        drop(buf);
    }
    let d = dir.to_str().unwrap();
    let r = ickpt(&["--json", "sections", "--dir", d]);
    assert!(r.status.success(), "{}", text(&r));
    let v = json(&r);
    let saves = v["saves"].as_array().unwrap();
    assert_eq!(saves.len(), 1);
    assert_eq!(
        (
            &saves[0]["name"],
            &saves[0]["saves"],
            &saves[0]["words"],
            &saves[0]["ok"]
        ),
        (
            &Value::from("loop"),
            &Value::from(3),
            &Value::from(3),
            &Value::from(true)
        )
    );
    let t = text(&ickpt(&["sections", "--dir", d]));
    assert!(t.contains("loop") && t.contains("ok"), "{t}");
    // A damaged save: exit 1, its file and the problem named.
    let file = saves[0]["file"].as_str().unwrap().to_string();
    flip(Path::new(&file), 40);
    let r = ickpt(&["sections", "--dir", d]);
    assert!(!r.status.success());
    assert!(
        text(&r).contains(&file) && text(&r).contains("checksum"),
        "{}",
        text(&r)
    );
}

#[test]
fn inspect_shows_raw_and_stored_bytes() {
    let dir = scratch("inspect-compressed");
    let mut cfg = Config::new(&*dir);
    cfg.compression = ickpt::Compression::FAST;
    make_store_with(cfg);
    let d = dir.to_str().unwrap();
    let j = json(&ickpt(&["inspect", "--dir", d, "--json", "1"]));
    let p = &j["page_data"];
    assert_eq!(p["raw_bytes"], (PAGES * PS) as u64, "{j}");
    let stored = p["stored_bytes"].as_u64().unwrap();
    // Version 1's bytes count up, page after page: zstd takes them to a fraction.
    assert!(stored > 0 && stored < (PAGES * PS / 4) as u64, "{j}");
    assert!(p["frames"]["zstd"].as_u64().unwrap() >= 1, "{j}");
    let human = text(&ickpt(&["inspect", "--dir", d, "1"]));
    assert!(
        human.contains("page data") && human.contains("raw") && human.contains("zstd"),
        "{human}"
    );
    // A raw store says so.
    let raw = scratch("inspect-raw");
    let mut cfg = Config::new(&*raw);
    cfg.compression = ickpt::Compression::Off;
    make_store_with(cfg);
    let j = json(&ickpt(&[
        "inspect",
        "--dir",
        raw.to_str().unwrap(),
        "--json",
        "1",
    ]));
    assert_eq!(j["page_data"]["stored_bytes"], (PAGES * PS) as u64, "{j}");
}

#[test]
fn bench_drain_and_compress_measure_against_their_baselines() {
    let dir = scratch("bench-drain");
    let d = dir.to_str().unwrap();
    let r = ickpt(&[
        "--json",
        "bench",
        "drain",
        "--dir",
        d,
        "--size-mib",
        "4",
        "--reps",
        "1",
    ]);
    assert!(r.status.success(), "{}", text(&r));
    let j = json(&r);
    // A full version and 9 increments, drained and copied.
    assert_eq!(j["files"], 10, "{j}");
    let cases: Vec<&str> = j["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["case"].as_str().unwrap())
        .collect();
    assert_eq!(cases, ["drain to shared dir", "plain copy"], "{j}");
    assert_eq!(j["cases"][1]["over_plain"], 1.0, "{j}");
    let r = ickpt(&[
        "--json",
        "bench",
        "compress",
        "--dir",
        d,
        "--random-mib",
        "2",
        "--reps",
        "1",
        "--levels",
        "-3,1",
    ]);
    assert!(r.status.success(), "{}", text(&r));
    let j = json(&r);
    let random = &j["corpora"][0];
    assert_eq!(random["corpus"], "random", "{j}");
    // Off and the two levels; random bytes never shrink, so the frames stay raw.
    let levels: Vec<&str> = random["codec"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["level"].as_str().unwrap())
        .collect();
    assert_eq!(levels, ["off", "-3", "1"], "{j}");
    assert!(random["codec"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["stored_bytes"] == 2 << 20));
    assert_eq!(random["sync_checkpoint"][0]["ratio_to_off"], 1.0, "{j}");
    assert!(dir.exists() && std::fs::read_dir(&*dir).unwrap().next().is_none());
}

#[test]
fn bench_policy_runs_both_policies_on_the_phases_given() {
    let dir = scratch("bench-policy");
    let r = ickpt(&[
        "--json",
        "bench",
        "policy",
        "--dir",
        dir.to_str().unwrap(),
        "--size-mib",
        "4",
        "--reps",
        "1",
        "--phases",
        "100:3,1:2",
    ]);
    assert!(r.status.success(), "{}", text(&r));
    let j = json(&r);
    // Fixed: one full version in five. Cost: the full one, one increment to measure, a full
    // one while every page is rewritten and one checkpoint after (the kind is chosen before
    // the pages are collected), then an increment, which that full version predicts from the
    // pages written since the one before: every decision here follows from sizes, not times.
    assert_eq!(j["fixed"]["fulls"], 1, "{j}");
    assert_eq!(j["cost"]["fulls"], 3, "{j}");
    assert_eq!(j["cost"]["runs"][0]["kinds"], "FIFFI", "{j}");
    assert_eq!(j["cost"]["chain_versions"][1], 2, "{j}");
    assert_eq!(j["fixed"]["chain_versions"][1], 5, "{j}");
    for p in ["fixed", "cost"] {
        let ms = j[p]["restore_ms"].as_array().unwrap();
        assert!(
            ms.len() == 2 && ms.iter().all(|m| m.as_f64().unwrap() > 0.0),
            "{j}"
        );
    }
    // Its own working directory is gone; the one given stays.
    assert!(dir.exists() && std::fs::read_dir(&*dir).unwrap().next().is_none());
}
