//! Restores large enough that the reverse scan reads a version with two threads, in windows
//! of many pages, straight into memory: the bytes restored equal the bytes checkpointed, a
//! damaged page the restore needs fails it (naming the first such page in file order, as
//! one thread would), and a damaged page it does not need is never read.

use crate::common;
use common::{scratch_dir, Buf};
use ickpt::format::{read_meta, ReadAt, VersionMeta};
use ickpt::store::{DirStore, Store, StoreFile, StoreId, StoreWriter};
use ickpt::{Config, Engine, ReadError, RestoreError};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const PS: usize = 4096;
/// Two regions, neither starting nor ending on a page boundary: 48 MiB (of which the full
/// version alone holds two fifths, more than one thread is given) and 3 pages, and a bit.
const SIZES: [usize; 2] = [(48 << 20) + 1234, 3 * PS + 100];
const OFFSETS: [usize; 2] = [100, 4000];

fn random_fill(b: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for w in b.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w.copy_from_slice(&x.to_le_bytes()[..w.len()]);
    }
}

/// The regions of a test: their memory, starting `OFFSETS[i]` bytes into a mapping.
struct Regions(Vec<Buf>);

impl Regions {
    fn new() -> Regions {
        Regions(
            SIZES
                .iter()
                .zip(OFFSETS)
                .map(|(&n, o)| Buf::new(n + o + PS))
                .collect(),
        )
    }

    fn bytes(&mut self, i: usize) -> &mut [u8] {
        &mut self.0[i].slice_mut()[OFFSETS[i]..OFFSETS[i] + SIZES[i]]
    }

    fn snapshot(&mut self) -> Vec<Vec<u8>> {
        (0..SIZES.len()).map(|i| self.bytes(i).to_vec()).collect()
    }

    fn protect(&mut self, e: &Engine) {
        for (i, len) in SIZES.into_iter().enumerate() {
            let p = self.bytes(i).as_mut_ptr();
            // SAFETY: `p` and `len` lie inside a mapping that outlives the engine.
            unsafe { e.protect(i as u64 + 1, p, len).unwrap() };
        }
    }
}

/// A full version and three increments, each rewriting a scattered fifth of the large
/// region's pages and part of the small one; the memory at the last checkpoint.
fn make_chain(dir: &Path) -> (u64, Vec<Vec<u8>>) {
    let mut r = Regions::new();
    for i in 0..SIZES.len() {
        random_fill(r.bytes(i), i as u64 + 1);
    }
    let e = Engine::open(Config::new(dir)).unwrap();
    r.protect(&e);
    e.checkpoint().unwrap();
    let mut last = 0;
    for k in 0..3u64 {
        let big = r.bytes(0);
        for page in (k as usize..big.len() / PS).step_by(5) {
            random_fill(
                &mut big[page * PS..page * PS + 64],
                100 + k * 1_000_000 + page as u64,
            );
        }
        r.bytes(1)[k as usize * PS + 7] ^= 0xff;
        last = e.checkpoint().unwrap().version;
    }
    (last, r.snapshot())
}

fn version_file(dir: &Path, v: u64) -> PathBuf {
    dir.join(format!("v{v:08}.ickpt"))
}

fn meta(dir: &Path, v: u64) -> VersionMeta {
    let bytes = std::fs::read(version_file(dir, v)).unwrap();
    read_meta(&bytes, bytes.len() as u64).unwrap()
}

/// File offset of stored page `page` of region table index `region` in version `v`.
fn page_offset_in_file(dir: &Path, v: u64, region: u32, page: u64) -> Option<u64> {
    meta(dir, v).runs.iter().find_map(|run| {
        (run.region_index == region
            && (run.first_page..run.first_page + run.page_count as u64).contains(&page))
        .then(|| run.data_offset + (page - run.first_page) * PS as u64)
    })
}

fn flip_byte(dir: &Path, v: u64, at: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(version_file(dir, v))
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, at + 17).unwrap();
    f.write_all_at(&[b[0] ^ 0x40], at + 17).unwrap();
}

fn restore(dir: &Path, v: u64) -> (Result<ickpt::RestoreInfo, RestoreError>, Vec<Vec<u8>>) {
    let mut r = Regions::new();
    for i in 0..SIZES.len() {
        r.bytes(i).fill(0xee);
    }
    let e = Engine::open(Config::new(dir)).unwrap();
    r.protect(&e);
    let got = e.restore(v);
    drop(e);
    (got, r.snapshot())
}

