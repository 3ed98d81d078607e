//! `ickpt run --object`: the supervisor drains the program's local store to a bucket (Garage,
//! started here), and a restart on a node that lost the local store comes back from the
//! bucket alone. Generation after generation, the local directory is deleted after the kill;
//! the program must still end with the uninterrupted run's output, and the bucket must hold
//! every version it committed.

mod common;
#[path = "../../core/tests/common/garage.rs"]
#[allow(dead_code)]
mod garage;
use common::run::{
    assert_same, build_c, checkpoint_now, reference, restart_expecting, Proc, Program, LIMIT,
};
use common::{scratch, text};
use std::path::Path;
use std::time::Instant;

/// How far the supervisor's drain has copied the store `store` to the bucket (its mark).
fn drained(store: &Path) -> u64 {
    std::fs::read_to_string(store.join("ickpt-drained"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Wait until the bucket holds every version up to `v`.
fn wait_drained(store: &Path, v: u64, proc: &Proc) {
    let deadline = Instant::now() + LIMIT;
    while drained(store) < v {
        assert!(
            Instant::now() < deadline,
            "version {v} was not drained to the bucket within {LIMIT:?} (mark {}); stderr:\n{}",
            drained(store),
            proc.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn a_restart_from_the_bucket_alone_survives_two_kills() {
    let Some(bin) = garage::binary() else {
        return;
    };
    let tmp = scratch("run-object");
    std::fs::create_dir_all(tmp.as_path()).unwrap();
    let server = garage::Garage::start(&bin, &tmp.join("garage"));
    let url = format!("s3://{}/run-heat", garage::BUCKET);
    let mut p = Program::new(build_c("heat.c", &tmp), &["300", "65536"]);
    for (k, v) in server.env() {
        p = p.env(k, &v);
    }
    p.tiers = vec!["--object".into(), url.clone().into()];
    let want = reference(&p, &tmp);
    let store = tmp.join("store");
    let out = tmp.join("run.out");
    let mut proc = Proc::spawn(p.under_ickpt(&store, Some("200ms"), &out), "ickpt run");
    for generation in 0..2 {
        let v = checkpoint_now(&store, &proc);
        wait_drained(&store, v, &proc);
        proc.kill();
        // Another node: the local store is gone; the bucket has what was drained, at least v.
        std::fs::remove_dir_all(&store).unwrap();
        let newest = newest_in_bucket(&p, &url);
        assert!(
            newest >= v,
            "generation {generation}: the bucket's newest is {newest}, below {v}"
        );
        proc = restart_expecting(&p, &store, newest);
    }
    assert_same(proc, &out, &want);
    // The program ended: the supervisor's last round put its last version in the bucket.
    let last = drained(&store);
    assert_eq!(
        newest_in_bucket(&p, &url),
        last,
        "the bucket lacks the program's last versions"
    );
    let mut verify = std::process::Command::new(env!("CARGO_BIN_EXE_ickpt"));
    verify
        .args(["verify", "--dir"])
        .arg(&store)
        .args(["--object", &url]);
    verify.envs(p.env.iter().map(|(k, v)| (k, v)));
    let o = verify.output().unwrap();
    assert!(o.status.success(), "ickpt verify: {}", text(&o));
}

/// The newest version the bucket holds, by `ickpt ls` of the bucket alone.
fn newest_in_bucket(p: &Program, url: &str) -> u64 {
    let mut ls = std::process::Command::new(env!("CARGO_BIN_EXE_ickpt"));
    ls.args([
        "--json",
        "ls",
        "--dir",
        "/nonexistent-local-store",
        "--object",
        url,
    ]);
    ls.envs(p.env.iter().map(|(k, v)| (k, v)));
    let o = ls.output().unwrap();
    assert!(o.status.success(), "ickpt ls of the bucket: {}", text(&o));
    common::json(&o)["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["version"].as_u64())
        .max()
        .unwrap_or(0)
}
