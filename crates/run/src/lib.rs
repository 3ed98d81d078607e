//! `libickpt_run.so`: what `ickpt run` preloads into an unmodified program so that ickpt
//! checkpoints the whole process (`docs/transparent.md`).
//!
//! Its constructor opens an engine on the store named by `ICKPT_DIR`, reserves the restore
//! hole, installs the checkpoint signal and starts the checkpointing thread. It acts only in
//! the process `ickpt run` started (`ICKPT_RUN_PID`): programs that process starts inherit
//! the preload but not the checkpoints.

// The constructor is a function pointer in .init_array; the hole is a raw mapping.
#![allow(unsafe_code)]

mod arena;
mod buffer;
mod checkpointer;
mod file_ids;
mod interpose;
mod layout;
mod pagemap;
mod park;
mod refuse;
mod request;
mod signal;
mod snapshot;
mod stats;

use std::path::PathBuf;
use std::time::Duration;

#[global_allocator]
pub(crate) static HEAP: arena::Arena = arena::Arena::new();

/// The restore hole: reserved here so that no mapping of the program ever takes it; the
/// restorer runs from it.
const HOLE: usize = 64 << 20;

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = ickpt_run_init;

extern "C" fn ickpt_run_init() {
    interpose::resolve();
    let Ok(want) = std::env::var("ICKPT_RUN_PID") else {
        return;
    };
    if want.parse::<u32>().ok() != Some(std::process::id()) {
        return;
    }
    if let Some(why) = ickpt_process::mpi::refusal() {
        eprintln!("ickpt run: {why}");
        std::process::exit(2);
    }
    if let Err(e) = start() {
        eprintln!("ickpt run: {e}");
        std::process::exit(2);
    }
}

fn start() -> Result<(), String> {
    let dir = PathBuf::from(
        std::env::var_os("ICKPT_DIR").ok_or("ICKPT_DIR is not set (ickpt run sets it)")?,
    );
    let interval = match std::env::var("ICKPT_RUN_INTERVAL_MS") {
        Ok(v) => {
            let ms: u64 = v.parse().map_err(|_| {
                format!("ICKPT_RUN_INTERVAL_MS={v:?} is not a number of milliseconds")
            })?;
            (ms > 0).then(|| Duration::from_millis(ms))
        }
        Err(_) => None,
    };
    let signal = ickpt_process::checkpoint_signal::from_env()?;
    if std::env::var_os("ICKPT_OBJECT_URL").is_some_and(|u| !u.is_empty()) {
        return Err("an object-store tier (ICKPT_OBJECT_URL, --object) is not available under ickpt run yet: its client's connections cannot be restored; use --shared".into());
    }
    // ickpt's threads (the drain, started with the engine, and the checkpointing thread)
    // take no signal of the program's: one the program blocks everywhere to wait for it
    // (sigwait) would otherwise end on them, and with its default action end the process.
    // They inherit this mask; the main thread gets its own back below.
    let old_mask = signal::block_all_but_faults();
    let started = start_engine_and_thread(dir, interval, signal);
    signal::set_mask(&old_mask);
    started
}

