//! A store that runs a hook before every write: holding a commit still at a known point (a
//! gate), or making a store bug happen (a panic).

use ickpt::store::{DirStore, Store, StoreWriter};
use std::io;
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
    fn commit(self: Box<Self>) -> io::Result<()> {
        self.inner.commit()
    }
}

pub type Gate = Arc<(Mutex<bool>, Condvar)>;

/// A store whose writes block while the returned gate is closed.
pub fn gated_store(dir: &std::path::Path) -> (Arc<dyn Store>, Gate) {
    let closed: Gate = Arc::new((Mutex::new(false), Condvar::new()));
    let g = closed.clone();
    let hook = move || {
        let (m, cv) = &*g;
        drop(cv.wait_while(m.lock().unwrap(), |closed| *closed).unwrap());
    };
    let store = HookStore {
        inner: DirStore::open_write(dir).unwrap(),
        hook: Arc::new(hook),
    };
    (Arc::new(store), closed)
}

pub fn set_gate(g: &(Mutex<bool>, Condvar), closed: bool) {
    *g.0.lock().unwrap() = closed;
    g.1.notify_all();
}
