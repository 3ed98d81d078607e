//! Program sections (CAPE, Table I): a section saves only the words it
//! changed, merges saves under one name, and a re-run recovers them in order, switching back
//! to checkpointing after the last saved section; calls out of order, bad names and damaged
//! saves are refused with memory untouched. Run on every backend (scripts/each-backend.sh).

use crate::common;
use common::{noise, scratch_dir, Buf};
use ickpt::format::DeltaFile;
use ickpt::{Config, Engine, SectionError, SectionStart};

const PS: usize = 4096;
const BIG: usize = 64 * PS;
/// Not a multiple of 4: the last word is short.
const SMALL: usize = 3 * PS + 10;

/// One run of a program: an initialisation it can redo (`big`), a small state the sections
/// change (`small`).
struct Run {
    e: Engine,
    big: Buf,
    small: Buf,
}

impl Run {
    fn start(dir: &std::path::Path) -> Run {
        let e = Engine::open(Config::new(dir)).unwrap();
        let (mut big, small) = (Buf::new(BIG), Buf::new(4 * PS));
        // SAFETY: both buffers outlive the engine (Run drops `e` first: declared first).
        unsafe {
            e.protect(1, big.ptr, BIG).unwrap();
            e.protect(2, small.ptr.add(2), SMALL).unwrap();
        }
        // The prefix: the same on every run.
        noise(big.slice_mut(), 7);
        Run { e, big, small }
    }

    fn small(&mut self) -> &mut [u8] {
        &mut self.small.slice_mut()[2..2 + SMALL]
    }

    /// Iteration `i` of the program's loop: a few words of both regions, the short last one
    /// every other time.
    fn step(&mut self, i: u64) {
        let b = i as u8 + 1;
        self.small()[(i as usize * 100) % (SMALL - 8)..][..8].fill(b);
        if i % 2 == 0 {
            self.small()[SMALL - 1] = b;
        }
        self.big.slice_mut()[(i as usize * 3 + 1) * PS + 40] = b;
    }
}

/// An engine with one region of 8 pages, checkpointed once. The caller drops the engine
/// before the buffer.
fn checkpointed(dir: &std::path::Path) -> (Engine, Buf) {
    let e = Engine::open(Config::new(dir)).unwrap();
    let buf = Buf::new(8 * PS);
    // SAFETY: the buffer outlives the engine (the callers drop it first).
    unsafe { e.protect(1, buf.ptr, 8 * PS).unwrap() };
    e.checkpoint().unwrap();
    (e, buf)
}

fn started(resume: u64, recovering: bool) -> SectionStart {
    SectionStart { resume, recovering }
}

fn snapshot(r: &mut Run) -> (Vec<u8>, Vec<u8>) {
    (r.big.slice().to_vec(), r.small().to_vec())
}

#[test]
fn a_rerun_replays_the_saves_and_carries_on_checkpointing() {
    let dir = scratch_dir("sections-rerun");
    let mut r = Run::start(&dir);
    assert_eq!(r.e.section_start().unwrap(), started(0, false));
    for i in 0..5 {
        r.step(i);
        let s = r.e.section_save("loop").unwrap();
        assert_eq!(s.saves, i + 1);
        // 8 changed bytes at a 2-byte offset from a word boundary... the small region starts
        // at offset 0 of its own words: bytes k..k+8 with k a multiple of 4 are 2 words; one
        // more for the short last word every other time; one in the big region.
        let want = 2 + u64::from(i % 2 == 0) + 1;
        assert_eq!(s.words, want, "save {i}: words changed");
        assert!(s.delta_bytes < 200, "save {i}: {} bytes", s.delta_bytes);
    }
    r.e.section_stop().unwrap();
    let want = snapshot(&mut r);
    drop(r);

    // The re-run: the prefix again, then the section replays its 5 saves.
    let mut r = Run::start(&dir);
    let s = r.e.section_start().unwrap();
    assert_eq!(s, started(5, false));
    assert!(snapshot(&mut r) == want, "memory as the first run left it");
    // It checkpoints again: the next save merges into the same file.
    r.step(5);
    assert_eq!(r.e.section_save("loop").unwrap().saves, 6);
    r.e.section_stop().unwrap();
    let want = snapshot(&mut r);
    drop(r);
    let mut r = Run::start(&dir);
    assert_eq!(r.e.section_start().unwrap().resume, 6);
    assert!(snapshot(&mut r) == want, "all six saves replayed");
}

