//! `ls`, `verify` and `prune` on an MPI job directory (what a user set as ICKPT_DIR): every
//! rank's store read, the global versions shown, and the one a restart takes named; the
//! commands that read one store name the rank directory to give instead.

use ickpt::store::version_name;
use ickpt::{Config, Engine};
use serde_json::json;
use std::path::Path;

mod common;
use common::{ickpt, json, scratch, text};

const PS: usize = 4096;

/// A job of `ranks` ranks as the MPI layer leaves it: the job file, and in each rank's store
/// versions 1-4 recorded as global versions 1-4 (full_every 2).
fn make_job(job: &Path, ranks: u32) {
    std::fs::create_dir_all(job).unwrap();
    std::fs::write(
        job.join("ickpt-job"),
        format!("ickpt MPI job, format 1\nranks {ranks}\n"),
    )
    .unwrap();
    for r in 0..ranks {
        let mut c = Config::new(job.join(format!("rank-{r:05}")));
        c.full_every = 2;
        c.keep_chains = 10;
        let e = Engine::open(c).unwrap();
        let p = e.alloc(1, 4 * PS).unwrap();
        for g in 1..=4u64 {
            // SAFETY: alloc returned 4 pages, live while `e` lives.
            unsafe {
                p.add((g as usize % 4) * PS)
                    .write_bytes(g as u8 + r as u8, PS)
            };
            let v = e.checkpoint().unwrap().version;
            e.global_commit(g, v).unwrap();
        }
    }
}

#[test]
fn ls_and_verify_on_a_job_directory_show_the_global_versions_and_the_restart() {
    let job = scratch("job");
    make_job(&job, 3);
    let j = job.to_str().unwrap();
    let ls = json(&ickpt(&["ls", "--dir", j, "--json"]));
    assert_eq!(ls["ranks"], 3);
    assert_eq!(ls["restart_global"], 4);
    // Each store keeps the records of the newest two global versions.
    let globals: Vec<u64> = ls["globals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["global"].as_u64().unwrap())
        .collect();
    assert_eq!(globals, vec![4, 3], "{ls}");
    assert_eq!(ls["globals"][0]["complete"], true);
    let table = text(&ickpt(&["ls", "--dir", j]));
    assert!(
        table.contains("3 rank(s)")
            && table.contains("GLOBAL")
            && table.contains("a restart of the job takes global version 4"),
        "{table}"
    );
    let out = ickpt(&["verify", "--dir", j]);
    assert!(out.status.success(), "{}", text(&out));
    let v = json(&ickpt(&["verify", "--dir", j, "--json"]));
    assert_eq!(v["ok"], true);
    assert_eq!(v["restart_global"], 4);
    assert_eq!(v["restart_restores"], true);
    assert_eq!(v["stores"].as_array().unwrap().len(), 3);

    // Rank 1's version of global 4 damaged: verify names the rank, and the restart fails
    // there (the MPI layer agrees on global 4 and rank 1 cannot restore it).
    let file = job.join("rank-00001").join(version_name(4));
    let mut b = std::fs::read(&file).unwrap();
    b[4096 + 9] ^= 0x10;
    std::fs::write(&file, b).unwrap();
    let out = ickpt(&["verify", "--dir", j]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("rank 1") && t.contains("FAILS on rank(s) 1") && t.contains("rank-00001"),
        "{t}"
    );
    let v = json(&ickpt(&["verify", "--dir", j, "--json"]));
    assert_eq!(v["restart_restores"], false);
    assert_eq!(
        v["globals"][0]["ranks"][1],
        json!({"rank": 1, "version": 4, "restorable": false})
    );
}

#[test]
fn commands_of_one_store_name_a_rank_directory_and_prune_prunes_every_rank() {
    let job = scratch("job-one");
    make_job(&job, 2);
    let j = job.to_str().unwrap();
    let out = ickpt(&["inspect", "--dir", j]);
    assert!(!out.status.success());
    let rank0 = job.join("rank-00000");
    assert!(
        text(&out).contains("MPI job directory") && text(&out).contains(rank0.to_str().unwrap()),
        "{}",
        text(&out)
    );
    // Globals 3 and 4 (versions 3, 4: one chain) are kept by their records; chain 1-2 goes.
    let out = ickpt(&["prune", "--dir", j, "--keep-chains", "1", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let p = json(&out);
    for r in 0..2 {
        let removed: Vec<u64> = p["stores"][r]["removed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["version"].as_u64().unwrap())
            .collect();
        assert_eq!(removed, vec![2, 1], "rank {r}: {p}");
    }
    let ls = json(&ickpt(&["ls", "--dir", j, "--json"]));
    assert_eq!(ls["restart_global"], 4);
}
