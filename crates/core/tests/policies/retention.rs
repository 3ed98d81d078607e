//! Retention: the limits by chains, by count and by age hold after every commit, on every
//! tier, and never take what a kept version's restore reads; `maintain` (behind `ickpt prune`
//! and `ickpt rm`) plans the same and refuses to break a chain or an MPI restart point.

use crate::common;
use common::scratch_dir;
use ickpt::maintain::{self, RmOptions};
use ickpt::policy::Retention;
use ickpt::store::{version_name, DirStore, Tier};
use ickpt::{Config, Engine, MaintainError};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const PS: usize = 4096;
const PAGES: usize = 8;

fn versions_in(dir: &Path) -> BTreeSet<u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| ickpt::store::parse_version_name(e.unwrap().file_name().to_str()?))
        .collect()
}

/// With full_every 3: version v's parent is v-1 unless v is 1, 4, 7, ... (full).
fn chain_of(v: u64) -> BTreeSet<u64> {
    let full = v - (v - 1) % 3;
    (full..=v).collect()
}

/// Checkpoint `rounds` times, each after rewriting one page; after each, `check(version)`.
fn run(e: &Engine, rounds: u64, mut check: impl FnMut(u64, &[u8])) {
    let p = e.alloc(1, PAGES * PS).unwrap();
    // SAFETY: alloc returned PAGES*PS bytes, live while `e` lives.
    let mem = unsafe { std::slice::from_raw_parts_mut(p, PAGES * PS) };
    for r in 1..=rounds {
        let page = r as usize % PAGES;
        mem[page * PS..(page + 1) * PS].fill(r as u8);
        let info = e.checkpoint().unwrap();
        assert_eq!(info.version, r);
        check(r, mem);
    }
}

fn config(dir: &Path) -> Config {
    let mut c = Config::new(dir);
    c.full_every = 3;
    c.keep_chains = 100;
    c
}

#[test]
fn keep_versions_keeps_what_the_newest_restores_read_after_every_commit() {
    let dir = scratch_dir("retention-versions");
    let mut c = config(&dir);
    c.keep_versions = 2;
    let e = Engine::open(c).unwrap();
    let mut last = Vec::new();
    run(&e, 11, |v, mem| {
        let mut want = chain_of(v);
        if v > 1 {
            want.extend(chain_of(v - 1));
        }
        assert_eq!(versions_in(&dir), want, "after version {v}");
        last = mem.to_vec();
    });
    drop(e);
    // What is left restores: the newest and the one before it.
    let e = Engine::open(config(&dir)).unwrap();
    let p = e.alloc(1, PAGES * PS).unwrap();
    e.restore(11).unwrap();
    // SAFETY: as in `run`.
    let mem = unsafe { std::slice::from_raw_parts(p, PAGES * PS) };
    assert_eq!(mem, &last[..]);
    e.restore(10).unwrap();
}

#[test]
fn keep_within_keeps_the_newest_chain_however_old_and_everything_recent() {
    let dir = scratch_dir("retention-within-short");
    let mut c = config(&dir);
    // Every version is older than this by the time the next commits.
    c.keep_within = Some(Duration::from_nanos(1));
    let e = Engine::open(c).unwrap();
    run(&e, 8, |v, _| {
        assert_eq!(versions_in(&dir), chain_of(v), "after {v}")
    });
    drop(e);

    let dir = scratch_dir("retention-within-long");
    let mut c = config(&dir);
    c.keep_within = Some(Duration::from_secs(3600));
    c.keep_chains = 2;
    let e = Engine::open(c).unwrap();
    // An hour keeps everything; the chain limit still takes what it always took.
    run(&e, 8, |v, _| {
        let newest_full = v - (v - 1) % 3;
        let first = newest_full.saturating_sub(3).max(1);
        assert_eq!(versions_in(&dir), (first..=v).collect(), "after {v}");
    });
}

#[test]
fn each_tier_keeps_what_the_policy_keeps_there() {
    let local = scratch_dir("retention-tier-local");
    let shared = scratch_dir("retention-tier-shared");
    let mut c = config(&local);
    c.shared_dir = Some(shared.to_path_buf());
    c.keep_versions = 1;
    let e = Engine::open(c).unwrap();
    run(&e, 7, |_, _| {});
    e.wait_drained().unwrap();
    // The drain's collection of the shared tier follows the first tier's.
    let want = chain_of(7);
    assert_eq!(versions_in(&local), want);
    assert_eq!(versions_in(&shared), want);
}

