//! A drain run by another process than the store's writer (`ickpt run`'s supervisor, to the
//! bucket): the writer, told `drained_elsewhere`, collects only what the outside drain's mark
//! says is copied; the outside drain's rounds copy every version, collect the lower tier as
//! the engine's own drain would, and move the mark.

use crate::common::{scratch_dir, Buf};
use crate::tiers::versions_in;
use ickpt::store::{DirStore, Tier};
use ickpt::{Config, Engine, OutsideDrain};
use std::sync::Arc;

const PS: usize = 4096;
const PAGES: usize = 16;

fn checkpoints(e: &Engine, buf: &mut Buf, rounds: std::ops::Range<u8>) {
    for round in rounds {
        buf.slice_mut()[..PS].fill(round);
        e.checkpoint().unwrap();
    }
}

#[test]
fn the_writer_keeps_what_the_outside_drain_has_not_copied() {
    let (local, bucket) = (scratch_dir("outside-local"), scratch_dir("outside-bucket"));
    let mut c = Config::new(&*local);
    c.full_every = 1;
    c.keep_chains = 1;
    c.drained_elsewhere = true;
    let mut buf = Buf::new(PAGES * PS);
    let e = Engine::open(c.clone()).unwrap();
    // SAFETY: `buf` outlives the engine (dropped after it).
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    checkpoints(&e, &mut buf, 1..4);
    // No mark yet: nothing is known to be copied, so every full version stays.
    assert_eq!(versions_in(&local), vec![1, 2, 3]);
    let lower = vec![Tier {
        name: "object",
        store: Arc::new(DirStore::open_write(&bucket).unwrap()),
    }];
    let drain = OutsideDrain::start(&c, lower).unwrap();
    drain.round().unwrap();
    assert_eq!(drain.drained(), 3);
    // The lower tier keeps what the first tier still holds.
    assert_eq!(versions_in(&bucket), vec![1, 2, 3]);
    assert_eq!(
        std::fs::read_to_string(local.join("ickpt-drained")).unwrap(),
        "3\n"
    );
    // The writer's next collections read the mark: what is copied may go, what is not (4,
    // once 5 is there) stays.
    checkpoints(&e, &mut buf, 4..6);
    assert_eq!(versions_in(&local), vec![4, 5]);
    drain.round().unwrap();
    assert_eq!(versions_in(&bucket), vec![4, 5]);
    checkpoints(&e, &mut buf, 6..7);
    assert_eq!(versions_in(&local), vec![6]);
    drain.round().unwrap();
    assert_eq!(versions_in(&bucket), vec![6]);
    drop(drain);
    drop(e);
}
