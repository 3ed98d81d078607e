//! A store that runs a hook before every write: holding a commit still at a known point (a
//! gate), or making a store bug happen (a panic).

use ickpt::store::{DirStore, Store, StoreWriter};
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// A store that runs `hook` before every write: holding a commit still at a known point
/// (a gate), or making a store bug happen (a panic).
pub struct HookStore {
    pub inner: DirStore,
    pub hook: Arc<dyn Fn() + Send + Sync>,
}

struct HookWriter {
    inner: Box<dyn StoreWriter>,
    hook: Arc<dyn Fn() + Send + Sync>,
}

impl Store for HookStore {
    fn describe(&self, name: &str) -> String {
        self.inner.describe(name)
    }
    fn list(&self) -> io::Result<Vec<String>> {
        self.inner.list()
    }
    fn open(&self, name: &str) -> io::Result<Box<dyn ickpt::store::StoreFile>> {
        self.inner.open(name)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.inner.remove(name)
    }
    fn identity(&self) -> io::Result<Option<ickpt::store::StoreId>> {
        self.inner.identity()
    }
    fn set_identity(&self, id: ickpt::store::StoreId) -> io::Result<()> {
        self.inner.set_identity(id)
    }
    fn create(&self, name: &str) -> io::Result<Box<dyn StoreWriter>> {
        Ok(Box::new(HookWriter {
            inner: self.inner.create(name)?,
            hook: self.hook.clone(),
        }))
    }
}

impl StoreWriter for HookWriter {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        (self.hook)();
        self.inner.write_all(buf)
    }
    fn overwrite_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        (self.hook)();
        self.inner.overwrite_at(offset, buf)
    }
    fn can_overwrite(&self) -> bool {
        self.inner.can_overwrite()
    }
    fn commit(self: Box<Self>) -> io::Result<()> {
        self.inner.commit()
    }
}

/// Holds a store's writes while closed: each write waits (at most the tests' wait limit,
/// then the binary aborts naming it) until the gate opens.
#[derive(Default)]
pub struct Gate {
    closed: Mutex<bool>,
    cv: Condvar,
    /// Writes that reached the gate, whether it was open or not.
    entered: AtomicUsize,
    /// Writes still to pass while it is closed (`let_through`).
    free: AtomicUsize,
}

impl Gate {
    pub fn set(&self, closed: bool) {
        *self.closed.lock().unwrap() = closed;
        self.cv.notify_all();
    }

    /// The next `n` writes pass even while the gate is closed, a write waiting there
    /// included: the one after them stops a commit a known number of writes in.
    pub fn let_through(&self, n: usize) {
        // Under the lock, so a write waiting at the gate sees it when woken.
        let closed = self.closed.lock().unwrap();
        self.free.store(n, Ordering::SeqCst);
        drop(closed);
        self.cv.notify_all();
    }

    /// Writes that reached the gate so far.
    pub fn entered(&self) -> usize {
        self.entered.load(Ordering::SeqCst)
    }

    /// A guard that opens the gate when dropped, also while a failed assertion unwinds, so
    /// a commit held there goes on and the test reports its failure instead of hanging.
    pub fn open_on_drop(&self) -> OpenOnDrop<'_> {
        OpenOnDrop(self)
    }

    fn pass(&self) {
        self.entered.fetch_add(1, Ordering::SeqCst);
        let free = |n: usize| n.checked_sub(1);
        let take_free = || {
            self.free
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, free)
                .is_ok()
        };
        let (held, timeout) = self
            .cv
            .wait_timeout_while(self.closed.lock().unwrap(), super::wait_limit(), |c| {
                *c && !take_free()
            })
            .unwrap();
        drop(held);
        if timeout.timed_out() {
            super::hung("the store's gate opening");
        }
    }
}

pub struct OpenOnDrop<'a>(&'a Gate);

impl Drop for OpenOnDrop<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// A store whose writes wait while the returned gate is closed (it starts open).
pub fn gated_store(dir: &std::path::Path) -> (Arc<dyn Store>, Arc<Gate>) {
    let gate = Arc::new(Gate::default());
    let g = gate.clone();
    let store = HookStore {
        inner: DirStore::open_write(dir).unwrap(),
        hook: Arc::new(move || g.pass()),
    };
    (Arc::new(store), gate)
}