fn tiers(dirs: &[(&'static str, &Path)]) -> Vec<Tier> {
    dirs.iter()
        .map(|&(name, d)| Tier {
            name,
            store: Arc::new(DirStore::open_write(d).unwrap()),
        })
        .collect()
}

#[test]
fn prune_keeps_what_the_drain_has_not_copied_and_what_a_faster_tier_holds() {
    let local = scratch_dir("retention-prune-local");
    let shared = scratch_dir("retention-prune-shared");
    let mut c = config(&local);
    c.shared_dir = Some(shared.to_path_buf());
    let e = Engine::open(c).unwrap();
    run(&e, 8, |_, _| {});
    e.wait_drained().unwrap();
    drop(e);
    // As if the drain had not yet copied 7 and 8, and the shared tier's own collection had
    // taken 2 (a version missing below a slower tier's newest was collected there, not left
    // undrained: it pins nothing).
    for v in [2, 7, 8] {
        std::fs::remove_file(shared.join(version_name(v))).unwrap();
    }
    let t = tiers(&[("local", &local), ("shared", &shared)]);
    let keep_one_chain = Retention {
        chains: 1,
        versions: None,
        within: None,
    };
    let plan = maintain::plan_prune(&t, Some(&keep_one_chain)).unwrap();
    let gone = |tier| -> Vec<u64> {
        plan.iter()
            .filter(|r| r.tier == tier)
            .map(|r| r.version)
            .collect()
    };
    // Local keeps the newest chain, 7 and 8 (undrained besides). The shared tier's newest
    // is 6: its chain stays there, a restart that lost the node restores it; 1 goes, and so
    // does 3, an orphan there (its parent is gone, and no restore from that tier can use it).
    assert_eq!(gone("local"), vec![6, 5, 4, 3, 2, 1]);
    assert_eq!(gone("shared"), vec![1, 3]);
    assert!(plan.iter().all(|r| r.bytes > 0));
    // Planning removed nothing; carrying it out removes exactly the plan.
    assert_eq!(versions_in(&local), (1..=8).collect());
    maintain::apply(&t, &plan, |_| {}).unwrap();
    assert_eq!(versions_in(&local), [7, 8].into());
    assert_eq!(versions_in(&shared), [4, 5, 6].into());
}

#[test]
fn rm_refuses_to_break_a_chain_or_a_restart_point_unless_told() {
    let dir = scratch_dir("retention-rm");
    let e = Engine::open(config(&dir)).unwrap();
    run(&e, 6, |_, _| {});
    e.global_commit(1, 2).unwrap();
    drop(e);
    let t = tiers(&[("local", &dir)]);
    let plan = |vs: &[u64], with_dependents, force| {
        maintain::plan_rm(
            &t,
            vs,
            RmOptions {
                with_dependents,
                force,
            },
        )
    };
    // 5 is read by 6.
    match plan(&[5], false, false) {
        Err(MaintainError::HasDependents {
            version,
            dependents,
            ..
        }) => assert_eq!((version, dependents.as_str()), (5, "6")),
        r => panic!("{r:?}"),
    }
    let both: Vec<u64> = plan(&[5], true, false)
        .unwrap()
        .iter()
        .map(|r| r.version)
        .collect();
    assert_eq!(both, vec![6, 5]);
    assert_eq!(plan(&[5, 6], false, false).unwrap().len(), 2);
    // 1 is read by 2, 3 and by global version 1's version 2.
    assert!(matches!(
        plan(&[1], true, false),
        Err(MaintainError::Global { version: 2, .. })
    ));
    assert!(matches!(
        plan(&[9], false, false),
        Err(MaintainError::NotFound { version: 9, .. })
    ));
    let forced = plan(&[1], true, true).unwrap();
    maintain::apply(&t, &forced, |_| {}).unwrap();
    assert_eq!(versions_in(&dir), [4, 5, 6].into());
}
