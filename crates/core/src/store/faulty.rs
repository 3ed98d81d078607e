//! Fault injection (in the spirit of CRIU's fault-injection switches): a store wrapper that
//! fails writes with ENOSPC or EIO after a byte budget, leaving a torn object behind, fails
//! the commit, or "crashes" by abandoning a writer without cleanup.

use super::{Store, StoreWriter};
use std::io;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Accept this many bytes of the next object, then fail with ENOSPC.
    NoSpaceAfter(u64),
    /// Accept this many bytes of the next object, then fail with EIO.
    IoErrorAfter(u64),
    /// Fail the one write that reaches this many bytes of the next object with EIO (having
    /// written none of it), and accept the writes after it: a transient error, which leaves
    /// a hole only a writer that stops at the first error never commits.
    IoErrorOnceAt(u64),
    /// Write everything, then fail the commit (fsync) with EIO.
    CommitFails,
    /// Accept this many bytes, then fail and leave the temporary object behind as a killed
    /// process would.
    CrashAfter(u64),
}

impl Fault {
    /// Parse the `ICKPT_FAULT` syntax: `enospc@BYTES`, `eio@BYTES`, `eio-once@BYTES`,
    /// `commit-eio`, `crash@BYTES`.
    pub fn parse(s: &str) -> Option<Fault> {
        if s == "commit-eio" {
            return Some(Fault::CommitFails);
        }
        let (kind, n) = s.split_once('@')?;
        let n: u64 = n.parse().ok()?;
        match kind {
            "enospc" => Some(Fault::NoSpaceAfter(n)),
            "eio" => Some(Fault::IoErrorAfter(n)),
            "eio-once" => Some(Fault::IoErrorOnceAt(n)),
            "crash" => Some(Fault::CrashAfter(n)),
            _ => None,
        }
    }
}

/// Which objects an armed fault waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultTarget {
    /// The next object created, whatever it is.
    Any,
    /// The next global-commit record (`ICKPT_FAULT=record:...`): a record that fails after
    /// every version was written.
    Record,
}

/// What to inject, shared between the test and the store. Each armed fault fires once, on
/// the next object its target takes.
#[derive(Debug, Default)]
pub struct FaultPlan {
    armed: Mutex<Vec<(Fault, FaultTarget)>>,
}

impl FaultPlan {
    pub fn new() -> Arc<Self> {
        Arc::new(FaultPlan::default())
    }

    pub fn arm(&self, f: Fault) {
        self.arm_for(f, FaultTarget::Any);
    }

    pub fn arm_for(&self, f: Fault, target: FaultTarget) {
        let mut a = self.armed.lock().unwrap_or_else(|e| e.into_inner());
        a.push((f, target));
    }

    fn take(&self, name: &str) -> Option<Fault> {
        let mut a = self.armed.lock().unwrap_or_else(|e| e.into_inner());
        let record = ickpt_format::parse_global_name(name).is_some();
        let i = a
            .iter()
            .position(|&(_, t)| t == FaultTarget::Any || record)?;
        Some(a.remove(i).0)
    }
}

pub struct FaultyStore<S> {
    inner: S,
    plan: Arc<FaultPlan>,
}

impl<S: Store> FaultyStore<S> {
    pub fn new(inner: S, plan: Arc<FaultPlan>) -> Self {
        FaultyStore { inner, plan }
    }
}

impl<S: Store> Store for FaultyStore<S> {
    pass_through_to!(inner);

    fn create(&self, name: &str) -> io::Result<Box<dyn StoreWriter>> {
        let inner = self.inner.create(name)?;
        Ok(Box::new(FaultyWriter {
            inner: Some(inner),
            fault: self.plan.take(name),
            written: 0,
        }))
    }
}

struct FaultyWriter {
    inner: Option<Box<dyn StoreWriter>>,
    fault: Option<Fault>,
    written: u64,
}

impl FaultyWriter {
    /// The byte count the armed fault fails at (u64::MAX: none that counts bytes).
    fn limit(&self) -> u64 {
        match self.fault {
            Some(Fault::NoSpaceAfter(n) | Fault::IoErrorAfter(n) | Fault::CrashAfter(n)) => n,
            _ => u64::MAX,
        }
    }

    /// The armed fault fires: its error (a crash abandons the writer as a killed process
    /// would, leaving its temporary object behind).
    fn fire(&mut self) -> io::Error {
        match self.fault {
            Some(Fault::NoSpaceAfter(_)) => io::Error::from_raw_os_error(libc::ENOSPC),
            Some(Fault::CrashAfter(_)) => {
                // A killed process runs no destructors.
                std::mem::forget(self.inner.take());
                io::Error::other("injected crash")
            }
            _ => io::Error::from_raw_os_error(libc::EIO),
        }
    }

    fn inner(&mut self) -> io::Result<&mut Box<dyn StoreWriter>> {
        self.inner
            .as_mut()
            .ok_or_else(|| io::Error::other("writer crashed"))
    }

    /// A transient `IoErrorOnceAt` reached by `len` more bytes: fails this call only.
    fn once_at(&mut self, len: usize) -> io::Result<()> {
        if let Some(Fault::IoErrorOnceAt(n)) = self.fault {
            if self.written + len as u64 > n {
                self.fault = None;
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
        }
        Ok(())
    }
}

impl StoreWriter for FaultyWriter {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.once_at(buf.len())?;
        let room = self
            .limit()
            .saturating_sub(self.written)
            .min(buf.len() as u64) as usize;
        self.inner()?.write_all(&buf[..room])?;
        self.written += room as u64;
        if room == buf.len() {
            return Ok(());
        }
        Err(self.fire())
    }

    /// Bytes overwritten count against the fault's budget like bytes written (the device
    /// takes both); an overwrite that would pass it writes nothing.
    fn overwrite_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.once_at(buf.len())?;
        if self.written + buf.len() as u64 > self.limit() {
            self.written = self.limit();
            return Err(self.fire());
        }
        self.inner()?.overwrite_at(offset, buf)?;
        self.written += buf.len() as u64;
        Ok(())
    }

    fn can_overwrite(&self) -> bool {
        self.inner.as_ref().is_some_and(|w| w.can_overwrite())
    }

    fn commit(mut self: Box<Self>) -> io::Result<()> {
        if self.fault == Some(Fault::CommitFails) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.inner
            .take()
            .ok_or_else(|| io::Error::other("writer crashed"))?
            .commit()
    }
}
