//! Fault-around: one write fault opens the aligned block of pages around it that the last
//! epoch wrote (taken by the last commit), so an iterative code pays one trap per block;
//! pages the last epoch did not write keep their own trap, and so do a region's first and
//! last page (they may hold another region's bytes). Opened pages count as written.

use crate::common;
use common::{scratch_dir, Buf};
use ickpt::{Backend, Config, Engine};

const PS: usize = 4096;

#[test]
fn a_fault_opens_the_block_of_pages_the_last_epoch_wrote() {
    let dir = scratch_dir("fault-around");
    let mut c = Config::new(&dir);
    c.fault_around = 16;
    c.full_every = 100;
    let e = Engine::open(c).unwrap();
    let mut buf = Buf::new(32 * PS);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    let mem = buf.slice_mut();
    mem.fill(1);
    assert_eq!(e.checkpoint().unwrap().pages, 32, "first version: whole");
    let faults = |e: &Engine| e.stats().faults;
    if e.backend() == Backend::UffdAsync {
        // Its first writes outside a commit never reach ickpt: nothing opens around them,
        // and a version holds exactly the pages written.
        mem[3 * PS] = 2;
        mem[5 * PS] = 2;
        mem[20 * PS] = 2;
        let v = e.checkpoint().unwrap();
        assert_eq!(v.pages, 3);
        let want = mem.to_vec();
        mem.fill(0);
        e.restore(v.version).unwrap();
        assert!(buf.slice() == &want[..]);
        return;
    }

    // Every page was taken by the last commit: one fault per 16-page block.
    let f0 = faults(&e);
    mem[3 * PS] = 2;
    mem[5 * PS] = 2;
    mem[20 * PS] = 2;
    assert_eq!(faults(&e) - f0, 2);
    // Both blocks were opened, except the region's edge pages 0 and 31.
    assert_eq!(e.checkpoint().unwrap().pages, 30);

    // Block 0's pages 1..16 open together; edge page 31 traps on its own and opens the
    // rest of block 1, which the last epoch wrote.
    let f1 = faults(&e);
    mem[7 * PS] = 3;
    mem[31 * PS] = 3;
    assert_eq!(faults(&e) - f1, 2);
    assert_eq!(e.checkpoint().unwrap().pages, 15 + 16);
    mem[9 * PS] = 4;
    assert_eq!(e.checkpoint().unwrap().pages, 15, "block 0 only");

    // Block 1 was not written in the last epoch: each page traps on its own again.
    let f2 = faults(&e);
    mem[17 * PS] = 5;
    mem[18 * PS] = 5;
    mem[2 * PS] = 5;
    assert_eq!(faults(&e) - f2, 3);
    let last = e.checkpoint().unwrap();
    assert_eq!(last.pages, 15 + 2);

    let want = mem.to_vec();
    mem.fill(0);
    e.restore(last.version).unwrap();
    assert!(buf.slice() == &want[..]);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}
