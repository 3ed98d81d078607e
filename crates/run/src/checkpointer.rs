//! The checkpointing thread (`ickpt-ckpt`): waits for a trigger, stops the program's
//! threads, captures the process and commits a version, then lets them go on.
//!
//! It checkpoints from inside the checkpoint signal's handler, raised on itself: its own
//! registers then lie in a signal frame on its stack like every other thread's, and a restart
//! resumes it from that frame, just after the raise, where it finds the restart word set.

// The library's state is reached through a raw pointer from the signal handler.
#![allow(unsafe_code)]

use crate::buffer::{Buffer, RECORD_ID, SNAPSHOT_ID};
use crate::layout::{self, Own};
use crate::park::{
    self, futex_wait, futex_wake, gettid, release, CHECKPOINTER, FILLED, PARKED, RELEASED,
    RELEASED_AT, ROUND, SLOTS,
};
use ickpt::Engine;
use ickpt_process::{role, ProcessRecord, Snapshot, ThreadRecord};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// Set by the restorer to the version it restored, before anything of the program runs.
pub static RESTARTED: AtomicU64 = AtomicU64::new(0);
/// Futex word: bumped by every trigger from outside (`ickpt checkpoint`).
pub static TRIGGER: AtomicU32 = AtomicU32::new(0);
static RUN: AtomicPtr<Run> = AtomicPtr::new(std::ptr::null_mut());

/// Bytes of ickpt's heap a tracked page comes to need at most (83 MB of heap at 4 GiB
/// tracked: the commit's per-page arrays, freed and made again each time).
const HEAP_PER_TRACKED_PAGE: u64 = 96;

/// How long the other threads get to stop before the checkpoint is given up.
const STOP_LIMIT: Duration = Duration::from_secs(10);

pub struct Run {
    pub engine: Engine,
    pub record: Buffer,
    pub snapshot: Buffer,
    /// Program regions tracked now: start address (= id) to length.
    pub regions: BTreeMap<u64, u64>,
    /// The library's own writable data (its statics, ickpt's among them).
    pub data: Vec<(usize, usize)>,
    /// The library's read-only segments (code, constants): never written, not even by the
    /// loader (relocations write only the writable segments, RELRO among them), so a
    /// checkpoint does not look for written pages there (1,860 of the 2,797 pages of the
    /// file mappings of a small C program, about 0.07 ms of each stop).
    pub code: Vec<(usize, usize)>,
    /// The checkpointing thread's stack mapping.
    pub stack: (usize, usize),
    pub hole: (usize, usize),
    pub interval: Option<Duration>,
    pub signal: i32,
    /// Copy the pages written before each stop (`Engine::precopy_written`).
    pub precopy: bool,
    pub pagemap: std::fs::File,
    /// The identities of the files the program maps.
    pub files: crate::file_ids::FileIds,
    /// A pagemap word for each page of the snapshot buffer (no span it holds is larger), in
    /// scratch memory: on the heap they would be copied with it, different every time.
    pub entries: ickpt::whole_process::ScratchBytes,
    /// What the next capture may take from this one.
    pub memo: ickpt_process::capture::Memo,
    /// The store's directory, canonical.
    pub store_dir: std::path::PathBuf,
    /// Checkpoints stop once tracking could not be taken up after a restart.
    pub broken: bool,
    /// The tag of the checkpoint under way (the program's `ickpt_checkpoint_tagged`).
    pub tag: u64,
    /// The checkpoint just committed, until its figures are written.
    pub last: Option<crate::stats::Done>,
    pub stats: crate::stats::StatsFile,
}