#[test]
fn earlier_sections_replay_while_later_ones_are_saved() {
    let dir = scratch_dir("sections-modes");
    let mut r = Run::start(&dir);
    // Fig. 2: S1; start; S21; save f1; S22; save f1; stop; S3; start; S4; save f2; stop.
    r.e.section_start().unwrap();
    r.step(0);
    r.e.section_save("f1").unwrap();
    r.step(1);
    assert_eq!(r.e.section_save("f1").unwrap().saves, 2);
    r.e.section_stop().unwrap();
    r.big.slice_mut()[5] ^= 0xFF; // S3: outside any section, redone by every run
    r.e.section_start().unwrap();
    r.step(2);
    r.e.section_save("f2").unwrap();
    r.e.section_stop().unwrap();
    let want = snapshot(&mut r);
    drop(r);

    let mut r = Run::start(&dir);
    let s = r.e.section_start().unwrap();
    assert_eq!(s, started(2, true));
    // Recovering: the section's saves are in memory already; a save is refused.
    match r.e.section_save("f1") {
        Err(SectionError::Order(m)) => assert!(m.contains("section 0"), "{m}"),
        other => panic!("{other:?}"),
    }
    r.e.section_stop().unwrap();
    r.big.slice_mut()[5] ^= 0xFF;
    let s = r.e.section_start().unwrap();
    assert_eq!(s, started(1, false));
    assert!(snapshot(&mut r) == want, "both sections replayed");
    // f1 is section 0's: section 1 may not save under it.
    assert!(matches!(
        r.e.section_save("f1"),
        Err(SectionError::Name { .. })
    ));
    r.step(3);
    assert_eq!(r.e.section_save("f2").unwrap().saves, 2);
    r.e.section_stop().unwrap();
}

#[test]
fn several_names_in_a_section_replay_in_order() {
    let dir = scratch_dir("sections-names");
    let mut r = Run::start(&dir);
    r.e.section_start().unwrap();
    r.small()[0..4].fill(1);
    r.e.section_save("init").unwrap();
    r.small()[0..4].fill(2);
    r.e.section_save("loop").unwrap();
    r.small()[0..4].fill(3);
    r.e.section_save("loop").unwrap();
    // Back to an earlier name would replay out of order.
    match r.e.section_save("init") {
        Err(SectionError::Name { why, .. }) => assert!(why.contains("latest"), "{why}"),
        other => panic!("{other:?}"),
    }
    r.e.section_stop().unwrap();
    drop(r);
    let mut r = Run::start(&dir);
    assert_eq!(r.e.section_start().unwrap().resume, 3);
    assert_eq!(&r.small()[0..4], &[3; 4], "later saves win");
}

#[test]
fn take_gives_a_delta_another_engine_injects() {
    let (da, db) = (
        scratch_dir("sections-take-a"),
        scratch_dir("sections-take-b"),
    );
    let mut a = Run::start(&da);
    let mut b = Run::start(&db);
    a.e.section_start().unwrap();
    for i in 0..3 {
        a.step(i);
    }
    let (d, info) = a.e.section_take().unwrap();
    assert_eq!(info.delta_bytes, d.encode().len() as u64);
    // Nothing since the take.
    assert_eq!(a.e.section_take().unwrap().1.words, 0);
    a.e.section_stop().unwrap();
    let d = DeltaFile::decode(&d.encode()).unwrap();
    b.e.inject(&d).unwrap();
    assert!(snapshot(&mut a) == snapshot(&mut b), "b holds a's loop");
}

