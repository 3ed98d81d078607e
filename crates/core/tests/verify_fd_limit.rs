//! `verify` and restore on a long chain under a low open-file limit: outside testing made a
//! 3000-version chain with `ulimit -n 1024` report 1981 false problems, because every file
//! was kept open. A survey and a restore read one file at a time (review: `ickpt_latest`
//! then named a stale version, and restore failed). Own binary: the limit is the process's.

mod common;
use common::{env_knob, scratch_dir};
use ickpt::{Config, Engine};

#[test]
fn a_chain_longer_than_the_open_file_limit_verifies() {
    let versions: u64 = env_knob("ICKPT_LONG_CHAIN", 1500);
    let limit: u64 = 256;
    let dir = scratch_dir("long-chain");
    let mut cfg = Config::new(&dir);
    cfg.full_every = u32::MAX;
    let e = Engine::open(cfg).unwrap();
    let p = e.alloc(1, 4096).unwrap();
    for i in 0..versions {
        // SAFETY: alloc returned a page, live while `e` lives.
        unsafe { *p.add((i % 4096) as usize) = i as u8 };
        e.checkpoint().unwrap();
    }
    drop(e);

    let rl = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: setrlimit with a valid struct; lowering the limit is always allowed.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) }, 0);
    assert!(
        versions > 2 * limit,
        "the chain must outnumber the descriptors"
    );
    let store = ickpt::store::DirStore::open_read(&dir).unwrap();
    let report = ickpt::read::verify::verify_store(&store, &mut |_, _| {}).unwrap();
    assert!(
        report.problems.is_empty(),
        "{:?}",
        &report.problems[..3.min(report.problems.len())]
    );
    assert_eq!(report.restorable.len() as u64, versions);

    // A restore opens its chain's files one at a time too: the newest version restores.
    let e = Engine::open(Config::new(&dir)).unwrap();
    let p = e.alloc(1, 4096).unwrap();
    assert_eq!(e.latest().unwrap(), Some(versions));
    let info = e.restore_latest().unwrap().unwrap();
    assert_eq!((info.version, info.chain_len as u64), (versions, versions));
    for i in versions - 4096.min(versions)..versions {
        // SAFETY: alloc returned a page, live while `e` lives.
        let got = unsafe { *p.add((i % 4096) as usize) };
        assert_eq!(got, i as u8, "byte {}", i % 4096);
    }
}
