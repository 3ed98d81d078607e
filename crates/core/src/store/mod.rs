//! Where checkpoint bytes go. Every byte ickpt writes or reads passes through [`Store`], so
//! tests can inject ENOSPC, EIO, torn writes and crashes at any point.

/// The methods a wrapping store passes through to the store it wraps (`$inner`); it then
/// writes only `create`.
macro_rules! pass_through_to {
    ($inner:ident) => {
        fn describe(&self, name: &str) -> String {
            self.$inner.describe(name)
        }
        fn list(&self) -> std::io::Result<Vec<String>> {
            self.$inner.list()
        }
        fn open(&self, name: &str) -> std::io::Result<Box<dyn super::StoreFile>> {
            self.$inner.open(name)
        }
        fn remove(&self, name: &str) -> std::io::Result<()> {
            self.$inner.remove(name)
        }
    };
}

pub(crate) mod dir;
mod faulty;
mod throttled;

pub use dir::{DirStore, OpenError};
pub use faulty::{Fault, FaultPlan, FaultyStore};
use ickpt_format::ReadAt;
use std::io;
pub use throttled::{parse_size, ThrottledStore, TokenBucket};

/// A flat namespace of immutable objects, each created whole and then committed atomically.
pub trait Store: Send + Sync {
    /// Where an object lives, for error messages ("/ckpt/v00000003.ickpt").
    fn describe(&self, name: &str) -> String;
    /// Names of committed objects (never objects still being written).
    fn list(&self) -> io::Result<Vec<String>>;
    fn open(&self, name: &str) -> io::Result<Box<dyn StoreFile>>;
    /// Start writing `name`. It becomes visible to `list`/`open` only when committed;
    /// dropping the writer uncommitted discards it.
    fn create(&self, name: &str) -> io::Result<Box<dyn StoreWriter>>;
    fn remove(&self, name: &str) -> io::Result<()>;
}

impl Store for Box<dyn Store> {
    fn describe(&self, name: &str) -> String {
        (**self).describe(name)
    }
    fn list(&self) -> io::Result<Vec<String>> {
        (**self).list()
    }
    fn open(&self, name: &str) -> io::Result<Box<dyn StoreFile>> {
        (**self).open(name)
    }
    fn create(&self, name: &str) -> io::Result<Box<dyn StoreWriter>> {
        (**self).create(name)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        (**self).remove(name)
    }
}

/// A committed object, read by offset.
pub trait StoreFile: ReadAt + Send + Sync {
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An object being written.
pub trait StoreWriter: Send {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Make the object durable and visible under its name, atomically: after a crash at any
    /// point either the whole object is there or none of it.
    fn commit(self: Box<Self>) -> io::Result<()>;
}

/// File name of a version.
pub fn version_name(version: u64) -> String {
    format!("v{version:08}.ickpt")
}

/// The version a file name stands for, if it is a version file.
pub fn parse_version_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix('v')?.strip_suffix(".ickpt")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&v| v > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_names_round_trip() {
        for v in [1, 42, 99_999_999, 123_456_789_012] {
            assert_eq!(parse_version_name(&version_name(v)), Some(v));
        }
        for bad in [
            "v.ickpt",
            "v0.ickpt",
            "vx1.ickpt",
            "v1.ickpt.tmp",
            "x1.ickpt",
            "v1",
        ] {
            assert_eq!(parse_version_name(bad), None, "{bad}");
        }
    }
}
