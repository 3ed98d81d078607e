//! The cost policy in a running engine: full versions while every page is rewritten (an
//! increment would be as large as a full one), increments again once few are, and a new
//! chain after a restore (it has no full version of its own to weigh against). Only the
//! decisions sizes make are asserted: those that weigh times depend on this machine's speed.

use crate::common;
use common::scratch_dir;
use ickpt::format::Kind::{self, Full, Incremental};
use ickpt::policy::KindPolicy;
use ickpt::{Config, Engine};

const PS: usize = 4096;
const PAGES: usize = 32;

fn kinds(e: &Engine, mem: &mut [u8], rounds: u8, pages: usize) -> Vec<Kind> {
    (1..=rounds)
        .map(|r| {
            mem[..pages * PS].fill(r);
            e.checkpoint().unwrap().kind
        })
        .collect()
}

#[test]
fn full_versions_while_every_page_is_rewritten_and_increments_once_few_are() {
    let dir = scratch_dir("cost-policy");
    let mut c = Config::new(&dir);
    c.policy = KindPolicy::Cost;
    c.full_every = 1000;
    let e = Engine::open(c).unwrap();
    let p = e.alloc(1, PAGES * PS).unwrap();
    // SAFETY: alloc returned PAGES*PS bytes, live while `e` lives.
    let mem = unsafe { std::slice::from_raw_parts_mut(p, PAGES * PS) };
    // The first is full (no chain), the second an increment (the first full version armed
    // the region: it saw nothing written, so nothing is measured yet); from the third on,
    // every increment would be as large as the full version (measured, then predicted by the
    // full versions from the pages written).
    assert_eq!(
        kinds(&e, mem, 6, PAGES),
        vec![Full, Incremental, Full, Full, Full, Full]
    );
    // Then one page of 32 rewritten: the kind is chosen before the pages are collected, so
    // the first such checkpoint is still weighed by the epoch before (full); the full version
    // it makes saw 1 page in 32 written and predicts a small increment.
    assert_eq!(kinds(&e, mem, 2, 1), vec![Full, Incremental]);
    // After a restore the engine has no full version of its own to weigh: full.
    e.restore(8).unwrap();
    assert_eq!(kinds(&e, mem, 1, 1), vec![Full]);
    // The fixed policy, for contrast, increments after the same restore.
    drop(e);
    let mut c = Config::new(&dir);
    c.full_every = 1000;
    let e = Engine::open(c).unwrap();
    let p = e.alloc(1, PAGES * PS).unwrap();
    // SAFETY: as above.
    let mem = unsafe { std::slice::from_raw_parts_mut(p, PAGES * PS) };
    e.restore_latest().unwrap();
    assert_eq!(kinds(&e, mem, 2, PAGES), vec![Incremental, Incremental]);
}