/// The thread's body: never returns.
pub fn main(mut run: Box<Run>) {
    CHECKPOINTER.store(gettid() as i32, SeqCst);
    ickpt::whole_process::prepare_checkpointing_thread();
    // This thread's stack: the mapping holding this very local.
    let here = &run as *const Box<Run> as u64;
    if let Ok(maps) = ickpt_process::read_maps() {
        if let Some(m) = maps.iter().find(|m| m.start <= here && here < m.end) {
            run.stack = (m.start as usize, m.end as usize);
        }
    }
    let interval = run.interval;
    crate::signal::unblock(run.signal);
    SIGNAL.store(run.signal, SeqCst);
    RUN.store(Box::into_raw(run), SeqCst);
    let mut next = interval.map(|i| Instant::now() + i);
    // Triggers answered so far: one that came before this thread first looked (the program
    // asking at once, `ickpt checkpoint` right after the start) is still seen as new.
    let mut seen = 0;
    loop {
        let wait = next.map(|n| n.saturating_duration_since(Instant::now()));
        let triggered = TRIGGER.load(SeqCst) != seen;
        if !triggered && wait != Some(Duration::ZERO) {
            let ms = wait.map_or(60_000, |w| w.as_millis().clamp(1, 60_000) as u64);
            futex_wait(&TRIGGER, seen, ms);
            let triggered = TRIGGER.load(SeqCst) != seen;
            let due = next.is_some_and(|n| Instant::now() >= n);
            if !triggered && !due {
                continue;
            }
        }
        seen = TRIGGER.load(SeqCst);
        let asked = crate::request::pending();
        let version = checkpoint_once(asked.map_or(0, |a| a.1));
        if let Some((upto, _)) = asked {
            crate::request::answer(upto, version);
        }
        next = interval.map(|i| Instant::now() + i);
    }
}

/// The checkpoint signal (0 before the thread starts).
pub fn signal() -> i32 {
    SIGNAL.load(SeqCst)
}
static SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

fn run() -> &'static mut Run {
    // SAFETY: set before the loop starts and never freed; only this thread (in its loop or
    // its own signal handler, never both at once) dereferences it.
    unsafe { &mut *RUN.load(SeqCst) }
}

/// One checkpoint of the whole process, the version carrying `tag`: its number once
/// committed, None when it was given up or failed (said on stderr).
fn checkpoint_once(tag: u64) -> Option<u64> {
    if run().broken {
        return None;
    }
    run().tag = tag;
    // With a lower tier, the drain copies versions behind the commits on a thread of ickpt's:
    // let it finish first, so that it waits idle (holding nothing) while the process is
    // captured.
    if let Err(e) = run().engine.wait_drained() {
        eprintln!("ickpt run: copying to the lower tier failed: {e}");
    }
    let precopy_started = Instant::now();
    let precopied = if run().precopy {
        run().engine.precopy_written()
    } else {
        0
    };
    let precopy = (precopied, precopy_started.elapsed());
    let round = ROUND.load(SeqCst).wrapping_add(1);
    FILLED.store(0, SeqCst);
    PARKED.store(0, SeqCst);
    ROUND.store(round, SeqCst);
    let signal = run().signal;
    let started = Instant::now();
    let started_ns = park::monotonic_ns();
    RELEASED_AT.store(0, SeqCst);
    if let Err(e) = stop_others(signal) {
        release(round);
        eprintln!("ickpt run: checkpoint given up: {e}");
        return None;
    }
    let parked = started.elapsed();
    // SAFETY: sends the checkpoint signal to this very thread; its handler runs `in_handler`.
    unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), gettid(), signal) };
    let restored = RESTARTED.swap(0, SeqCst);
    if restored != 0 {
        after_restart(restored);
        RELEASED.store(ROUND.load(SeqCst), SeqCst);
        return Some(restored);
    }
    // Sync: the version is committed; async: the threads went on once its pages were
    // scheduled (`Engine::on_scheduled`), and this releases nobody.
    release(round);
    let stopped = match RELEASED_AT.load(SeqCst) {
        0 => started.elapsed(),
        at => Duration::from_nanos(at.saturating_sub(started_ns)),
    };
    let r = run();
    let mut done = r.last.take()?;
    // Async: the commit runs on; wait for it here, with the program running, so that it is
    // over before the next stop and its figures are known.
    if r.engine.config().mode == ickpt::format::CommitMode::Async {
        match r.engine.wait() {
            Ok(Some(info)) => done.info = info,
            Ok(None) => {}
            Err(e) => {
                eprintln!("ickpt run: checkpoint failed: {e}");
                return None;
            }
        }
    }
    r.stats.record(&done, parked, stopped, precopy);
    Some(done.info.version)
}

