//! Reading a process record back: the parser of `docs/FORMAT.md`, "The process record",
//! which it follows field for field. The record is untrusted input (a restart reads it from
//! a file anyone with the store could have edited), so every count is checked against its
//! limit and against the bytes left before anything is allocated by it, and nothing panics.

use crate::error::RecordError;
use crate::layout::{self, limits, FORMAT, MAGIC};
use crate::record::{
    FdRecord, FileId, MappingKind, MappingRecord, PosixTimer, ProcessRecord, SigAction, Snapshot,
    ThreadRecord, ITIMERS, MM_FIELDS, SIGNALS, THREAD_NAME_LEN,
};

/// How many bytes the record at the start of `b` takes: its header's total length, read
/// without parsing the rest (a record that decoded is followed by zeros only). None when `b`
/// does not start with a record's header, or the length claimed passes `b`'s end.
pub fn record_len(b: &[u8]) -> Option<usize> {
    let mut c = Cursor { b, at: 0 };
    if c.take(8, "magic").ok()? != MAGIC {
        return None;
    }
    c.take(8, "format, reserved, page size").ok()?;
    let total = usize::try_from(c.u64("total length").ok()?).ok()?;
    (total <= b.len()).then_some(total)
}

/// Decode a record from the bytes of its region: the record, then only zeros.
pub fn decode(b: &[u8]) -> Result<ProcessRecord, RecordError> {
    let mut c = Cursor { b, at: 0 };
    if c.take(8, "magic")? != MAGIC {
        return Err(RecordError::BadMagic);
    }
    let format = c.u16("format")?;
    if format == 0 {
        return Err(RecordError::invalid(8, "format", "0 is not a format"));
    }
    if format > FORMAT {
        return Err(RecordError::NewerFormat {
            found: format,
            supported: FORMAT,
        });
    }
    c.zeros(2, "reserved header bytes")?;
    let page_size = c.u32("page size")?;
    if !page_size.is_power_of_two()
        || !(limits::MIN_PAGE_SIZE..=limits::MAX_PAGE_SIZE).contains(&page_size)
    {
        return Err(RecordError::invalid(
            12,
            "page size",
            format!("{page_size} is not a power of two from 4 KiB to 64 KiB"),
        ));
    }
    let total = c.u64("total length")?;
    if total < layout::FIXED_LEN as u64 || total > b.len() as u64 {
        return Err(RecordError::invalid(
            16,
            "total length",
            format!(
                "{total}, but the record's fixed part is {} bytes and the input {}",
                layout::FIXED_LEN,
                b.len()
            ),
        ));
    }
    let total = total as usize;
    if let Some(i) = b[total..].iter().position(|&x| x != 0) {
        return Err(RecordError::invalid(
            total + i,
            "padding after the record",
            "not zero",
        ));
    }
    // From here on the record ends at `total`: a table running past it is truncated.
    c.b = &b[..total];
    let pid = c.u32("pid")?;
    if pid == 0 {
        return Err(RecordError::invalid(24, "pid", "0"));
    }
    let umask = c.u32("umask")?;
    if umask > 0o777 {
        return Err(RecordError::invalid(28, "umask", format!("{umask:#o}")));
    }
    let n_auxv = c.count("auxv words", limits::MAX_AUXV, 8)?;
    if n_auxv % 2 != 0 {
        return Err(RecordError::invalid(32, "auxv words", "an odd count"));
    }
    let n_map = c.count("mappings", limits::MAX_MAPPINGS, layout::MAPPING_LEN + 2)?;
    // Format 1 has no thread names and no timers.
    let named = format >= 2;
    let thread_len = if named {
        layout::THREAD_LEN
    } else {
        layout::THREAD_LEN_1
    };
    let n_thr = c.count("threads", limits::MAX_THREADS, thread_len)?;
    let n_sig = c.count("signal actions", SIGNALS as u64, layout::SIGACTION_LEN)?;
    if n_sig != SIGNALS {
        return Err(RecordError::invalid(
            44,
            "signal actions",
            format!("{n_sig}, not {SIGNALS}"),
        ));
    }
    let n_fd = c.count("descriptors", limits::MAX_FDS, layout::FD_LEN + 2)?;
    let n_snap = c.count("snapshots", limits::MAX_SNAPSHOTS, layout::SNAPSHOT_LEN)?;
    let n_timer = match named {
        true => c.count("timers", limits::MAX_TIMERS, layout::TIMER_LEN)?,
        false => 0,
    };
    c.zeros(if named { 4 } else { 8 }, "reserved header bytes")?;
    let mut mm = [0u64; MM_FIELDS];
    for v in &mut mm {
        *v = c.u64("mm fields")?;
    }
    let hole_at = c.at;
    let hole = (c.u64("hole address")?, c.u64("hole length")?);
    if hole.0.checked_add(hole.1).is_none() {
        return Err(RecordError::invalid(hole_at, "hole", "ends past 2^64"));
    }
    let restart_word = c.u64("restart word")?;
    let mut itimers = [(0u64, 0u64); ITIMERS];
    for t in &mut itimers {
        *t = (c.u64("interval timers")?, c.u64("interval timers")?);
    }
    let kernel = c.string("kernel")?;
    let arch = c.string("arch")?;
    let cwd = c.string("cwd")?;
    let exe = c.file_id("exe path")?;
    let mut auxv = Vec::with_capacity(n_auxv);
    for _ in 0..n_auxv {
        auxv.push(c.u64("auxv")?);
    }
    let mut mappings = Vec::with_capacity(n_map);
    for _ in 0..n_map {
        let at = c.at;
        let m = c.mapping(page_size as u64)?;
        if let Some(prev) = mappings.last().map(|p: &MappingRecord| p.end) {
            if m.start < prev {
                return Err(RecordError::invalid(
                    at,
                    "mapping start",
                    format!(
                        "{:#x} is below the previous mapping's end {prev:#x}",
                        m.start
                    ),
                ));
            }
        }
        mappings.push(m);
    }
    let mut threads = Vec::with_capacity(n_thr);
    for _ in 0..n_thr {
        threads.push(c.thread(named)?);
    }
    let mut sigactions = Vec::with_capacity(n_sig);
    for _ in 0..n_sig {
        sigactions.push(SigAction {
            handler: c.u64("signal handler")?,
            flags: c.u64("signal flags")?,
            restorer: c.u64("signal restorer")?,
            mask: c.u64("signal mask")?,
        });
    }
    let mut fds = Vec::with_capacity(n_fd);
    for _ in 0..n_fd {
        let at = c.at;
        let f = c.fd()?;
        if fds.last().is_some_and(|p: &FdRecord| f.fd <= p.fd) {
            return Err(RecordError::invalid(
                at,
                "descriptor number",
                format!("{} does not ascend", f.fd),
            ));
        }
        fds.push(f);
    }
    let mut snapshots = Vec::with_capacity(n_snap);
    for _ in 0..n_snap {
        snapshots.push(c.snapshot()?);
    }
    let mut timers = Vec::with_capacity(n_timer);
    for _ in 0..n_timer {
        let at = c.at;
        let t = c.timer()?;
        if timers.last().is_some_and(|p: &PosixTimer| t.id <= p.id) {
            return Err(RecordError::invalid(
                at,
                "timer id",
                format!("{} does not ascend", t.id),
            ));
        }
        timers.push(t);
    }
    if c.at != total {
        return Err(RecordError::invalid(
            c.at,
            "total length",
            format!("the tables end at {}, the header says {total}", c.at),
        ));
    }
    Ok(ProcessRecord {
        kernel,
        arch,
        page_size,
        pid,
        exe,
        cwd,
        umask,
        mm,
        auxv,
        mappings,
        threads,
        sigactions,
        fds,
        hole,
        restart_word,
        itimers,
        snapshots,
        timers,
    })
}

