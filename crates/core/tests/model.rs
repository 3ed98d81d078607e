//! Property test: random regions (any alignment), random writes from several threads,
//! random checkpoints, restores of older versions and restarts in a fresh engine, with
//! every full/incremental mix, in sync mode and in async mode (with no, a small and a large
//! copy-on-write buffer, either flush order), where the writes after a checkpoint run while
//! it commits, and with faults opening one page or blocks of 4 or 16. After every step, memory must equal a simple model, and every version the
//! snapshot the model took when it was requested.
//! ICKPT_PROPTEST_CASES sets the number of cases (default 32).

mod common;
use common::{scratch_dir, Buf};
use ickpt::format::{CommitMode, FlushOrder};
use ickpt::read::catalog;
use ickpt::{Config, Engine, ProtectError, ReadError, RestoreError};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

const PS: usize = 4096;

#[derive(Debug, Clone)]
enum Op {
    Protect {
        id: u64,
        pages: usize,
        offset: usize,
        len_cut: usize,
    },
    Unprotect {
        id: u64,
    },
    Write {
        writes: Vec<(usize, usize, usize)>,
        threads: usize,
    },
    Checkpoint,
    /// Threads write while a checkpoint runs; then a quiet checkpoint must hold everything.
    RacingCheckpoint {
        writes: Vec<(usize, usize, usize)>,
        threads: usize,
    },
    Restore {
        pick: prop::sample::Index,
    },
    Restart {
        offset: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0u64..4, 1usize..6, 0usize..PS, 0usize..PS)
            .prop_map(|(id, pages, offset, len_cut)| Op::Protect { id, pages, offset, len_cut }),
        1 => (0u64..4).prop_map(|id| Op::Unprotect { id }),
        5 => (prop::collection::vec((any::<usize>(), any::<usize>(), 1usize..3 * PS), 1..12), 1usize..4)
            .prop_map(|(writes, threads)| Op::Write { writes, threads }),
        4 => Just(Op::Checkpoint),
        2 => (prop::collection::vec((any::<usize>(), any::<usize>(), 1usize..3 * PS), 1..12), 1usize..4)
            .prop_map(|(writes, threads)| Op::RacingCheckpoint { writes, threads }),
        1 => any::<prop::sample::Index>().prop_map(|pick| Op::Restore { pick }),
        1 => (0usize..PS).prop_map(|offset| Op::Restart { offset }),
    ]
}

/// One protected region: its memory and what it must contain.
struct Live {
    buf: Buf,
    offset: usize,
    len: usize,
    model: Vec<u8>,
}

impl Live {
    fn new(id: u64, len: usize, offset: usize) -> Live {
        let buf = Buf::new((offset + len).div_ceil(PS) * PS);
        let mut l = Live {
            buf,
            offset,
            len,
            model: vec![0; len],
        };
        for (i, b) in l.model.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(13) ^ id as u8;
        }
        let (o, n) = (l.offset, l.len);
        l.buf.slice_mut()[o..o + n].copy_from_slice(&l.model);
        l
    }
    fn ptr(&self) -> *mut u8 {
        // SAFETY: offset < the buffer's length.
        unsafe { self.buf.ptr.add(self.offset) }
    }
    fn memory(&self) -> &[u8] {
        &self.buf.slice()[self.offset..self.offset + self.len]
    }
}

/// Byte `at` of region `id` written in epoch `epoch`: the same whichever thread writes it,
/// so concurrent writers give one deterministic result.
fn value(epoch: u64, id: u64, at: usize) -> u8 {
    (epoch as u8).wrapping_mul(31) ^ (at as u8).wrapping_mul(7) ^ (id as u8) ^ 0x5a
}

/// Region id → contents.
type Snapshot = BTreeMap<u64, Vec<u8>>;

struct World {
    dir: std::path::PathBuf,
    engine: Option<Engine>,
    live: BTreeMap<u64, Live>,
    /// Committed versions with the region contents they hold (None: taken while threads
    /// wrote, so its exact content is unknown).
    versions: Vec<(u64, Option<Snapshot>)>,
    epoch: u64,
    full_every: u32,
    mode: Mode,
    around: usize,
    /// ACCK coarse-grained monitoring with 2^n pieces per region.
    acck: Option<u32>,
}

