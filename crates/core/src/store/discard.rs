//! A store that keeps nothing it is given (`ICKPT_DISCARD_WRITES=1`, for measurements): every
//! version is accepted and dropped, so a run measures what ickpt costs the application with
//! the I/O taken away (PRWIP's Fig. 11, "the pure software overhead"). Reads and listings
//! go to the store it wraps, which therefore never gains a version.

use super::{within_written, Store, StoreWriter};
use std::io;

pub struct DiscardStore<S> {
    inner: S,
}

impl<S: Store> DiscardStore<S> {
    pub fn new(inner: S) -> Self {
        DiscardStore { inner }
    }
}

impl<S: Store> Store for DiscardStore<S> {
    pass_through_to!(inner);

    fn create(&self, _name: &str) -> io::Result<Box<dyn StoreWriter>> {
        Ok(Box::new(Discarded { written: 0 }))
    }
}

/// Counts what it is given, so overwrites are checked as on a real store.
struct Discarded {
    written: u64,
}

impl StoreWriter for Discarded {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.written += buf.len() as u64;
        Ok(())
    }

    fn overwrite_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        within_written(offset, buf.len(), self.written)
    }

    fn can_overwrite(&self) -> bool {
        true
    }

    fn commit(self: Box<Self>) -> io::Result<()> {
        Ok(())
    }
}
