//! What every tracking backend must do, checked through the engine with the backend forced
//! by ICKPT_BACKEND (`make test` runs the integration tests once per backend; without it,
//! `auto`). Exactly the pages written are stored: not fewer (lost writes) and not more (reads,
//! untouched pages, or neighbours in a shared page counted as written).

mod common;
use common::{scratch_dir, Buf};
use ickpt::{Backend, Config, Engine};
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;

const PS: usize = 4096;

fn engine(name: &str) -> (Engine, std::path::PathBuf) {
    let dir = scratch_dir(name);
    let mut c = Config::new(&dir);
    c.full_every = 1000;
    (Engine::open(c).unwrap(), dir)
}

#[test]
fn the_forced_backend_is_the_one_in_use() {
    let (e, dir) = engine("conf-backend");
    let want = std::env::var("ICKPT_BACKEND")
        .ok()
        .and_then(|b| Backend::parse(&b))
        .filter(|&b| b != Backend::Auto)
        .unwrap_or_else(ickpt::track::auto_choice);
    assert_eq!(e.backend(), want);
    let mut buf = Buf::new(PS);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    buf.slice_mut()[0] = 1;
    let v = e.checkpoint().unwrap();
    assert_eq!(e.stats().backend, want.as_str());
    let bytes = std::fs::read(dir.join(ickpt::store::version_name(v.version))).unwrap();
    let meta = ickpt::format::read_meta(&&bytes[..], bytes.len() as u64).unwrap();
    assert_eq!(
        meta.stats.unwrap().backend,
        ickpt::format::backend_code(want.as_str())
    );
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn exactly_the_written_pages_are_stored() {
    let (e, dir) = engine("conf-exact");
    let pages = 256;
    let mut buf = Buf::new(pages * PS);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    assert_eq!(e.checkpoint().unwrap().pages, pages as u64);
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut versions = Vec::new();
    for round in 0..12u8 {
        let mut written = BTreeSet::new();
        // Edges included: the first and last page are where neighbours would share.
        for p in [0, pages - 1] {
            if rng.gen_bool(0.5) {
                written.insert(p);
            }
        }
        for _ in 0..rng.gen_range(0..40) {
            written.insert(rng.gen_range(0..pages));
        }
        let mem = buf.slice_mut();
        for &p in &written {
            let off = p * PS + rng.gen_range(0..PS);
            mem[off] = mem[off].wrapping_add(round + 1);
        }
        // Reads never count.
        let sum: u64 = mem.iter().step_by(512).map(|&b| b as u64).sum();
        std::hint::black_box(sum);
        let v = e.checkpoint().unwrap();
        assert_eq!(v.pages, written.len() as u64, "round {round}: {written:?}");
        versions.push((v.version, buf.slice().to_vec()));
    }
    for (v, want) in versions.iter().rev().step_by(3) {
        buf.slice_mut().fill(0xAB);
        e.restore(*v).unwrap();
        assert!(buf.slice() == &want[..], "version {v}");
    }
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pages_never_touched_before_tracking_are_tracked_too() {
    let (e, dir) = engine("conf-fresh");
    // Fresh anonymous memory: no page is populated until written.
    let buf = Buf::new(64 * PS);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    assert_eq!(e.checkpoint().unwrap().pages, 64);
    assert_eq!(e.checkpoint().unwrap().pages, 0, "nothing written");
    for p in [0usize, 9, 63] {
        // SAFETY: inside `buf`.
        unsafe { buf.ptr.add(p * PS + 5).write_volatile(p as u8 + 1) };
    }
    let v = e.checkpoint().unwrap();
    assert_eq!(v.pages, 3);
    // SAFETY: inside `buf`.
    unsafe { buf.ptr.add(9 * PS + 5).write_volatile(0) };
    e.restore(v.version).unwrap();
    assert_eq!(buf.slice()[9 * PS + 5], 10);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn regions_sharing_a_page_each_store_it_once_when_written() {
    let (e, dir) = engine("conf-shared");
    let mut buf = Buf::new(3 * PS);
    let base = buf.ptr as usize;
    // Region 1 ends inside page 1, region 2 starts there.
    // SAFETY: both ranges lie inside `buf`, which outlives the engine.
    unsafe {
        e.protect(1, buf.ptr, PS + 100).unwrap();
        e.protect(2, (base + PS + 100) as *mut u8, 2 * PS - 100)
            .unwrap();
    }
    e.checkpoint().unwrap();
    for _ in 0..3 {
        assert_eq!(e.checkpoint().unwrap().pages, 0, "no write, no page");
    }
    buf.slice_mut()[PS + 50] = 1; // region 1's bytes of the shared page
    let v = e.checkpoint().unwrap();
    assert_eq!(v.pages, 2, "the shared page, once per region");
    buf.slice_mut()[2 * PS + 7] = 2; // region 2 only
    assert_eq!(e.checkpoint().unwrap().pages, 1);
    assert_eq!(e.checkpoint().unwrap().pages, 0);
    buf.slice_mut()[PS + 50] = 0;
    e.restore(v.version).unwrap();
    assert_eq!(buf.slice()[PS + 50], 1);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unprotected_memory_stays_writable_and_leaves_the_versions() {
    let (e, dir) = engine("conf-unprotect");
    let mut a = Buf::new(8 * PS);
    let mut b = Buf::new(8 * PS);
    // SAFETY: both outlive the engine.
    unsafe {
        e.protect(1, a.ptr, a.len).unwrap();
        e.protect(2, b.ptr, b.len).unwrap();
    }
    e.checkpoint().unwrap();
    e.unprotect(1).unwrap();
    a.slice_mut().fill(3);
    b.slice_mut()[0] = 4;
    let v = e.checkpoint().unwrap();
    assert_eq!(v.pages, 1);
    // Protect it again: stored whole once, then tracked as before.
    // SAFETY: `a` outlives the engine.
    unsafe { e.protect(1, a.ptr, a.len).unwrap() };
    assert_eq!(e.checkpoint().unwrap().pages, 8);
    a.slice_mut()[5 * PS] = 9;
    assert_eq!(e.checkpoint().unwrap().pages, 1);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_backed_mapping_is_tracked_like_anonymous_memory() {
    // userfaultfd (sync) cannot write-protect most file mappings: that region falls back to
    // page protection, and the outcome must not change.
    let (e, dir) = engine("conf-file");
    let path = scratch_dir("conf-file-backing");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    f.set_len(16 * PS as u64).unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: a fresh shared mapping of a file we own; unmapped below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            16 * PS,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    let mem = p as *mut u8;
    // SAFETY: the mapping outlives the engine (dropped before munmap).
    unsafe { e.protect(1, mem, 16 * PS).unwrap() };
    let by_protection = e.stats().regions_by_protection;
    match e.backend() {
        Backend::Uffd => assert_eq!(by_protection, 1, "uffd falls back to mprotect here"),
        Backend::Mprotect => assert_eq!(by_protection, 1),
        _ => assert_eq!(by_protection, 0, "async write-protect takes any memory"),
    }
    e.checkpoint().unwrap();
    for pg in [2usize, 3, 11] {
        // SAFETY: inside the mapping.
        unsafe { mem.add(pg * PS).write_volatile(pg as u8) };
    }
    let v = e.checkpoint().unwrap();
    assert_eq!(v.pages, 3);
    // SAFETY: inside the mapping.
    unsafe { mem.add(3 * PS).write_volatile(0) };
    e.restore(v.version).unwrap();
    // SAFETY: inside the mapping.
    assert_eq!(unsafe { mem.add(3 * PS).read_volatile() }, 3);
    drop(e);
    // SAFETY: mapped above; the engine is gone.
    unsafe { libc::munmap(p, 16 * PS) };
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&dir);
}