#[test]
fn calls_out_of_order_and_bad_names_are_refused() {
    let dir = scratch_dir("sections-order");
    let r = Run::start(&dir);
    for res in [
        r.e.section_save("x").map(drop),
        r.e.section_stop(),
        r.e.section_take().map(drop),
    ] {
        assert!(matches!(res, Err(SectionError::Order(_))), "{res:?}");
    }
    r.e.section_start().unwrap();
    assert!(matches!(r.e.section_start(), Err(SectionError::Order(_))));
    for bad in ["", "../x", "a.b", "a b", &"x".repeat(65)] {
        assert!(
            matches!(r.e.section_save(bad), Err(SectionError::Name { .. })),
            "{bad:?}"
        );
    }
    r.e.section_save("ok").unwrap();
    // A restore would replace what the section compares against.
    assert!(matches!(
        r.e.restore(1),
        Err(ickpt::RestoreError::SectionOpen(0))
    ));
    r.e.section_stop().unwrap();
    // Reset only before the first start: sections are numbered from there.
    assert!(matches!(r.e.section_reset(), Err(SectionError::Order(_))));
    drop(r);
    // The next run resets first: it starts afresh.
    let r = Run::start(&dir);
    r.e.section_reset().unwrap();
    assert_eq!(r.e.section_start().unwrap().resume, 0);
}

#[test]
fn a_take_leaves_its_words_to_the_next_save() {
    let dir = scratch_dir("sections-take-save");
    let mut r = Run::start(&dir);
    r.e.section_start().unwrap();
    r.small()[0..4].fill(1);
    assert_eq!(r.e.section_take().unwrap().1.words, 1);
    r.small()[8..12].fill(2);
    let s = r.e.section_save("s").unwrap();
    assert_eq!(s.words, 2, "the take's word and the later one");
    r.e.section_stop().unwrap();
    let want = snapshot(&mut r);
    drop(r);
    let mut r = Run::start(&dir);
    assert_eq!(r.e.section_start().unwrap().resume, 1);
    assert!(snapshot(&mut r) == want);
}

#[test]
fn injected_words_are_saved_but_not_taken_again() {
    let dir = scratch_dir("sections-inject");
    let mut r = Run::start(&dir);
    r.e.section_start().unwrap();
    // What another rank computed: one word of the small region.
    let other = DeltaFile {
        page_size: PS as u32,
        saves: 1,
        regions: vec![ickpt::format::RegionDelta {
            id: 2,
            length: SMALL as u64,
            words: vec![(16, [9; 4])],
        }],
    };
    r.e.inject(&other).unwrap();
    assert_eq!(&r.small()[16..20], &[9; 4]);
    r.small()[0..4].fill(1);
    let (d, _) = r.e.section_take().unwrap();
    let taken: Vec<_> = d.regions.iter().flat_map(|x| x.words.clone()).collect();
    assert_eq!(taken, [(0, [1; 4])], "only this process's own word");
    assert_eq!(r.e.section_save("s").unwrap().words, 2, "both in the save");
}