/// The kernel's count of this process's threads (`Threads:` of /proc/self/status).
fn thread_count() -> Option<usize> {
    let status = ickpt_process::capture::read_text("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}

/// The threads of this process, by /proc/self/task.
fn tasks() -> Vec<u32> {
    ickpt_process::capture::list_tids().unwrap_or_default()
}

/// Signal every thread but this one until all are stopped; a thread that does not stop in
/// time is named.
fn stop_others(signal: i32) -> Result<(), String> {
    let me = gettid();
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() };
    let mut signaled: Vec<u32> = Vec::new();
    let deadline = Instant::now() + STOP_LIMIT;
    loop {
        let alive = tasks();
        for &t in &alive {
            if t != me && !signaled.contains(&t) {
                // SAFETY: a signal to a thread of this process; a thread gone meanwhile
                // gives ESRCH, and is then not waited for.
                let rc = unsafe { libc::syscall(libc::SYS_tgkill, pid, t, signal) };
                if rc == 0 {
                    signaled.push(t);
                }
            }
        }
        // Checking before those signalled have stopped would only read /proc again.
        wait_parked(signaled.len() as u32);
        let parked = PARKED.load(SeqCst);
        let filled = (FILLED.load(SeqCst)).min(park::MAX_THREADS);
        let stopped: Vec<u32> = SLOTS[..filled].iter().map(|s| s.tid.load(SeqCst)).collect();
        let waiting: Vec<u32> = alive
            .iter()
            .copied()
            .filter(|t| *t != me && !stopped.contains(t))
            .collect();
        // A listing of /proc/self/task can miss a thread while others come and go: the
        // kernel's own count must agree that every thread but this one is stopped.
        if waiting.is_empty() && thread_count() == Some(stopped.len() + 1) {
            if FILLED.load(SeqCst) > park::MAX_THREADS {
                return Err(format!(
                    "the process has more than {} threads",
                    park::MAX_THREADS
                ));
            }
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "thread{} {} did not stop within {} s (blocking signal {} or in an uninterruptible wait); nothing was stored",
                if waiting.len() > 1 { "s" } else { "" },
                waiting.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", "),
                STOP_LIMIT.as_secs(),
                signal,
            ));
        }
        // A thread the listing missed, or one that has not stopped yet: list again, after
        // a short wait that keeps a thread that never stops from making this a busy loop.
        futex_wait(&PARKED, parked, 1);
    }
}

/// Wait until `n` threads have stopped in this round, or 20 ms. Spinning first, yielding
/// the CPU each time round (the thread being stopped may be waiting for it): a thread stops
/// within about 0.1 ms, and sleeping instead adds a wake-up, which on a VM costs as much
/// again.
fn wait_parked(n: u32) {
    const SPIN: Duration = Duration::from_micros(300);
    let spin_until = Instant::now() + SPIN;
    loop {
        let parked = PARKED.load(SeqCst);
        if parked >= n {
            return;
        }
        if Instant::now() >= spin_until {
            futex_wait(&PARKED, parked, 20);
            return;
        }
        // SAFETY: sched_yield has no arguments and cannot fail.
        unsafe { libc::sched_yield() };
    }
}

/// In the checkpoint signal's handler on this thread: capture the process and commit.
pub fn in_handler(frame: usize) {
    let r = run();
    match r.capture_and_commit(frame) {
        Ok(done) => r.last = Some(done),
        Err(e) => eprintln!("ickpt run: checkpoint failed: {e}"),
    }
}

