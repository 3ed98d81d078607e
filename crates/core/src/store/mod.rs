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
        fn identity(&self) -> std::io::Result<Option<super::StoreId>> {
            self.$inner.identity()
        }
        fn set_identity(&self, id: super::StoreId) -> std::io::Result<()> {
            self.$inner.set_identity(id)
        }
    };
}

#[cfg(feature = "testing")]
pub mod crash_fs;
pub(crate) mod dir;
#[cfg(feature = "testing")]
mod discard;
#[cfg(feature = "testing")]
mod faulty;
pub mod fs;
mod marker;
#[cfg(feature = "s3")]
mod object;
mod open_error;
mod publish;
mod real_fs;
mod throttled;
mod tiered;

#[cfg(feature = "testing")]
pub use crash_fs::{CrashFs, CrashOptions};
pub use dir::{DirStore, OpenError, LOCK};
#[cfg(feature = "testing")]
pub use discard::DiscardStore;
#[cfg(feature = "testing")]
pub use faulty::{Fault, FaultPlan, FaultTarget, FaultyStore};
pub use fs::StoreFs;
use ickpt_format::ReadAt;
pub use marker::MARKER;
#[cfg(feature = "s3")]
pub use object::{parse_object_url, ObjectTier};
pub use publish::{RenameMode, RENAME_VAR};
pub use real_fs::RealFs;
use std::io;
pub use throttled::{parse_size, ThrottledStore, TokenBucket};
pub use tiered::{looks_whole, retry_other_copies, Tier, TieredStore};

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
    /// The identity recorded for this store; None for a store made before identities
    /// existed (format 3), or whose record was lost, until a writer sets one.
    fn identity(&self) -> io::Result<Option<StoreId>>;
    /// Record `id` durably as this store's identity.
    fn set_identity(&self, id: StoreId) -> io::Result<()>;
}

/// Sixteen random bytes made when a store is created and written into each of its version
/// files (format 3 on), so that a file copied in from another store, or another run's
/// store, is never taken for one of its own.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StoreId(pub [u8; 16]);

impl StoreId {
    /// A fresh random identity.
    pub fn generate() -> io::Result<StoreId> {
        let mut b = [0u8; 16];
        crate::sys::random::fill(&mut b)?;
        Ok(StoreId(b))
    }

    /// 32 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The inverse of [`to_hex`](Self::to_hex); None for anything else.
    pub fn from_hex(s: &str) -> Option<StoreId> {
        let s = s.as_bytes();
        if s.len() != 32 {
            return None;
        }
        let mut b = [0u8; 16];
        for (i, pair) in s.chunks_exact(2).enumerate() {
            let hex = std::str::from_utf8(pair).ok()?;
            b[i] = u8::from_str_radix(hex, 16).ok()?;
        }
        Some(StoreId(b))
    }
}

impl std::fmt::Debug for StoreId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreId({})", self.to_hex())
    }
}

impl std::fmt::Display for StoreId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// A boxed or shared store is a store.
macro_rules! store_behind_pointer {
    ($ptr:ty) => {
        impl Store for $ptr {
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
            fn identity(&self) -> io::Result<Option<StoreId>> {
                (**self).identity()
            }
            fn set_identity(&self, id: StoreId) -> io::Result<()> {
                (**self).set_identity(id)
            }
        }
    };
}
store_behind_pointer!(Box<dyn Store>);
store_behind_pointer!(std::sync::Arc<dyn Store>);

/// A committed object, read by offset.
pub trait StoreFile: ReadAt + Send + Sync {
    fn len(&self) -> u64;
    /// A hint that the file is about to be read front to back; by default nothing.
    fn advise_sequential(&self) {}
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An object being written.
pub trait StoreWriter: Send {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Replace `buf.len()` bytes already written, at `offset`, without moving the end: a
    /// pre-copied page written again (PRWIP), and a version's header written last. Never
    /// extends the object (InvalidInput if `offset + len` passes what was written).
    /// Unsupported by stores that only append (an object upload): [`can_overwrite`]
    /// says so before anything is written.
    ///
    /// [`can_overwrite`]: StoreWriter::can_overwrite
    fn overwrite_at(&mut self, _offset: u64, _buf: &[u8]) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
    /// Whether [`overwrite_at`](StoreWriter::overwrite_at) works on this writer.
    fn can_overwrite(&self) -> bool {
        false
    }
    /// Make the object durable and visible under its name, atomically: after a crash at any
    /// point either the whole object is there or none of it.
    fn commit(self: Box<Self>) -> io::Result<()>;
}

/// Whether `offset..offset + len` lies within the `written` bytes an overwrite may replace;
/// InvalidInput naming the range if not.
pub(crate) fn within_written(offset: u64, len: usize, written: u64) -> io::Result<()> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= written => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("an overwrite of {len} bytes at {offset} passes the {written} bytes written"),
        )),
    }
}

/// File name of a version.
pub fn version_name(version: u64) -> String {
    ickpt_format::numbered_name('v', version, ".ickpt")
}

/// The version a file name stands for, if it is a version file: only the one name
/// [`version_name`] gives each number (`v1.ickpt` beside `v00000001.ickpt` would list one
/// version twice).
pub fn parse_version_name(name: &str) -> Option<u64> {
    ickpt_format::parse_numbered_name(name, 'v', ".ickpt")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_ids_round_trip_through_hex() {
        let id = StoreId::generate().unwrap();
        assert_eq!(StoreId::from_hex(&id.to_hex()), Some(id));
        assert_ne!(StoreId::generate().unwrap(), id);
        for bad in ["", "00", &"g".repeat(32), &"0".repeat(33)] {
            assert_eq!(StoreId::from_hex(bad), None, "{bad}");
        }
    }

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
            "v1.ickpt",
            "v000000001.ickpt",
        ] {
            assert_eq!(parse_version_name(bad), None, "{bad}");
        }
    }
}
