//! A store held in memory, so a fuzz run touches no file system and each input starts from
//! exactly the bytes it names.

use crate::store::{Store, StoreFile, StoreId, StoreWriter};
use ickpt_format::ReadAt;
use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

type Files = Arc<Mutex<BTreeMap<String, Arc<[u8]>>>>;

#[derive(Default)]
pub struct MemStore {
    files: Files,
    id: Mutex<Option<StoreId>>,
}

impl MemStore {
    /// A store holding `files` (name, bytes) under the identity `id`.
    pub fn with_files(
        id: Option<StoreId>,
        files: impl IntoIterator<Item = (String, Vec<u8>)>,
    ) -> Self {
        let s = MemStore {
            id: Mutex::new(id),
            ..MemStore::default()
        };
        s.lock()
            .extend(files.into_iter().map(|(n, b)| (n, b.into())));
        s
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Arc<[u8]>>> {
        lock(&self.files)
    }
}

// A panic while one is held is a fuzzing finding already; the map itself stays whole.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn not_found(name: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{name}: no such object"))
}

impl Store for MemStore {
    fn describe(&self, name: &str) -> String {
        format!("mem:{name}")
    }

    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.lock().keys().cloned().collect())
    }

    fn open(&self, name: &str) -> io::Result<Box<dyn StoreFile>> {
        let bytes = self
            .lock()
            .get(name)
            .cloned()
            .ok_or_else(|| not_found(name))?;
        Ok(Box::new(MemFile(bytes)))
    }

    fn create(&self, name: &str) -> io::Result<Box<dyn StoreWriter>> {
        Ok(Box::new(MemWriter {
            files: self.files.clone(),
            name: name.to_owned(),
            buf: Vec::new(),
        }))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        self.lock()
            .remove(name)
            .map(drop)
            .ok_or_else(|| not_found(name))
    }

    fn identity(&self) -> io::Result<Option<StoreId>> {
        Ok(*lock(&self.id))
    }

    fn set_identity(&self, id: StoreId) -> io::Result<()> {
        *lock(&self.id) = Some(id);
        Ok(())
    }
}

struct MemFile(Arc<[u8]>);

impl ReadAt for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (&*self.0).read_exact_at(buf, offset)
    }
}

impl StoreFile for MemFile {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
}

/// Invisible until committed, as the trait asks; dropping it uncommitted discards it.
struct MemWriter {
    files: Files,
    name: String,
    buf: Vec<u8>,
}

impl StoreWriter for MemWriter {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.buf.extend_from_slice(buf);
        Ok(())
    }

    fn overwrite_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        crate::store::within_written(offset, buf.len(), self.buf.len() as u64)?;
        self.buf[offset as usize..offset as usize + buf.len()].copy_from_slice(buf);
        Ok(())
    }

    fn can_overwrite(&self) -> bool {
        true
    }

    fn commit(self: Box<Self>) -> io::Result<()> {
        let MemWriter { files, name, buf } = *self;
        lock(&files).insert(name, buf.into());
        Ok(())
    }
}