#[test]
fn a_damaged_save_is_refused_before_memory_changes() {
    let dir = scratch_dir("sections-corrupt");
    let mut r = Run::start(&dir);
    r.e.section_start().unwrap();
    r.step(0);
    r.e.section_save("loop").unwrap();
    r.e.section_stop().unwrap();
    drop(r);
    let file = std::fs::read_dir(&*dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "section"))
        .expect("a section file");
    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len();
    bytes[n - 12] ^= 1;
    std::fs::write(&file, &bytes).unwrap();
    let mut r = Run::start(&dir);
    let before = snapshot(&mut r);
    match r.e.section_start() {
        Err(e @ SectionError::Corrupt { .. }) => {
            assert!(e.to_string().contains(&*file.to_string_lossy()), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert!(snapshot(&mut r) == before, "memory untouched");
}

#[test]
fn a_failed_save_leaves_its_words_to_the_next() {
    let dir = scratch_dir("sections-enospc");
    let mut cfg = Config::new(&dir);
    cfg.fault = Some(ickpt::store::Fault::NoSpaceAfter(10));
    let e = Engine::open(cfg).unwrap();
    let mut buf = Buf::new(2 * PS);
    // SAFETY: the buffer outlives the engine (dropped first).
    unsafe { e.protect(1, buf.ptr, 2 * PS).unwrap() };
    e.section_start().unwrap();
    buf.slice_mut()[0] = 1;
    assert!(matches!(e.section_save("s"), Err(SectionError::File(_))));
    buf.slice_mut()[PS] = 2;
    let s = e.section_save("s").unwrap();
    // It counts the failed save too: a restart resumes after both.
    assert_eq!((s.saves, s.words), (2, 2), "the failed save's word too");
    e.section_stop().unwrap();
    drop(e);
    let e = Engine::open(Config::new(&dir)).unwrap();
    let mut fresh = Buf::new(2 * PS);
    // SAFETY: as above.
    unsafe { e.protect(1, fresh.ptr, 2 * PS).unwrap() };
    assert_eq!(e.section_start().unwrap().resume, 2);
    assert_eq!((fresh.slice_mut()[0], fresh.slice_mut()[PS]), (1, 2));
    drop(e);
}

#[test]
fn sections_and_checkpoints_see_the_same_writes() {
    // A section's collects must not steal pages from the next checkpoint.
    let dir = scratch_dir("sections-ckpt");
    let (e, mut buf) = checkpointed(&dir);
    e.section_start().unwrap();
    buf.slice_mut()[3 * PS] = 9;
    e.section_save("s").unwrap();
    buf.slice_mut()[5 * PS] = 9;
    e.section_stop().unwrap();
    buf.slice_mut()[6 * PS] = 9;
    let c = e.checkpoint().unwrap();
    assert_eq!(c.pages, 3, "pages 3, 5 and 6");
    let want = buf.slice().to_vec();
    buf.slice_mut().fill(0);
    e.restore(c.version).unwrap();
    assert!(buf.slice() == &want[..]);
    drop(e);
}

#[test]
fn outside_a_section_writes_take_no_fault() {
    let dir = scratch_dir("sections-faults");
    let mut r = Run::start(&dir);
    // The prefix wrote all 64 pages of the big region, untracked.
    assert_eq!(r.e.stats().faults, 0);
    r.e.section_start().unwrap();
    for p in [1, 9, 30] {
        r.big.slice_mut()[p * PS] = 1;
    }
    assert_eq!(r.e.section_save("s").unwrap().pages, 3);
    let inside = r.e.stats().faults;
    let sees_writes = r.e.stats().backend != "uffd-async";
    // uffd-async's first writes never reach ickpt: it counts none.
    assert_eq!(inside, if sees_writes { 3 } else { 0 });
    r.e.section_stop().unwrap();
    noise(r.big.slice_mut(), 9);
    assert_eq!(r.e.stats().faults, inside, "no fault after the stop");
    // The next start tracks again: only what the section writes is saved.
    r.e.section_start().unwrap();
    r.big.slice_mut()[2 * PS] ^= 0xFF;
    assert_eq!(r.e.section_save("t").unwrap().pages, 1);
}

#[test]
fn a_checkpoint_inside_a_section_takes_nothing_from_its_next_save() {
    let dir = scratch_dir("sections-ckpt-inside");
    let (e, mut buf) = checkpointed(&dir);
    e.section_start().unwrap();
    buf.slice_mut()[3 * PS] = 9;
    assert_eq!(
        e.checkpoint().unwrap().pages,
        1,
        "the checkpoint stores page 3"
    );
    buf.slice_mut()[4 * PS] = 9;
    let s = e.section_save("s").unwrap();
    assert_eq!(s.words, 2, "the save holds pages 3 and 4's words");
    e.section_stop().unwrap();
    assert_eq!(
        e.checkpoint().unwrap().pages,
        1,
        "page 4, owed by the section"
    );
    drop(e);
}

#[test]
fn a_crash_in_a_save_leaves_the_previous_one() {
    let dir = scratch_dir("sections-crash");
    let mut r = Run::start(&dir);
    r.e.section_start().unwrap();
    for i in 0..2 {
        r.step(i);
        r.e.section_save("loop").unwrap();
    }
    let want = snapshot(&mut r);
    drop(r);
    // The next run replays both, then its save dies halfway through writing the file.
    let mut cfg = Config::new(&dir);
    cfg.fault = Some(ickpt::store::Fault::CrashAfter(40));
    let e = Engine::open(cfg).unwrap();
    let (mut big, small) = (Buf::new(BIG), Buf::new(4 * PS));
    // SAFETY: both buffers outlive the engine (dropped first, below).
    unsafe {
        e.protect(1, big.ptr, BIG).unwrap();
        e.protect(2, small.ptr.add(2), SMALL).unwrap();
    }
    noise(big.slice_mut(), 7);
    assert_eq!(e.section_start().unwrap().resume, 2);
    big.slice_mut()[9] ^= 1;
    assert!(e.section_save("loop").is_err());
    drop(e);
    // A file under an older count beside the newest, as a crash between writing the new
    // file and removing the old leaves: ignored, then removed.
    let names = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&*dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".section"))
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(), ["s00000000.00000001.00000002.loop.section"]);
    std::fs::copy(
        dir.join("s00000000.00000001.00000002.loop.section"),
        dir.join("s00000000.00000001.00000001.loop.section"),
    )
    .unwrap();
    let mut r = Run::start(&dir);
    assert_eq!(r.e.section_start().unwrap().resume, 2);
    assert!(snapshot(&mut r) == want, "the two saves before the crash");
    assert_eq!(names(), ["s00000000.00000001.00000002.loop.section"]);
    drop(r);
    drop((big, small));
}