/// Resumed by `ickpt restart` from the frame of the checkpoint that stored `version`.
fn after_restart(version: u64) {
    CHECKPOINTER.store(gettid() as i32, SeqCst);
    let r = run();
    crate::request::RESTARTS.fetch_add(1, SeqCst);
    if let Err(e) = r.engine.resume_after_restart(version) {
        eprintln!("ickpt run: after the restart of version {version}, tracking could not be taken up ({e}); the program goes on without checkpoints");
        r.broken = true;
    }
    // The other threads wait in the restorer until this word is 1.
    // SAFETY: the restorer's plan lies at the start of the hole, its first word this one.
    let go = unsafe { &*(r.hole.0 as *const AtomicU32) };
    go.store(1, SeqCst);
    futex_wake(go);
    // With the program running again (this thread alone touches the buffers): past the
    // record and the snapshot's spans the version stored zeros: the record's header says its
    // length, and the capture promised the snapshot's extent before ickpt's state was copied.
    // The first capture after a restart then reads no more of the buffers than any other (it
    // read all of the snapshot's 64 MiB, 36 ms of a 45 ms stop at 256 MiB).
    let held = ickpt_process::record_len(r.record.bytes());
    r.record.restored(held, &r.pagemap);
    let promised = r.snapshot.promised();
    r.snapshot.restored(promised, &r.pagemap);
    // The restart opened ickpt's own descriptors anew: what the next capture may take of
    // them is read now, not in its stop (5 of a small program's 10 descriptors, about
    // 25 us each there).
    let _ = ickpt_process::list_fds_with(&mut r.memo.fds);
}

impl Run {
    fn capture_and_commit(&mut self, frame: usize) -> Result<crate::stats::Done, String> {
        let started = Instant::now();
        if !crate::signal::intact(self.signal) {
            return Err(format!(
                "the program installed a handler of its own for signal {}, which ickpt needs; run it with another (ICKPT_RUN_SIGNAL)",
                self.signal
            ));
        }
        crate::refuse::children()?;
        // A program may install a SIGSEGV handler of its own after ickpt started (libgfortran
        // does): ickpt's goes back on top, chaining to it.
        ickpt::whole_process::take_back_fault_handler()
            .map_err(|e| format!("installing ickpt's SIGSEGV handler again: {e}"))?;
        // Tracking changes map memory of ickpt's own, so the layout is read again until it
        // holds still (once or twice).
        let mut layout = None;
        for _ in 0..4 {
            let pieces = self.layout()?;
            if self.fit(&pieces)? {
                layout = Some(pieces);
                break;
            }
        }
        let pieces = layout.ok_or("the address space kept changing")?;
        if std::env::var_os("ICKPT_RUN_DEBUG").is_some() {
            for p in &pieces {
                eprintln!(
                    "ickpt run: {:#x}-{:#x} {:?} prot {} snapshot {} {}",
                    p.rec.start, p.rec.end, p.rec.kind, p.rec.prot, p.snapshot, p.rec.name
                );
            }
        }
        let mut spans: Vec<(u64, u64)> = pieces
            .iter()
            .filter(|p| p.snapshot)
            .map(|p| (p.rec.start, p.rec.end))
            .collect();
        spans.push((0, 0)); // the heap's slot, filled in last
        let mut table: Vec<Snapshot> = Vec::with_capacity(spans.len());
        // The instant of ickpt's own state: from the heap's top read here to the end of the
        // copy nothing allocates.
        let (heap_start, heap_end) = crate::arena::used();
        *spans.last_mut().expect("pushed above") = (heap_start as u64, heap_end as u64);
        let used = crate::snapshot::take(
            &mut self.snapshot,
            &spans,
            &mut table,
            &self.pagemap,
            self.entries.as_mut_slice(),
        )?;
        let record = self.record(frame, pieces, table)?;
        let bytes = ickpt_process::encode(&record).map_err(|e| e.to_string())?;
        if bytes.len() > self.record.len {
            return Err("the process record outgrew its buffer".into());
        }
        self.record.write_changed(0, &bytes);
        self.record.clear_from(bytes.len());
        self.snapshot.clear_from(used as usize);
        let captured = started.elapsed();
        let info = self
            .engine
            .checkpoint_tagged(self.tag)
            .map_err(|e| e.to_string())?;
        Ok(crate::stats::Done {
            info,
            captured,
            snapshot: used,
        })
    }