fn start_engine_and_thread(
    dir: PathBuf,
    interval: Option<Duration>,
    signal: i32,
) -> Result<(), String> {
    let mut cfg = ickpt::Config::new(&dir);
    cfg.backend = ickpt::Backend::UffdAsync;
    cfg.mode = ickpt::format::CommitMode::Sync;
    // Every thread of the program is stopped while a checkpoint collects, so an async one
    // fences only the pages it collected. `ICKPT_RUN_WHOLE_FENCE=1` fences every page, as
    // the API does (to compare).
    cfg.others_stopped = !switch("ICKPT_RUN_WHOLE_FENCE", false)?;
    // A restart of a whole process should cost about what one full image does: a chain
    // ends before a restart from it would read more than one and a half of its full
    // version (`ICKPT_RESTART_BOUND` sets another bound, 0 none).
    cfg.restart_bound = 1.5;
    let mut engine =
        ickpt::Engine::open(cfg).map_err(|e| format!("opening {}: {e}", dir.display()))?;
    if engine.backend() != ickpt::Backend::UffdAsync {
        return Err(format!(
            "whole-process checkpoints need the uffd-async tracker (Linux 6.7+), not {}",
            engine.backend().as_str()
        ));
    }
    let is_async = engine.config().mode == ickpt::format::CommitMode::Async;
    if is_async {
        // The program goes on once the version's pages are scheduled; the commit's thread
        // runs beside it, its stack not the program's.
        engine.on_scheduled(Box::new(park::release_now));
        ickpt::whole_process::own_thread_stacks();
    }
    // Where the engine's temporary files are, as /proc/self/fd names them.
    let store_dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let hole = reserve_hole()?;
    let record = buffer::Buffer::new(&engine, buffer::RECORD_ID, 1 << 20)?;
    // Room for a small program's own state (about 3 MB of ickpt's, and 8 MiB to spare: see
    // `fit`), which the first capture grows for a larger one. Every full version stores each
    // page of it, as zeros where unwritten: at 64 MiB that cost a small program's sync stop
    // 33 ms.
    let snapshot = buffer::Buffer::new(&engine, buffer::SNAPSHOT_ID, 16 << 20)?;
    let entries = checkpointer::entries_for(&snapshot)?;
    let pagemap = std::fs::File::open("/proc/self/pagemap")
        .map_err(|e| format!("opening /proc/self/pagemap: {e}"))?;
    let (data, code) = own_segments();
    let mut memo = ickpt_process::capture::Memo::default();
    let held = store_dir.clone();
    // Descriptors whose record cannot change while the file stays open: a userfaultfd's
    // features are set once, a pagemap file's path is its process's, and the engine keeps
    // the store directory and its lock.
    memo.fds = ickpt_process::FdMemo::reusing(Box::new(move |f| {
        matches!(
            f.kind,
            ickpt_process::FdKind::Userfaultfd | ickpt_process::FdKind::Pagemap
        ) || ickpt::whole_process::is_store_held(&held, &f.path)
    }));
    let run = Box::new(checkpointer::Run {
        engine,
        record,
        snapshot,
        regions: Default::default(),
        data,
        code,
        stack: (0, 0),
        hole,
        interval,
        signal,
        // Async: the pages written are copied before the program is stopped, so the stop
        // fences only what is written meanwhile. `ICKPT_RUN_PRECOPY=0` leaves them all to
        // the stop's fence (to compare, or to keep versions compressed: pre-copied pages
        // are stored raw).
        precopy: is_async && switch("ICKPT_RUN_PRECOPY", true)?,
        entries,
        pagemap,
        files: Default::default(),
        memo,
        store_dir,
        broken: false,
        tag: 0,
        last: None,
        stats: stats::StatsFile::open()?,
    });
    signal::install(signal)
        .map_err(|e| format!("installing the handler of signal {signal}: {e}"))?;
    request::ACTIVE.store(true, std::sync::atomic::Ordering::SeqCst);
    std::thread::Builder::new()
        .name("ickpt-ckpt".into())
        .stack_size(1 << 20)
        .spawn(move || checkpointer::main(run))
        .map_err(|e| format!("starting the checkpointing thread: {e}"))?;
    Ok(())
}

/// The switch `name`: `default` when unset, 0 or 1 when set; anything else is refused,
/// naming it (a mistyped `off` must not leave the switch as it was without a word).
fn switch(name: &str, default: bool) -> Result<bool, String> {
    match std::env::var_os(name) {
        None => Ok(default),
        Some(v) if v == "0" => Ok(false),
        Some(v) if v == "1" => Ok(true),
        Some(v) => Err(format!(
            "{name}={:?} is neither 0 nor 1",
            v.to_string_lossy()
        )),
    }
}

fn reserve_hole() -> Result<(usize, usize), String> {
    // SAFETY: a fresh reservation with no access aliases no existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            HOLE,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(format!(
            "reserving the restore hole: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok((p as usize, p as usize + HOLE))
}

/// Address ranges, start and end.
type Spans = Vec<(usize, usize)>;

/// This library's segments, page-rounded: the writable ones (its statics, the engine's among
/// them), then the others (code and constants).
fn own_segments() -> (Spans, Spans) {
    struct Found {
        probe: usize,
        writable: Spans,
        read_only: Spans,
    }
    extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid info for the call's duration; `data` is the
        // `Found` passed below.
        let (info, found) = unsafe { (&*info, &mut *data.cast::<Found>()) };
        // SAFETY: `dlpi_phdr` points at `dlpi_phnum` program headers.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let base = info.dlpi_addr as usize;
        let load = |p: &&libc::Elf64_Phdr| p.p_type == libc::PT_LOAD;
        let ours = phdrs.iter().filter(load).any(|p| {
            let s = base + p.p_vaddr as usize;
            (s..s + p.p_memsz as usize).contains(&found.probe)
        });
        if ours {
            for p in phdrs.iter().filter(load) {
                let s = (base + p.p_vaddr as usize) & !4095;
                let e = (base + (p.p_vaddr + p.p_memsz) as usize).next_multiple_of(4096);
                match p.p_flags & libc::PF_W != 0 {
                    true => found.writable.push((s, e)),
                    false => found.read_only.push((s, e)),
                }
            }
            return 1;
        }
        0
    }
    let mut found = Found {
        probe: ickpt_run_init as *const () as usize,
        writable: Vec::new(),
        read_only: Vec::new(),
    };
    // SAFETY: `each` matches the callback type and only reads what the loader passes.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut found as *mut Found).cast()) };
    (found.writable, found.read_only)
}