/// The bytes not read yet. Each read checks the length first; the record's entries are
/// read by the methods below, in the order of their diagrams.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn left(&self) -> usize {
        self.b.len() - self.at
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], RecordError> {
        if n > self.left() {
            return Err(RecordError::Truncated {
                offset: self.at as u64,
                what,
                need: n as u64,
                have: self.left() as u64,
            });
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], RecordError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, RecordError> {
        Ok(self.array::<1>(what)?[0])
    }
    fn u16(&mut self, what: &'static str) -> Result<u16, RecordError> {
        self.array(what).map(u16::from_le_bytes)
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, RecordError> {
        self.array(what).map(u32::from_le_bytes)
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, RecordError> {
        self.array(what).map(u64::from_le_bytes)
    }

    fn zeros(&mut self, n: usize, what: &'static str) -> Result<(), RecordError> {
        let at = self.at;
        match self.take(n, what)?.iter().position(|&x| x != 0) {
            Some(i) => Err(RecordError::invalid(at + i, what, "not zero")),
            None => Ok(()),
        }
    }

    /// A table's count from the header: within its limit, and no more entries of at least
    /// `min_len` bytes each than the record has room for after the fixed part.
    fn count(
        &mut self,
        what: &'static str,
        limit: u64,
        min_len: usize,
    ) -> Result<usize, RecordError> {
        let at = self.at;
        let n = self.u32(what)? as u64;
        if n > limit {
            return Err(RecordError::OverLimit {
                offset: at as u64,
                what,
                value: n,
                limit,
            });
        }
        let room = self.b.len().saturating_sub(layout::FIXED_LEN) as u64;
        if n * min_len as u64 > room {
            return Err(RecordError::Truncated {
                offset: at as u64,
                what,
                need: n * min_len as u64,
                have: room,
            });
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &'static str) -> Result<String, RecordError> {
        let at = self.at;
        let len = self.u16(what)? as u64;
        if len > limits::MAX_STRING {
            return Err(RecordError::OverLimit {
                offset: at as u64,
                what,
                value: len,
                limit: limits::MAX_STRING,
            });
        }
        let bytes = self.take(len as usize, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|e| {
            RecordError::invalid(at + 2 + e.utf8_error().valid_up_to(), what, "not UTF-8")
        })
    }

    fn file_id(&mut self, what: &'static str) -> Result<FileId, RecordError> {
        Ok(FileId {
            dev: self.u64("file device")?,
            ino: self.u64("file inode")?,
            size: self.u64("file size")?,
            mtime_ns: i128::from_le_bytes(self.array("file mtime")?),
            path: self.string(what)?,
        })
    }

    fn mapping(&mut self, page_size: u64) -> Result<MappingRecord, RecordError> {
        let at = self.at;
        let start = self.u64("mapping start")?;
        let end = self.u64("mapping end")?;
        let offset = self.u64("mapping offset")?;
        let region = self.u64("mapping region id")?;
        let [prot, flags, kind] = self.array("mapping codes")?;
        self.zeros(5, "reserved mapping bytes")?;
        if start >= end || start % page_size != 0 || end % page_size != 0 {
            return Err(RecordError::invalid(
                at,
                "mapping range",
                format!("{start:#x}-{end:#x} is not a non-empty run of whole pages"),
            ));
        }
        if offset % page_size != 0 {
            return Err(RecordError::invalid(
                at + 16,
                "mapping offset",
                "not page-aligned",
            ));
        }
        if prot & !7 != 0 {
            return Err(RecordError::invalid(
                at + 32,
                "mapping prot",
                format!("{prot:#x}"),
            ));
        }
        if flags & !7 != 0 {
            return Err(RecordError::invalid(
                at + 33,
                "mapping flags",
                format!("{flags:#x}"),
            ));
        }
        let kind = layout::mapping_kind(kind, region)
            .ok_or_else(|| RecordError::invalid(at + 34, "mapping kind", format!("code {kind}")))?;
        if region != 0 && !matches!(kind, MappingKind::Region(_)) {
            return Err(RecordError::invalid(
                at + 24,
                "mapping region id",
                "set on a mapping that is not a region",
            ));
        }
        let name = self.string("mapping name")?;
        let file = match flags & layout::MAP_HAS_FILE {
            0 => None,
            _ => Some(self.file_id("mapping file path")?),
        };
        if kind == MappingKind::File && file.is_none() {
            return Err(RecordError::invalid(
                at + 33,
                "mapping flags",
                "a mapping mapped again from its file has no file identity",
            ));
        }
        Ok(MappingRecord {
            start,
            end,
            prot,
            shared: flags & layout::MAP_SHARED != 0,
            growsdown: flags & layout::MAP_GROWSDOWN != 0,
            name,
            offset,
            file,
            kind,
        })
    }

    fn thread(&mut self, named: bool) -> Result<ThreadRecord, RecordError> {
        let at = self.at;
        let mut t = ThreadRecord {
            tid: self.u32("thread id")?,
            role: self.u32("thread role")?,
            frame: self.u64("thread frame")?,
            fs_base: self.u64("thread fs base")?,
            tid_address: self.u64("thread tid address")?,
            robust_head: self.u64("thread robust list head")?,
            robust_len: self.u64("thread robust list length")?,
            rseq: self.u64("thread rseq area")?,
            rseq_len: self.u32("thread rseq length")?,
            rseq_sig: self.u32("thread rseq signature")?,
            name: [0; THREAD_NAME_LEN],
        };
        if named {
            t.name = self.array("thread name")?;
            // The kernel's NUL-terminated name: bytes, then only zeros, the last always.
            let len = t
                .name
                .iter()
                .position(|&b| b == 0)
                .unwrap_or(THREAD_NAME_LEN);
            if let Some(i) = t.name[len..].iter().position(|&b| b != 0) {
                return Err(RecordError::invalid(
                    at + layout::THREAD_LEN_1 + len + i,
                    "thread name",
                    "a byte after its end is not zero",
                ));
            }
            if len == THREAD_NAME_LEN {
                return Err(RecordError::invalid(
                    at + layout::THREAD_LEN - 1,
                    "thread name",
                    "not terminated",
                ));
            }
        }
        if t.tid == 0 {
            return Err(RecordError::invalid(at, "thread id", "0"));
        }
        if t.role > crate::record::role::CHECKPOINTER {
            return Err(RecordError::invalid(
                at + 4,
                "thread role",
                format!("code {}", t.role),
            ));
        }
        Ok(t)
    }

    fn fd(&mut self) -> Result<FdRecord, RecordError> {
        let at = self.at;
        let fd = self.u32("descriptor number")? as i32;
        let kind = self.u8("descriptor kind")?;
        let flags = self.u8("descriptor flags")?;
        self.zeros(2, "reserved descriptor bytes")?;
        let open_flags = self.u32("descriptor open flags")? as i32;
        self.zeros(4, "reserved descriptor bytes")?;
        if fd < 0 {
            return Err(RecordError::invalid(
                at,
                "descriptor number",
                format!("{fd}"),
            ));
        }
        let kind = layout::fd_kind(kind).ok_or_else(|| {
            RecordError::invalid(at + 4, "descriptor kind", format!("code {kind}"))
        })?;
        if flags & !layout::FD_LOCKED != 0 {
            return Err(RecordError::invalid(
                at + 5,
                "descriptor flags",
                format!("{flags:#x}"),
            ));
        }
        Ok(FdRecord {
            fd,
            kind,
            flags: open_flags,
            offset: self.u64("descriptor offset")?,
            uffd_features: self.u64("descriptor uffd features")?,
            locked: flags & layout::FD_LOCKED != 0,
            path: self.string("descriptor path")?,
        })
    }

    fn timer(&mut self) -> Result<PosixTimer, RecordError> {
        let at = self.at;
        let id = self.u32("timer id")?;
        let clock = self.u32("timer clock")? as i32;
        let notify = self.u32("timer notification")?;
        let signal = self.u32("timer signal")?;
        let tid = self.u32("timer thread")?;
        self.zeros(4, "reserved timer bytes")?;
        if id > i32::MAX as u32 {
            return Err(RecordError::invalid(at, "timer id", format!("{id}")));
        }
        let notify = layout::timer_notify(notify, tid).ok_or_else(|| {
            RecordError::invalid(
                at + 8,
                "timer notification",
                format!("code {notify} with thread {tid}"),
            )
        })?;
        let least = match notify {
            crate::TimerNotify::None => 0,
            _ => 1,
        };
        if !(least..=SIGNALS as u32).contains(&signal) {
            return Err(RecordError::invalid(
                at + 12,
                "timer signal",
                format!("{signal}"),
            ));
        }
        Ok(PosixTimer {
            id,
            clock,
            notify,
            signal,
            value: self.u64("timer value")?,
            interval_ns: self.u64("timer interval")?,
            left_ns: self.u64("timer time left")?,
        })
    }

    fn snapshot(&mut self) -> Result<Snapshot, RecordError> {
        let at = self.at;
        let s = Snapshot {
            target: self.u64("snapshot target")?,
            len: self.u64("snapshot length")?,
            offset: self.u64("snapshot offset")?,
        };
        if s.len == 0
            || s.target.checked_add(s.len).is_none()
            || s.offset.checked_add(s.len).is_none()
        {
            return Err(RecordError::invalid(
                at,
                "snapshot",
                format!(
                    "{} bytes at {:#x} from offset {}: empty or past 2^64",
                    s.len, s.target, s.offset
                ),
            ));
        }
        Ok(s)
    }
}

/// The fuzz target's body (`fuzz/fuzz_targets/process_record.rs`; `tests/fuzz_corpus.rs`
/// replays its corpus): any bytes either fail to decode with an error, or decode to a
/// record that encodes back and decodes again to itself. Never a panic, never an
/// allocation a count in the bytes asked for before it was checked.
#[doc(hidden)]
pub fn fuzz_target(data: &[u8]) {
    if let Ok(r) = decode(data) {
        let again = crate::encode(&r).expect("a decoded record encodes");
        assert_eq!(decode(&again).expect("an encoded record decodes"), r);
    }
}