    /// ickpt's own spans, then the address space cut by them.
    fn layout(&self) -> Result<Vec<layout::Piece>, String> {
        let maps =
            ickpt_process::read_maps().map_err(|e| format!("reading /proc/self/maps: {e}"))?;
        let mut own_mem = Vec::new();
        ickpt::whole_process::own_mappings(&mut own_mem);
        let mut own: Vec<(usize, usize, Own)> = own_mem
            .into_iter()
            .map(|(s, e, scratch)| (s, e, if scratch { Own::Zero } else { Own::Snapshot }))
            .collect();
        own.push((self.hole.0, self.hole.1, Own::Skip));
        let heap = crate::arena::reserved();
        // The heap's bytes go into the snapshot separately, up to its top at the instant.
        own.push((heap.0, heap.1, Own::Zero));
        for &(s, e) in &self.data {
            own.push((s, e, Own::Snapshot));
        }
        own.push((self.stack.0, self.stack.1, Own::Snapshot));
        // Each stopped thread's stack (the mapping its signal frame lies in) and its TLS block
        // (the mapping its thread pointer points into: glibc's thread control block with the
        // rseq area, the robust list and the tid word, which the kernel itself writes; for the
        // main thread it lies outside its stack).
        let filled = FILLED.load(SeqCst).min(park::MAX_THREADS);
        let mut threads_at = Vec::with_capacity(2 * filled);
        for slot in &SLOTS[..filled] {
            for addr in [slot.frame.load(SeqCst), slot.fs_base.load(SeqCst)] {
                threads_at.push(addr);
                if let Some(m) = maps.iter().find(|m| m.start <= addr && addr < m.end) {
                    own.push((m.start as usize, m.end as usize, Own::Stack));
                }
            }
        }
        own.push((
            self.record.start,
            self.record.start + self.record.len,
            Own::Region(RECORD_ID),
        ));
        own.push((
            self.snapshot.start,
            self.snapshot.start + self.snapshot.len,
            Own::Region(SNAPSHOT_ID),
        ));
        // The regions' bounds, start and end in turn, in address order (regions never
        // overlap). Not a region that holds a stopped thread's stack or control block: glibc
        // hands a new thread the cached stack of one that ended, which a checkpoint in
        // between tracked as plain memory. It is the thread's now, captured by value (the
        // kernel writes its rseq area, which a fence would turn into a SIGSEGV) and no
        // longer tracked.
        let cuts: Vec<u64> = self
            .regions
            .iter()
            .filter(|(&start, &len)| !threads_at.iter().any(|&a| start <= a && a < start + len))
            .flat_map(|(&start, &len)| [start, start + len])
            .collect();
        self.files.keep_mapped(&maps);
        layout::pieces(
            &maps,
            &own,
            &cuts,
            &|s, e| {
                let ours = self
                    .code
                    .iter()
                    .any(|&(cs, ce)| cs as u64 <= s && e <= ce as u64);
                !ours && crate::refuse::written_file_pages(&self.pagemap, s, e)
            },
            &|m| self.files.of(m),
        )
    }