/// How the engine commits: sync, or async with a copy-on-write buffer of this many pages.
#[derive(Debug, Clone, Copy)]
enum Mode {
    Sync,
    Async { cow_pages: usize, order: FlushOrder },
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![
        Just(Mode::Sync),
        (prop::sample::select(vec![0usize, 2, 1024]), any::<bool>()).prop_map(
            |(cow_pages, adaptive)| {
                Mode::Async {
                    cow_pages,
                    order: if adaptive {
                        FlushOrder::Adaptive
                    } else {
                        FlushOrder::Address
                    },
                }
            }
        ),
    ]
}

impl World {
    fn snapshot(&self) -> Snapshot {
        self.live
            .iter()
            .map(|(id, l)| (*id, l.model.clone()))
            .collect()
    }

    /// Apply random writes from `threads` threads; with `racing`, a checkpoint runs on this
    /// thread while they write (each writer makes three passes so writes land before, during
    /// and after it).
    fn write(&mut self, writes: &[(usize, usize, usize)], threads: usize, racing: bool) {
        if self.live.is_empty() {
            return;
        }
        self.epoch += 1;
        let ids: Vec<u64> = self.live.keys().copied().collect();
        let plan: Vec<(u64, usize, usize)> = writes
            .iter()
            .map(|&(sel, start, len)| {
                let id = ids[sel % ids.len()];
                let l = &self.live[&id];
                let start = start % l.len;
                (id, start, len.min(l.len - start))
            })
            .collect();
        for &(id, start, len) in &plan {
            let m = &mut self.live.get_mut(&id).unwrap().model;
            for (at, b) in m.iter_mut().enumerate().skip(start).take(len) {
                *b = value(self.epoch, id, at);
            }
        }
        let ptrs: BTreeMap<u64, usize> = self
            .live
            .iter()
            .map(|(id, l)| (*id, l.ptr() as usize))
            .collect();
        let epoch = self.epoch;
        let engine = self.engine.as_ref().unwrap();
        let raced = std::thread::scope(|s| {
            for t in 0..threads {
                let (plan, ptrs) = (&plan, &ptrs);
                let passes = if racing { 3 } else { 1 };
                s.spawn(move || {
                    for (k, &(id, start, len)) in
                        plan.iter().enumerate().cycle().take(plan.len() * passes)
                    {
                        if k % threads != t {
                            continue;
                        }
                        for at in start..start + len {
                            // SAFETY: `at` is inside region `id`, whose memory lives
                            // for the scope; concurrent writers store equal values.
                            unsafe {
                                std::ptr::write_volatile(
                                    (ptrs[&id] + at) as *mut u8,
                                    value(epoch, id, at),
                                )
                            };
                        }
                    }
                });
            }
            racing.then(|| engine.checkpoint().unwrap().version)
        });
        if let Some(v) = raced {
            self.versions.push((v, None));
        }
    }

    fn engine(&self) -> &Engine {
        self.engine.as_ref().unwrap()
    }

    fn open(dir: &Path, full_every: u32, mode: Mode, around: usize, acck: Option<u32>) -> Engine {
        let mut c = Config::new(dir);
        c.full_every = full_every;
        c.fault_around = around;
        if let Some(n) = acck {
            c.granularity = ickpt::Granularity::Adaptive;
            c.acck_pieces_log2 = n;
        }
        c.keep_chains = 2;
        if let Mode::Async { cow_pages, order } = mode {
            c.mode = CommitMode::Async;
            c.cow_bytes = cow_pages * PS;
            c.flush_order = order;
            // Slow enough that the next writes run into the commit.
            c.bandwidth = Some(64 << 20);
        }
        Engine::open(c).unwrap()
    }