/// The fixture: a store with section 0's three saves under "loop" (steps 0, 1, 2), as
/// delta-file format 1 writes them (`cargo test --test sections -- --ignored
/// write_section_fixture` remakes it).
fn section_fixture() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sections-v1")
}

#[test]
#[ignore = "writes tests/fixtures/sections-v1; run by hand when the fixture must be remade"]
fn write_section_fixture() {
    let dir = scratch_dir("sections-fixture-make");
    let mut r = Run::start(&dir);
    r.e.section_start().unwrap();
    for i in 0..3 {
        r.step(i);
        r.e.section_save("loop").unwrap();
    }
    r.e.section_stop().unwrap();
    drop(r);
    let out = section_fixture();
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    for e in std::fs::read_dir(&*dir).unwrap() {
        let p = e.unwrap().path();
        // The saves and the store's marker (a directory of saves alone is no store).
        if p.extension().is_some_and(|x| x == "section") || p.ends_with("ickpt-store") {
            std::fs::copy(&p, out.join(p.file_name().unwrap())).unwrap();
        }
    }
}

#[test]
fn section_saves_of_delta_format_1_still_recover() {
    // What the three steps leave, computed without ickpt's saves.
    let mut plain = Run::start(&scratch_dir("sections-fixture-want"));
    for i in 0..3 {
        plain.step(i);
    }
    let want = snapshot(&mut plain);
    drop(plain);
    let dir = scratch_dir("sections-fixture-read");
    std::fs::create_dir_all(&*dir).unwrap();
    let mut n = 0;
    for e in std::fs::read_dir(section_fixture()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
        n += 1;
    }
    assert_eq!(n, 2, "the fixture holds the marker and one save file");
    let mut r = Run::start(&dir);
    assert_eq!(r.e.section_start().unwrap().resume, 3);
    assert!(
        snapshot(&mut r) == want,
        "the fixture's saves replayed exactly"
    );
}

#[test]
fn a_save_file_past_the_size_limit_stops_the_restart_naming_it() {
    let dir = scratch_dir("sections-huge");
    let r = Run::start(&dir);
    drop(r);
    // A crafted save under a valid name: sparse, past what a restart reads.
    let path = dir.join("s00000000.00000001.00000001.loop.section");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(ickpt::read::delta_file::MAX_DELTA_FILE + 1)
        .unwrap();
    let mut r = Run::start(&dir);
    let before = snapshot(&mut r);
    match r.e.section_start() {
        Err(e @ SectionError::Corrupt { .. }) => {
            let m = e.to_string();
            assert!(
                m.contains(&*path.to_string_lossy()) && m.contains("larger than"),
                "{m}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(snapshot(&mut r) == before, "memory untouched");
}