    /// Make the engine's regions the layout's, and the buffers large enough. False when that
    /// changed the address space (read it again).
    fn fit(&mut self, pieces: &[layout::Piece]) -> Result<bool, String> {
        let mut changed = false;
        let wanted: BTreeMap<u64, u64> = pieces
            .iter()
            .filter_map(|p| match p.rec.kind {
                ickpt_process::MappingKind::Region(id) if id == p.rec.start => {
                    Some((id, p.rec.end - p.rec.start))
                }
                _ => None,
            })
            .collect();
        let gone: Vec<u64> = self
            .regions
            .iter()
            .filter(|(id, len)| wanted.get(id) != Some(len))
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.engine.unprotect(id).map_err(|e| e.to_string())?;
            self.regions.remove(&id);
            changed = true;
        }
        for (&id, &len) in &wanted {
            if self.regions.contains_key(&id) {
                continue;
            }
            // SAFETY: a private writable mapping of the program, as /proc/self/maps showed
            // it a moment ago with every other thread stopped; it stays mapped until the
            // program runs again, and a mapping it unmaps later is unprotected at the next
            // checkpoint before anything reads it.
            unsafe { self.engine.protect(id, id as *mut u8, len as usize) }
                .map_err(|e| format!("tracking the mapping at {id:#x} ({len} bytes): {e}"))?;
            self.regions.insert(id, len);
            changed = true;
        }
        // ickpt's heap grows with the pages tracked (the commit's per-page arrays): room for
        // it now, while the version stores everything anew anyway, rather than a larger
        // buffer made at the first increment, whose stop would pay for it.
        let tracked: u64 = self.regions.values().sum();
        let snap: u64 = pieces
            .iter()
            .filter(|p| p.snapshot)
            .map(|p| p.rec.end - p.rec.start)
            .sum::<u64>()
            + (crate::arena::used().1 - crate::arena::used().0) as u64
            + tracked / 4096 * HEAP_PER_TRACKED_PAGE
            + (8 << 20);
        if snap as usize > self.snapshot.len {
            self.snapshot.grow(&self.engine, snap as usize * 2)?;
            self.entries = entries_for(&self.snapshot)?;
            changed = true;
        }
        let rec = pieces.len() * 512 + 64 * 1024;
        if rec > self.record.len {
            self.record.grow(&self.engine, rec * 2)?;
            changed = true;
        }
        Ok(!changed)
    }

    fn record(
        &mut self,
        frame: usize,
        pieces: Vec<layout::Piece>,
        snapshots: Vec<Snapshot>,
    ) -> Result<ProcessRecord, String> {
        // SAFETY: getpid cannot fail.
        let pid = unsafe { libc::getpid() } as u32;
        let me = park::Slot::here(frame);
        let filled = FILLED.load(SeqCst).min(park::MAX_THREADS);
        let mut threads: Vec<ThreadRecord> =
            SLOTS[..filled].iter().map(|s| s.record(pid)).collect();
        let mut mine = me.record(pid);
        mine.role = role::CHECKPOINTER;
        threads.push(mine);
        // What the capture reads by itself (kernel, files, descriptors, mm fields, signal
        // actions, timers), then what only this library knows.
        let mut record = ickpt_process::capture::process_base_with(&mut self.memo)
            .map_err(|e| format!("reading the process's state: {e}"))?;
        // The next version's file, which pre-copy holds open, is the engine's.
        record
            .fds
            .retain(|f| !ickpt::whole_process::is_store_temporary(&self.store_dir, &f.path));
        crate::refuse::descriptors(&record.fds)?;
        record.mappings = pieces.into_iter().map(|p| p.rec).collect();
        record.threads = threads;
        record.hole = (self.hole.0 as u64, (self.hole.1 - self.hole.0) as u64);
        record.restart_word = &RESTARTED as *const AtomicU64 as u64;
        record.snapshots = snapshots;
        Ok(record)
    }
}

/// Room for a pagemap word per page of `snapshot`.
pub fn entries_for(snapshot: &Buffer) -> Result<ickpt::whole_process::ScratchBytes, String> {
    ickpt::whole_process::ScratchBytes::new((snapshot.len / 4096 + 1) * 8)
        .map_err(|e| format!("mapping room for the snapshot's page list: {e}"))
}