    fn check_memory(&self, ctx: &str) {
        for (id, l) in &self.live {
            assert!(
                l.memory() == &l.model[..],
                "{ctx}: region {id} differs from the model"
            );
        }
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Protect {
                id,
                pages,
                offset,
                len_cut,
            } => {
                let len = (pages * PS).saturating_sub(*len_cut).max(1);
                if self.live.contains_key(id) {
                    let other = Live::new(*id, len, *offset);
                    // SAFETY: `other` is mapped; the call fails before tracking anything.
                    let r = unsafe { self.engine().protect(*id, other.ptr(), len) };
                    assert!(matches!(r, Err(ProtectError::RegionExists(_))), "{r:?}");
                    return;
                }
                let l = Live::new(*id, len, *offset);
                // SAFETY: the buffer lives in `self.live` until unprotected or the engine drops.
                unsafe { self.engine().protect(*id, l.ptr(), len).unwrap() };
                self.live.insert(*id, l);
            }
            Op::Unprotect { id } => match self.live.remove(id) {
                Some(l) => {
                    self.engine().unprotect(*id).unwrap();
                    drop(l);
                }
                None => assert!(matches!(
                    self.engine().unprotect(*id),
                    Err(ProtectError::UnknownRegion(_))
                )),
            },
            Op::Write { writes, threads } => self.write(writes, *threads, false),
            Op::RacingCheckpoint { writes, threads } => {
                self.write(writes, *threads, true);
                // Nothing is written now: this version must hold every write, including
                // those that raced with the previous checkpoint, and restore them exactly.
                let info = self.engine().checkpoint().unwrap();
                self.versions.push((info.version, Some(self.snapshot())));
                self.engine().restore(info.version).unwrap();
            }
            Op::Checkpoint => {
                let info = self.engine().checkpoint().unwrap();
                self.versions.push((info.version, Some(self.snapshot())));
            }
            Op::Restore { pick } => {
                let exact: Vec<_> = self
                    .versions
                    .iter()
                    .filter_map(|(v, s)| s.clone().map(|s| (*v, s)))
                    .collect();
                if exact.is_empty() {
                    return;
                }
                let (v, snap) = exact[pick.index(exact.len())].clone();
                self.engine().wait().unwrap();
                let on_disk = catalog::versions(self.engine().store()).unwrap();
                let shapes_match = snap.len() == self.live.len()
                    && snap
                        .iter()
                        .all(|(id, m)| self.live.get(id).is_some_and(|l| l.len == m.len()));
                let r = self.engine().restore(v);
                if !on_disk.contains(&v) {
                    assert!(
                        matches!(r, Err(RestoreError::Read(ReadError::NotFound { .. }))),
                        "v{v}: {r:?}"
                    );
                } else if !shapes_match {
                    assert!(
                        matches!(r, Err(RestoreError::RegionMismatch { .. })),
                        "v{v}: {r:?}"
                    );
                } else {
                    r.unwrap();
                    for (id, m) in snap {
                        self.live.get_mut(&id).unwrap().model = m;
                    }
                }
            }
            Op::Restart { offset } => {
                self.engine = None;
                self.live.clear();
                let e = Self::open(
                    &self.dir,
                    self.full_every,
                    self.mode,
                    self.around,
                    self.acck,
                );
                if let Some((v, Some(snap))) = self.versions.last().cloned() {
                    assert_eq!(e.latest().unwrap(), Some(v));
                    for (id, m) in &snap {
                        // Fresh memory at another address and in-page offset, full of garbage.
                        let mut l =
                            Live::new(*id ^ 0xff, m.len(), (offset + *id as usize * 8) % PS);
                        // SAFETY: as for Protect.
                        unsafe { e.protect(*id, l.ptr(), m.len()).unwrap() };
                        l.model = m.clone();
                        self.live.insert(*id, l);
                    }
                    e.restore(v).unwrap();
                }
                self.engine = Some(e);
            }
        }
        self.check_memory(&format!("after {op:?}"));
    }
}

fn cases() -> u32 {
    common::env_knob("ICKPT_PROPTEST_CASES", 48)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn restore_always_equals_the_model(
        full_every in 1u32..5,
        mode in mode(),
        around in prop::sample::select(vec![1usize, 4, 16]),
        acck in prop::option::of(1u32..7),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let dir = scratch_dir("model");
        let mut w = World {
            engine: Some(World::open(&dir, full_every, mode, around, acck)),
            mode,
            around,
            acck,
            dir: dir.clone(),
            live: BTreeMap::new(),
            versions: Vec::new(),
            epoch: 0,
            full_every,
        };
        for op in &ops {
            w.apply(op);
        }
        // Finally: a restart restores the newest version exactly.
        w.apply(&Op::Restart { offset: 123 });
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