#[test]
fn a_large_chain_restores_bit_identical() {
    let dir = scratch_dir("restore-large");
    let (v, expect) = make_chain(&dir);
    let (got, memory) = restore(&dir, v);
    let info = got.unwrap();
    assert_eq!(info.chain_len, 4);
    let pages: u64 = SIZES
        .iter()
        .zip(OFFSETS)
        .map(|(&n, o)| ((o % PS + n).div_ceil(PS)) as u64)
        .sum();
    assert_eq!(info.pages, pages, "each page read once");
    for i in 0..SIZES.len() {
        assert!(memory[i] == expect[i], "region {} differs", i + 1);
    }
}

/// A store whose files hold any read covering `held` until a read covering `after` has
/// returned: two threads then both fail, the later window first, and the error must still
/// name the earlier page, as one thread would.
struct Ordered {
    inner: DirStore,
    held: u64,
    after: u64,
    after_read: Arc<AtomicBool>,
}

struct OrderedFile {
    inner: Box<dyn StoreFile>,
    held: u64,
    after: u64,
    after_read: Arc<AtomicBool>,
}

impl ReadAt for OrderedFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let end = offset + buf.len() as u64;
        let covers = |at: u64| (offset..end).contains(&at);
        if covers(self.held) {
            common::spin_until("the later damaged page read", || {
                self.after_read.load(Ordering::SeqCst)
            });
        }
        let r = self.inner.read_exact_at(buf, offset);
        if covers(self.after) {
            self.after_read.store(true, Ordering::SeqCst);
        }
        r
    }
}

impl StoreFile for OrderedFile {
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl Store for Ordered {
    fn describe(&self, name: &str) -> String {
        self.inner.describe(name)
    }
    fn list(&self) -> std::io::Result<Vec<String>> {
        self.inner.list()
    }
    fn open(&self, name: &str) -> std::io::Result<Box<dyn StoreFile>> {
        let inner = self.inner.open(name)?;
        Ok(Box::new(OrderedFile {
            inner,
            held: if name.ends_with("00001.ickpt") {
                self.held
            } else {
                u64::MAX
            },
            after: if name.ends_with("00001.ickpt") {
                self.after
            } else {
                u64::MAX
            },
            after_read: self.after_read.clone(),
        }))
    }
    fn create(&self, name: &str) -> std::io::Result<Box<dyn StoreWriter>> {
        self.inner.create(name)
    }
    fn remove(&self, name: &str) -> std::io::Result<()> {
        self.inner.remove(name)
    }
    fn identity(&self) -> std::io::Result<Option<StoreId>> {
        self.inner.identity()
    }
    fn set_identity(&self, id: StoreId) -> std::io::Result<()> {
        self.inner.set_identity(id)
    }
}

#[test]
fn a_damaged_page_the_restore_needs_fails_it_naming_the_first_in_file_order() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("one CPU: the restore reads with one thread, nothing to order");
        return;
    }
    let dir = scratch_dir("restore-damaged");
    let (v, _) = make_chain(&dir);
    let full = 1;
    // Pages 0, 1 and 2 (mod 5) of the large region were rewritten by the increments; pages 3
    // and 4 (mod 5) only the full version holds. Damage two of them, far apart (different
    // windows); the read of the first is held until the second has been read, so each of
    // the two threads fails, the later window first.
    let pages = [4099, 9219];
    let at = pages.map(|p| page_offset_in_file(&dir, full, 0, p as u64).unwrap());
    for a in at {
        flip_byte(&dir, full, a);
    }
    let store = Ordered {
        inner: DirStore::open_write(&dir).unwrap(),
        held: at[0],
        after: at[1],
        after_read: Arc::new(AtomicBool::new(false)),
    };
    let after_read = store.after_read.clone();
    let mut r = Regions::new();
    let e = Engine::with_store(Config::new(&dir), Arc::new(store)).unwrap();
    r.protect(&e);
    let got = e.restore(v);
    drop(e);
    assert!(after_read.load(Ordering::SeqCst), "the later page was read");
    match got {
        Err(RestoreError::Read(ReadError::Corrupt { source, .. })) => {
            let what = source.to_string();
            assert!(
                what.contains(&format!("page {} of region 1 fails its checksum", pages[0])),
                "{what}"
            );
        }
        other => panic!("a damaged page must fail the restore: {other:?}"),
    }
}

#[test]
fn a_damaged_page_no_newer_version_needs_is_never_read() {
    let dir = scratch_dir("restore-superseded");
    let (v, expect) = make_chain(&dir);
    let full = 1;
    // Page 10 was rewritten by the first increment: the full version's copy is superseded.
    let at = page_offset_in_file(&dir, full, 0, 10).unwrap();
    flip_byte(&dir, full, at);
    let (got, memory) = restore(&dir, v);
    got.unwrap();
    assert!(memory[0] == expect[0]);
}
