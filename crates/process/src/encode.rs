//! Writing a process record: the layout of `docs/FORMAT.md`, "The process record", field
//! for field in the order [`crate::decode`] reads it.

use crate::error::RecordError;
use crate::layout::{self, limits, MAGIC};
use crate::record::{FileId, ProcessRecord};

/// The record's bytes. Refuses what [`crate::decode`] would refuse (a count or string over
/// its limit, mappings out of order, …): the result is decoded before it is returned, so a
/// restart never meets a record that ickpt wrote and cannot read.
pub fn encode(r: &ProcessRecord) -> Result<Vec<u8>, RecordError> {
    let counts = [
        ("auxv words", r.auxv.len(), limits::MAX_AUXV),
        ("mappings", r.mappings.len(), limits::MAX_MAPPINGS),
        ("threads", r.threads.len(), limits::MAX_THREADS),
        (
            "signal actions",
            r.sigactions.len(),
            crate::record::SIGNALS as u64,
        ),
        ("descriptors", r.fds.len(), limits::MAX_FDS),
        ("snapshots", r.snapshots.len(), limits::MAX_SNAPSHOTS),
        ("timers", r.timers.len(), limits::MAX_TIMERS),
    ];
    for (i, (what, count, limit)) in counts.into_iter().enumerate() {
        if count as u64 > limit {
            return Err(RecordError::OverLimit {
                offset: (32 + 4 * i) as u64,
                what,
                value: count as u64,
                limit,
            });
        }
    }
    let mut w = Writer(Vec::with_capacity(4096));
    w.bytes(&MAGIC);
    w.u16(layout::FORMAT);
    w.u16(0);
    w.u32(r.page_size);
    w.u64(0); // total_length, set below
    w.u32(r.pid);
    w.u32(r.umask);
    for (_, count, _) in counts {
        w.u32(count as u32);
    }
    w.u32(0);
    for v in r.mm {
        w.u64(v);
    }
    w.u64(r.hole.0);
    w.u64(r.hole.1);
    w.u64(r.restart_word);
    for (interval, value) in r.itimers {
        w.u64(interval);
        w.u64(value);
    }
    w.string("kernel", &r.kernel)?;
    w.string("arch", &r.arch)?;
    w.string("cwd", &r.cwd)?;
    w.file_id("exe path", &r.exe)?;
    for &v in &r.auxv {
        w.u64(v);
    }
    for m in &r.mappings {
        let (kind, region) = layout::mapping_kind_code(m.kind);
        let flags = (m.shared as u8 * layout::MAP_SHARED)
            | (m.growsdown as u8 * layout::MAP_GROWSDOWN)
            | (m.file.is_some() as u8 * layout::MAP_HAS_FILE);
        w.u64(m.start);
        w.u64(m.end);
        w.u64(m.offset);
        w.u64(region);
        w.bytes(&[m.prot, flags, kind, 0, 0, 0, 0, 0]);
        w.string("mapping name", &m.name)?;
        if let Some(f) = &m.file {
            w.file_id("mapping file path", f)?;
        }
    }
    for t in &r.threads {
        w.u32(t.tid);
        w.u32(t.role);
        for v in [
            t.frame,
            t.fs_base,
            t.tid_address,
            t.robust_head,
            t.robust_len,
            t.rseq,
        ] {
            w.u64(v);
        }
        w.u32(t.rseq_len);
        w.u32(t.rseq_sig);
        w.bytes(&t.name);
    }
    for s in &r.sigactions {
        for v in [s.handler, s.flags, s.restorer, s.mask] {
            w.u64(v);
        }
    }
    for f in &r.fds {
        w.u32(f.fd as u32);
        w.bytes(&[
            layout::fd_kind_code(f.kind),
            f.locked as u8 * layout::FD_LOCKED,
        ]);
        w.u16(0);
        w.u32(f.flags as u32);
        w.u32(0);
        w.u64(f.offset);
        w.u64(f.uffd_features);
        w.string("descriptor path", &f.path)?;
    }
    for s in &r.snapshots {
        w.u64(s.target);
        w.u64(s.len);
        w.u64(s.offset);
    }
    for t in &r.timers {
        let (notify, tid) = layout::timer_notify_code(t.notify);
        for v in [t.id, t.clock as u32, notify, t.signal, tid, 0] {
            w.u32(v);
        }
        w.u64(t.value);
        w.u64(t.interval_ns);
        w.u64(t.left_ns);
    }
    let mut out = w.0;
    let total = out.len() as u64;
    out[16..24].copy_from_slice(&total.to_le_bytes());
    crate::decode::decode(&out)?;
    Ok(out)
}

struct Writer(Vec<u8>);

impl Writer {
    fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    fn u16(&mut self, v: u16) {
        self.bytes(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    fn string(&mut self, what: &'static str, s: &str) -> Result<(), RecordError> {
        if s.len() as u64 > limits::MAX_STRING {
            return Err(RecordError::OverLimit {
                offset: self.0.len() as u64,
                what,
                value: s.len() as u64,
                limit: limits::MAX_STRING,
            });
        }
        self.u16(s.len() as u16);
        self.bytes(s.as_bytes());
        Ok(())
    }

    fn file_id(&mut self, what: &'static str, f: &FileId) -> Result<(), RecordError> {
        self.u64(f.dev);
        self.u64(f.ino);
        self.u64(f.size);
        self.bytes(&f.mtime_ns.to_le_bytes());
        self.string(what, &f.path)
    }
}
