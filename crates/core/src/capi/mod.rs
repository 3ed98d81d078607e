//! The C ABI. Rules (docs/abi.md): every call returns an `ickpt_result`; pointers are checked
//! for NULL; out-parameters are written only on success; no panic crosses the boundary; the
//! message of the last failure on a thread is available from `ickpt_last_error`.
#![allow(non_camel_case_types)]
// These functions are called from C, where the pointer contracts are documented in ickpt.h;
// marking them `unsafe` would change nothing for C callers.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

mod boundary;
mod engine_lock;
mod io;
mod precopy;
mod sections;
mod types;

pub use io::*;
pub use precopy::*;
pub use sections::*;
pub use types::*;

use crate::config::{Config, SettingError};
use crate::engine::Engine;
use crate::error::{Error, ForkedChild, ReadError};
use crate::track::{Backend, Granularity};
use boundary::{guard, with_engine};
use engine_lock::EngineLock;
use ickpt_format::{CommitMode, FlushOrder};
use std::ffi::{c_char, c_void, CStr};

/// The process's engine, with the pid of the process that created it: a child forked after
/// `ickpt_init` inherits this memory but must not write into its parent's store.
static ENGINE: EngineLock<Option<(u32, Engine)>> = EngineLock::new(None);

/// Fill the `size` bytes at `cfg` with the defaults of the fields they hold, and set
/// `struct_size` to `size`: backend auto, full_every 10, keep_chains 2 (keep_versions and
/// keep_within_s 0: no such limits), policy fixed, restore_weight_pct 100, compression
/// ICKPT_COMPRESS_DEFAULT, dir NULL (then
/// `ICKPT_DIR` is used), bandwidth 0 (unlimited), mode sync, flush order adaptive, cow_bytes
/// 16 MiB, granularity page, acck_pieces_log2 6, huge_pages 1. Call it as
/// `ickpt_config_init(&cfg)`, the header's macro, which passes `sizeof cfg`: nothing past
/// the caller's struct is ever written, whichever `ickpt.h` the program was built with.
#[no_mangle]
pub extern "C" fn ickpt_config_init_sized(cfg: *mut ickpt_config, size: usize) -> ickpt_result {
    guard(|| {
        if cfg.is_null() {
            return Err(Error::Null { what: "cfg" });
        }
        check_config_size(size)?;
        // SAFETY: by contract `cfg` points to `size` writable bytes.
        unsafe {
            write_sized(&default_config(), cfg, size);
            std::ptr::addr_of_mut!((*cfg).struct_size).write(size as u32);
        }
        Ok(())
    })
}

/// The symbol programs built before `ickpt_config_init_sized` existed call: it writes the
/// 64-byte layout they were built with (the header now maps `ickpt_config_init` to the sized
/// call, so this size stays frozen whatever is appended to `ickpt_config`).
#[no_mangle]
pub extern "C" fn ickpt_config_init(cfg: *mut ickpt_config) -> ickpt_result {
    ickpt_config_init_sized(cfg, CONFIG_SIZE_OF_UNSIZED_INIT)
}

/// What `ickpt_config_init` (the unsized symbol) has always written.
const CONFIG_SIZE_OF_UNSIZED_INIT: usize = 64;

fn default_config() -> ickpt_config {
    let d = Config::new("");
    ickpt_config {
        struct_size: std::mem::size_of::<ickpt_config>() as u32,
        backend: ICKPT_BACKEND_AUTO,
        full_every: d.full_every,
        keep_chains: d.keep_chains,
        dir: std::ptr::null(),
        bandwidth: 0,
        mode: ICKPT_MODE_SYNC,
        flush_order: ICKPT_FLUSH_ADAPTIVE,
        cow_bytes: d.cow_bytes as u64,
        granularity: ICKPT_GRANULARITY_PAGE,
        acck_pieces_log2: d.acck_pieces_log2,
        huge_pages: d.huge_pages as u32,
        drain_bandwidth: 0,
        shared_dir: std::ptr::null(),
        object_url: std::ptr::null(),
        keep_versions: 0,
        keep_within_s: 0,
        policy: ICKPT_POLICY_FIXED,
        restore_weight_pct: (d.restore_weight * 100.0) as u32,
        compression: ICKPT_COMPRESS_DEFAULT,
        compress_level: 0,
        precopy: ICKPT_PRECOPY_OFF,
        checkpoint_interval_ms: 0,
    }
}

/// A field of `ickpt_config` with a value no constant of its type has.
fn setting(field: &'static str, value: impl std::fmt::Display) -> Error {
    SettingError::new(
        field,
        value.to_string(),
        "one of the values ickpt.h defines for it",
    )
    .into()
}

/// The first layout of `ickpt_config` (ickpt 0.1.0) ended after `dir`.
const FIRST_CONFIG_SIZE: usize = std::mem::offset_of!(ickpt_config, bandwidth);

/// Whether `size` can be the size of some version of `ickpt_config`.
fn check_config_size(size: usize) -> Result<(), Error> {
    let refuse = |why: String| {
        Err(SettingError::new(
            "cfg->struct_size",
            size.to_string(),
            format!(
                "the size of an ickpt_config (this one is {why}); call ickpt_config_init first"
            ),
        )
        .into())
    };
    if size < FIRST_CONFIG_SIZE {
        return refuse(format!(
            "less than any ickpt_config ({FIRST_CONFIG_SIZE} bytes at the least)"
        ));
    }
    // Every version's size is a multiple of the alignment, so no field is ever cut in two.
    // (is_multiple_of is newer than the Rust 1.85 the workspace supports.)
    if size.next_multiple_of(std::mem::align_of::<ickpt_config>()) != size {
        return refuse("not the size of any ickpt_config".into());
    }
    // As Linux's openat2 and clone3 do: beyond a page it is garbage, not a newer struct,
    // and reading that far could fault.
    if size > 4096 {
        return refuse("larger than any ickpt_config can be (4096 bytes)".into());
    }
    Ok(())
}

/// Read the caller's `ickpt_config`, of whichever version its program was compiled with
/// (docs/abi.md, rule 7): the fields its `struct_size` covers, the defaults for the others.
/// Beyond the fields this library knows, the caller's bytes must be zero: a field set there
/// is one this library would silently ignore.
fn read_config(cfg: *const ickpt_config) -> Result<ickpt_config, Error> {
    let known = std::mem::size_of::<ickpt_config>();
    // SAFETY: non-NULL and, by the API contract, an ickpt_config of some version: every
    // version starts with struct_size. No reference is made, as the caller's struct may be
    // shorter than this library's.
    let size = unsafe { std::ptr::addr_of!((*cfg).struct_size).read() } as usize;
    check_config_size(size)?;
    if size > known {
        // SAFETY: the caller's struct has `size` bytes, of which these are the last.
        let tail = unsafe { std::slice::from_raw_parts(cfg.cast::<u8>().add(known), size - known) };
        if let Some(at) = tail.iter().position(|&b| b != 0) {
            return Err(SettingError::new(
                "cfg->struct_size",
                size.to_string(),
                format!(
                    "at most {known}, or zero bytes past it: this libickpt ({}) knows only \
                     the first {known} bytes of ickpt_config, and byte {} is not zero, so the \
                     program sets a field this library does not have; run it with the \
                     libickpt it was built for",
                    env!("CARGO_PKG_VERSION"),
                    known + at
                ),
            )
            .into());
        }
    }
    let mut c = default_config();
    macro_rules! take {
        ($($field:ident),*) => {
            // Exhaustive: a field added to ickpt_config does not compile until listed here.
            let ickpt_config { struct_size: _, $($field: _),* } = c;
            $(
                if std::mem::offset_of!(ickpt_config, $field) + std::mem::size_of_val(&c.$field)
                    <= size
                {
                    // SAFETY: the field lies within the caller's `size` bytes.
                    c.$field = unsafe { std::ptr::addr_of!((*cfg).$field).read() };
                }
            )*
        };
    }
    take!(
        backend,
        full_every,
        keep_chains,
        dir,
        bandwidth,
        mode,
        flush_order,
        cow_bytes,
        granularity,
        acck_pieces_log2,
        huge_pages,
        drain_bandwidth,
        shared_dir,
        object_url,
        keep_versions,
        keep_within_s,
        policy,
        restore_weight_pct,
        compression,
        compress_level,
        precopy,
        checkpoint_interval_ms
    );
    Ok(c)
}

/// Start ickpt for this process. `cfg` may be NULL for the defaults. The store directory is
/// created if needed (owner-only, 0700); it must be empty or an ickpt store, owned by this
/// user and not writable by group or others, and not a symbolic link.
#[no_mangle]
pub extern "C" fn ickpt_init(cfg: *const ickpt_config) -> ickpt_result {
    guard(|| {
        let mut slot = ENGINE.write();
        match &*slot {
            Some((pid, _)) if *pid == std::process::id() => return Err(Error::AlreadyInitialized),
            Some(_) => {
                // Inherited through fork: the parent owns its store. Stop tracking its
                // regions here without unmapping memory the child may still use.
                if let Some((_, inherited)) = slot.take() {
                    inherited.abandon_after_fork();
                }
            }
            None => {}
        }
        let mut c = Config::new("");
        let mut dir = None;
        if !cfg.is_null() {
            let cfg = read_config(cfg)?;
            c.backend = match cfg.backend {
                ICKPT_BACKEND_AUTO => Backend::Auto,
                ICKPT_BACKEND_MPROTECT => Backend::Mprotect,
                ICKPT_BACKEND_UFFD => Backend::Uffd,
                ICKPT_BACKEND_UFFD_ASYNC => Backend::UffdAsync,
                b => return Err(setting("cfg->backend", b)),
            };
            c.full_every = cfg.full_every;
            c.keep_chains = cfg.keep_chains;
            c.bandwidth = (cfg.bandwidth != 0).then_some(cfg.bandwidth);
            c.mode = match cfg.mode {
                ICKPT_MODE_SYNC => CommitMode::Sync,
                ICKPT_MODE_ASYNC => CommitMode::Async,
                m => return Err(setting("cfg->mode", m)),
            };
            c.flush_order = match cfg.flush_order {
                ICKPT_FLUSH_ADDRESS => FlushOrder::Address,
                ICKPT_FLUSH_ADAPTIVE => FlushOrder::Adaptive,
                o => return Err(setting("cfg->flush_order", o)),
            };
            c.granularity = match cfg.granularity {
                ICKPT_GRANULARITY_PAGE => Granularity::Page,
                ICKPT_GRANULARITY_ADAPTIVE => Granularity::Adaptive,
                g => return Err(setting("cfg->granularity", g)),
            };
            c.acck_pieces_log2 = cfg.acck_pieces_log2;
            c.huge_pages = match cfg.huge_pages {
                0 => false,
                1 => true,
                h => return Err(setting("cfg->huge_pages", h)),
            };
            c.cow_bytes = usize::try_from(cfg.cow_bytes)
                .map_err(|_| setting("cfg->cow_bytes", cfg.cow_bytes))?;
            dir = c_path("cfg->dir", cfg.dir)?;
            c.shared_dir = c_path("cfg->shared_dir", cfg.shared_dir)?;
            c.object_url = c_path("cfg->object_url", cfg.object_url)?
                // c_path has checked the bytes are UTF-8.
                .and_then(|p| p.into_os_string().into_string().ok());
            c.drain_bandwidth = (cfg.drain_bandwidth != 0).then_some(cfg.drain_bandwidth);
            c.keep_versions = cfg.keep_versions;
            c.policy = match cfg.policy {
                ICKPT_POLICY_FIXED => crate::policy::KindPolicy::Fixed,
                ICKPT_POLICY_COST => crate::policy::KindPolicy::Cost,
                p => return Err(setting("cfg->policy", p)),
            };
            c.restore_weight = f64::from(cfg.restore_weight_pct) / 100.0;
            c.compression = match cfg.compression {
                ICKPT_COMPRESS_DEFAULT => c.compression,
                ICKPT_COMPRESS_OFF => crate::Compression::Off,
                ICKPT_COMPRESS_FAST => crate::Compression::FAST,
                ICKPT_COMPRESS_HIGH => crate::Compression::HIGH,
                ICKPT_COMPRESS_LEVEL
                    if crate::Compression::LEVELS.contains(&cfg.compress_level) =>
                {
                    crate::Compression::Zstd(cfg.compress_level)
                }
                ICKPT_COMPRESS_LEVEL => {
                    return Err(SettingError::new(
                        "cfg->compress_level",
                        cfg.compress_level.to_string(),
                        "a zstd level from -7 to 19",
                    )
                    .into())
                }
                x => return Err(setting("cfg->compression", x)),
            };
            // A level with any other setting would be ignored: the program meant something
            // else than it gets.
            if cfg.compression != ICKPT_COMPRESS_LEVEL && cfg.compress_level != 0 {
                return Err(SettingError::new(
                    "cfg->compress_level",
                    cfg.compress_level.to_string(),
                    "0 unless cfg->compression is ICKPT_COMPRESS_LEVEL, the one setting that \
                     uses it (set that to compress at this level)",
                )
                .into());
            }
            c.precopy = crate::policy::prwip::Strategy::from_code(cfg.precopy)
                .ok_or_else(|| setting("cfg->precopy", cfg.precopy))?;
            c.checkpoint_interval = (cfg.checkpoint_interval_ms != 0)
                .then(|| std::time::Duration::from_millis(cfg.checkpoint_interval_ms.into()));
            c.keep_within = (cfg.keep_within_s != 0)
                .then(|| std::time::Duration::from_secs(cfg.keep_within_s.into()));
        }
        // ICKPT_DIR only when cfg->dir is NULL: a program that names its directory never
        // fails on a variable it does not use.
        let dir = match dir {
            Some(d) => Some(d),
            None => crate::config::env::dir()?,
        };
        c.dir = dir.filter(|d| !d.as_os_str().is_empty()).ok_or_else(|| {
            SettingError::new(
                "cfg->dir",
                "NULL",
                "a store directory: set cfg->dir or ICKPT_DIR",
            )
        })?;
        *slot = Some((std::process::id(), Engine::open(c)?));
        Ok(())
    })
}

/// A path field of `ickpt_config`: None for NULL, else its string, which must be UTF-8.
fn c_path(field: &'static str, p: *const c_char) -> Result<Option<std::path::PathBuf>, Error> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, and the contract says a NUL-terminated string.
    let s = unsafe { CStr::from_ptr(p) };
    let s = s.to_str().map_err(|_| {
        SettingError::new(
            field,
            format!("{:?}", s.to_string_lossy()),
            "a path in UTF-8",
        )
    })?;
    Ok(Some(s.into()))
}

/// Wait until every version committed so far is durable on the shared tier too
/// (`cfg->shared_dir`), after an async commit still running; ICKPT_OK at once without one.
/// A shared tier that failed (full: ICKPT_ERR_NO_SPACE; unreachable: ICKPT_ERR_IO; another
/// store's: ICKPT_ERR_NOT_A_STORE) fails this call, and ickpt_last_error() names it; the
/// versions stay committed in `dir`, and the drain tries again at the next checkpoint.
#[no_mangle]
pub extern "C" fn ickpt_wait_drained() -> ickpt_result {
    guard(|| with_engine(&ENGINE, |e| e.wait_drained()))
}

/// Stop ickpt: a commit still running is finished, then the drain to the shared tier
/// (`ickpt_wait_drained`), every region is unprotected and memory from `ickpt_malloc` is
/// released. ickpt is finalized even when this returns an error: the error of an async
/// commit that failed and was not reported yet, or of the drain.
#[no_mangle]
pub extern "C" fn ickpt_finalize() -> ickpt_result {
    guard(|| {
        let mut slot = ENGINE.write();
        match slot.take() {
            Some((pid, e)) if pid == std::process::id() => {
                // A commit still running is finished first; if it (or an earlier one no
                // call has reported yet) failed, say so, after finalizing all the same.
                let last = e.wait();
                let drained = e.wait_drained();
                drop(e);
                last?;
                drained
            }
            Some(inherited) => {
                std::mem::forget(inherited);
                Err(ForkedChild.into())
            }
            None => Err(Error::NotInitialized),
        }
    })
}

/// Track `len` bytes at `ptr` as region `id`. Any alignment: the covering pages are tracked,
/// only the bytes of the range are saved and restored. The memory must stay mapped until
/// `ickpt_unprotect(id)`.
#[no_mangle]
pub extern "C" fn ickpt_protect(id: u64, ptr: *mut c_void, len: usize) -> ickpt_result {
    guard(|| {
        if ptr.is_null() {
            return Err(Error::Null { what: "ptr" });
        }
        // SAFETY: the C caller promises ptr..ptr+len is its own read-write memory that stays
        // mapped until unprotected (documented in ickpt.h).
        with_engine(&ENGINE, |e| unsafe { e.protect(id, ptr.cast(), len) })
    })
}

/// Stop tracking region `id`; later versions no longer contain it.
#[no_mangle]
pub extern "C" fn ickpt_unprotect(id: u64) -> ickpt_result {
    guard(|| with_engine(&ENGINE, |e| e.unprotect(id)))
}

/// Allocate `size` zeroed bytes, page-aligned, tracked as region `id`; `*out` receives the
/// pointer. Release with `ickpt_free`.
#[no_mangle]
pub extern "C" fn ickpt_malloc(id: u64, size: usize, out: *mut *mut c_void) -> ickpt_result {
    guard(|| {
        let out = out_ptr(out, "out")?;
        let p = with_engine(&ENGINE, |e| e.alloc(id, size))?;
        *out = p.cast();
        Ok(())
    })
}

/// Release memory from `ickpt_malloc`.
#[no_mangle]
pub extern "C" fn ickpt_free(ptr: *mut c_void) -> ickpt_result {
    guard(|| {
        if ptr.is_null() {
            return Err(Error::Null { what: "ptr" });
        }
        with_engine(&ENGINE, |e| e.free(ptr.cast()))
    })
}

/// Take a checkpoint of every protected region. Sync mode: returns once the version is
/// committed. Async mode: returns once its pages are scheduled and the application may
/// write again; a checkpoint still committing is waited for first, and its failure, if it
/// failed, is returned here (nothing new is started then). `info` may be NULL; otherwise
/// it receives what was written (async: scheduled).
#[no_mangle]
pub extern "C" fn ickpt_checkpoint(info: *mut ickpt_checkpoint_info) -> ickpt_result {
    ickpt_checkpoint_tagged(0, info)
}

/// `ickpt_checkpoint`, the version carrying `tag`: the application's own value for it (an
/// iteration number, a time step), which `ickpt_restore_latest_tagged` and
/// `ickpt_version_tag` return and `ickpt ls` shows. `ickpt_checkpoint` gives tag 0.
#[no_mangle]
pub extern "C" fn ickpt_checkpoint_tagged(
    tag: u64,
    info: *mut ickpt_checkpoint_info,
) -> ickpt_result {
    guard(|| {
        let i = with_engine(&ENGINE, |e| e.checkpoint_tagged(tag))?;
        write_info(info, &i);
        Ok(())
    })
}

/// Block until the checkpoint in flight (async mode) is committed. `info` may be NULL;
/// otherwise it receives the newest committed checkpoint of this process (ICKPT_ERR_NOT_FOUND
/// if there is none). Returns the error of a commit that failed (once).
#[no_mangle]
pub extern "C" fn ickpt_wait(info: *mut ickpt_checkpoint_info) -> ickpt_result {
    guard(|| {
        let last = with_engine(&ENGINE, |e| e.wait()?.ok_or_else(|| no_checkpoint(e)));
        match last {
            Ok(i) => write_info(info, &i),
            Err(Error::Read(ReadError::NoCheckpoint { .. })) if info.is_null() => {}
            Err(e) => return Err(e),
        }
        Ok(())
    })
}

fn write_info(info: *mut ickpt_checkpoint_info, i: &crate::CheckpointInfo) {
    if !info.is_null() {
        // SAFETY: non-NULL and, by contract, points to an ickpt_checkpoint_info.
        unsafe { *info = ickpt_checkpoint_info::from(i) };
    }
}

/// The newest version a restore accepts: its file and its chain pass every check (a stray,
/// damaged or foreign file with a higher number is passed over). ICKPT_ERR_NOT_FOUND when
/// no version does. Page data is checked as a restore reads it: to restart, prefer
/// `ickpt_restore_latest`, which moves on to an older version if a page turns out damaged.
#[no_mangle]
pub extern "C" fn ickpt_latest(version: *mut u64) -> ickpt_result {
    guard(|| found_version(version, |e| Ok(e.latest()?)))
}

/// Write the version `pick` finds to `*out`, or fail with ICKPT_ERR_NOT_FOUND naming the
/// store when it finds none.
fn found_version(
    out: *mut u64,
    pick: impl FnOnce(&Engine) -> Result<Option<u64>, Error>,
) -> Result<(), Error> {
    let out = out_ptr(out, "version")?;
    *out = with_engine(&ENGINE, |e| pick(e)?.ok_or_else(|| no_checkpoint(e)))?;
    Ok(())
}

/// The store of `e` holds no intact record of `global` (or of any, for None).
fn no_global(e: &Engine, global: Option<u64>) -> Error {
    ReadError::NoGlobal {
        global,
        dir: e.config().dir.display().to_string(),
    }
    .into()
}

/// The store of `e` holds no version (to say so, or to pass over it when asking is all).
fn no_checkpoint(e: &Engine) -> Error {
    ReadError::NoCheckpoint {
        dir: e.config().dir.display().to_string(),
    }
    .into()
}

/// Fill every protected region from `version`. The protected regions must match the
/// version's regions by id and size.
#[no_mangle]
pub extern "C" fn ickpt_restore(version: u64) -> ickpt_result {
    guard(|| with_engine(&ENGINE, |e| e.restore(version).map(drop)))
}

/// Write the word delta in the file at `path` (what `ickpt merge` writes, or another process
/// saved: paper 003's inject) into the protected regions of its ids. The whole file is read
/// and checked, and every region it names must be protected now with its length, before any
/// byte is written: on an error memory is unchanged. ICKPT_ERR_NOT_FOUND when there is no
/// such file, ICKPT_ERR_CORRUPT when it is not a valid delta, ICKPT_ERR_REGION_MISMATCH when
/// a region is missing or of another length. The words count as written by the application:
/// the next checkpoint stores the pages they changed.
#[no_mangle]
pub extern "C" fn ickpt_inject(path: *const c_char) -> ickpt_result {
    guard(|| {
        let path = c_path("path", path)?.ok_or(Error::Null { what: "path" })?;
        let delta = crate::read::delta_file::read(&path)?;
        with_engine(&ENGINE, |e| e.inject(&delta).map(drop))
    })
}

/// The restart path: restore the newest version that restores completely, newest first,
/// passing over versions whose files or chains fail their checks or whose pages turn out
/// damaged while read. `*version` receives the version restored. ICKPT_ERR_NOT_FOUND when the
/// store holds no version (a first run); ICKPT_ERR_CORRUPT when it holds versions but none
/// restores (the message names the newest one's problem); ICKPT_ERR_REGION_MISMATCH at once
/// when the protected regions differ from the newest version's.
#[no_mangle]
pub extern "C" fn ickpt_restore_latest(version: *mut u64) -> ickpt_result {
    guard(|| found_version(version, |e| Ok(e.restore_latest()?.map(|i| i.version))))
}

/// `ickpt_restore_latest`, also giving the restored version's tag (0 when it was
/// checkpointed without one, or by an ickpt older than format 5). Neither out-parameter may
/// be NULL.
#[no_mangle]
pub extern "C" fn ickpt_restore_latest_tagged(version: *mut u64, tag: *mut u64) -> ickpt_result {
    guard(|| {
        if tag.is_null() {
            return Err(Error::Null { what: "tag" });
        }
        let version = out_ptr(version, "version")?;
        let info = with_engine(&ENGINE, |e| {
            e.restore_latest()?.ok_or_else(|| no_checkpoint(e))
        })?;
        *version = info.version;
        // SAFETY: non-NULL (checked above) and, by contract, a writable u64 of the caller's;
        // written through the pointer, so a caller passing one pointer for both is no harm.
        unsafe { tag.write(info.tag) };
        Ok(())
    })
}

/// The tag `version` was checkpointed with (0 when none was given). Reads and checks the
/// version's metadata: ICKPT_ERR_NOT_FOUND for no such version, ICKPT_ERR_CORRUPT for a
/// damaged one.
#[no_mangle]
pub extern "C" fn ickpt_version_tag(version: u64, tag: *mut u64) -> ickpt_result {
    guard(|| {
        let tag = out_ptr(tag, "tag")?;
        *tag = with_engine(&ENGINE, |e| e.version_tag(version))?;
        Ok(())
    })
}

/// Record durably, in this process's store, that global version `global` of a coordinated
/// job (the MPI layer's numbering, the same on every rank) is this store's `version`, which
/// must be committed with an intact chain. `global` must be above every number recorded so
/// far (ICKPT_ERR_INVALID_ARGUMENT otherwise). The newest two records are kept, and garbage
/// collection keeps what restoring the versions they name reads. `ickpt_mpi_checkpoint` calls this
/// once every rank has committed; a serial program has no need of it.
#[no_mangle]
pub extern "C" fn ickpt_global_commit(global: u64, version: u64) -> ickpt_result {
    guard(|| with_engine(&ENGINE, |e| e.global_commit(global, version)))
}

/// The newest global version recorded in this store (`*global`) and the version holding it
/// (`*version`); records that fail their checks, or whose version file is gone or was
/// replaced, are passed over. ICKPT_ERR_NOT_FOUND when there is none.
#[no_mangle]
pub extern "C" fn ickpt_global_latest(global: *mut u64, version: *mut u64) -> ickpt_result {
    guard(|| {
        if version.is_null() {
            return Err(Error::Null { what: "version" });
        }
        let global = out_ptr(global, "global")?;
        let r = with_engine(&ENGINE, |e| {
            e.global_latest()?.ok_or_else(|| no_global(e, None))
        })?;
        *global = r.global;
        // SAFETY: non-NULL (checked above), a writable u64 of the caller's by contract;
        // written through the pointer, so one pointer passed for both is no harm.
        unsafe { version.write(r.version) };
        Ok(())
    })
}

/// The newest global version not above `bound` recorded intact in this store (`*global`) and
/// the version holding it (`*version`): a restart's agreement walks down with it to the
/// newest global version every rank holds. ICKPT_ERR_NOT_FOUND when there is none.
#[no_mangle]
pub extern "C" fn ickpt_global_at_most(
    bound: u64,
    global: *mut u64,
    version: *mut u64,
) -> ickpt_result {
    guard(|| {
        if version.is_null() {
            return Err(Error::Null { what: "version" });
        }
        let global = out_ptr(global, "global")?;
        let r = with_engine(&ENGINE, |e| {
            e.global_at_most(bound)?.ok_or_else(|| no_global(e, None))
        })?;
        *global = r.global;
        // SAFETY: non-NULL (checked above), a writable u64 of the caller's by contract;
        // written through the pointer, so one pointer passed for both is no harm.
        unsafe { version.write(r.version) };
        Ok(())
    })
}

/// The newest global version whose record is on every tier (the drain copies a version
/// before the records naming it, so what restoring it reads is there too); without lower
/// tiers, the newest recorded. 0 when there is none.
#[no_mangle]
pub extern "C" fn ickpt_drained_global(global: *mut u64) -> ickpt_result {
    guard(|| {
        let global = out_ptr(global, "global")?;
        *global = with_engine(&ENGINE, |e| e.drained_global())?;
        Ok(())
    })
}

/// Keep the records of global version `global` and of every later one, and what restoring
/// their versions reads, on every tier, until another is pinned (0: none: the newest two are
/// kept). The MPI layer pins, before each global commit, the newest global version every rank
/// has on every tier, so a job restarted from lower tiers whose drains lagged differently
/// still finds one global version every rank holds.
#[no_mangle]
pub extern "C" fn ickpt_global_pin(global: u64) -> ickpt_result {
    guard(|| with_engine(&ENGINE, |e| e.global_pin(global)))
}

/// The version holding global version `global` in this store. ICKPT_ERR_NOT_FOUND when no
/// intact record of it is here.
#[no_mangle]
pub extern "C" fn ickpt_global_version(global: u64, version: *mut u64) -> ickpt_result {
    guard(|| {
        let version = out_ptr(version, "version")?;
        let r = with_engine(&ENGINE, |e| {
            e.global_version(global)?
                .ok_or_else(|| no_global(e, Some(global)))
        })?;
        *version = r.version;
        Ok(())
    })
}

/// Delete every version newer than `version` from the store, and first every global record
/// naming one: a restart of a coordinated job discards what not every rank committed, so no
/// later restart can pick it. `version` 0 empties the store of versions. If this process's
/// next checkpoint was to increment a deleted version, it is full instead.
#[no_mangle]
pub extern "C" fn ickpt_discard_newer(version: u64) -> ickpt_result {
    guard(|| with_engine(&ENGINE, |e| e.discard_newer(version).map(drop)))
}

/// The version files in the store, ascending, restorable or not: up to `capacity` numbers
/// are written to `versions` (which may be NULL when `capacity` is 0) and `*count` receives
/// how many there are, so a first call with capacity 0 sizes the array.
/// `ickpt_check_version` tells whether a restore accepts one.
#[no_mangle]
pub extern "C" fn ickpt_list_versions(
    versions: *mut u64,
    capacity: usize,
    count: *mut usize,
) -> ickpt_result {
    guard(|| {
        let count = out_ptr(count, "count")?;
        if versions.is_null() && capacity > 0 {
            return Err(Error::Null {
                what: "versions (with a capacity above 0)",
            });
        }
        let all = with_engine(&ENGINE, |e| e.catalog().versions())?;
        // Element by element: no slice of `capacity` elements is made, since a caller's
        // capacity larger than its array would make such a slice undefined behaviour even
        // where nothing is written.
        for (i, v) in all.iter().take(capacity).enumerate() {
            // SAFETY: non-NULL (checked above when capacity > 0), and the caller promises
            // room for `capacity` u64s; i < capacity.
            unsafe { versions.add(i).write(*v) };
        }
        *count = all.len();
        Ok(())
    })
}

/// ICKPT_OK when a restore of `version` would accept its file and its chain; otherwise the
/// error that restore would return, with a message naming the file and the problem. Page
/// data is read by the restore itself (or by `ickpt verify`), not here.
#[no_mangle]
pub extern "C" fn ickpt_check_version(version: u64) -> ickpt_result {
    guard(|| with_engine(&ENGINE, |e| e.catalog().chain(version).map(drop)))
}

/// Running totals since `ickpt_init`.
#[no_mangle]
pub extern "C" fn ickpt_get_stats(out: *mut ickpt_stats) -> ickpt_result {
    guard(|| {
        let out = out_ptr(out, "out")?;
        let s = with_engine(&ENGINE, |e| Ok::<_, Error>(e.stats()))?;
        *out = ickpt_stats::from(&s);
        Ok(())
    })
}

/// Where the time of this process's newest committed checkpoint went. Writes `size` bytes
/// at most (pass `sizeof *out`): a program built with an older, shorter `ickpt_phases` is
/// never overrun, and fields a newer header has past this library's are zeroed. Call it as
/// `ickpt_get_phases(&p)`, the header's macro. ICKPT_ERR_NOT_FOUND before the first commit.
#[no_mangle]
pub extern "C" fn ickpt_get_phases_sized(out: *mut ickpt_phases, size: usize) -> ickpt_result {
    guard(|| {
        if out.is_null() {
            return Err(Error::Null { what: "out" });
        }
        let last = with_engine(&ENGINE, |e| {
            e.stats().last_checkpoint.ok_or_else(|| no_checkpoint(e))
        })?;
        // SAFETY: by contract `out` points to `size` writable bytes.
        unsafe { write_sized(&ickpt_phases::from(&last), out, size) };
        Ok(())
    })
}

/// Write `v` into a caller's struct of `size` bytes at `out` (ABI rule 7): the bytes both
/// have, then zeros for fields a newer header has past this library's.
///
/// # Safety
/// `out` points to `size` writable bytes.
pub(super) unsafe fn write_sized<T: Copy>(v: &T, out: *mut T, size: usize) {
    let known = std::mem::size_of::<T>();
    let bytes = out.cast::<u8>();
    // SAFETY: the copy stays within both `v` and the caller's `size` bytes, and the zeroed
    // tail within the latter.
    unsafe {
        std::ptr::copy_nonoverlapping((v as *const T).cast::<u8>(), bytes, size.min(known));
        if size > known {
            std::ptr::write_bytes(bytes.add(known), 0, size - known);
        }
    }
}

/// The message of the last failed call on this thread ("" if none). Valid until the next
/// ickpt call on this thread.
#[no_mangle]
pub extern "C" fn ickpt_last_error() -> *const c_char {
    boundary::last_error_ptr()
}

/// A constant name for a result code ("ICKPT_ERR_IO"); "unknown" for other values.
#[no_mangle]
pub extern "C" fn ickpt_result_name(r: i32) -> *const c_char {
    types::result_name(r).as_ptr()
}

/// The library version ("0.1.0").
#[no_mangle]
pub extern "C" fn ickpt_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

fn out_ptr<'a, T>(p: *mut T, name: &'static str) -> Result<&'a mut T, Error> {
    if p.is_null() {
        return Err(Error::Null { what: name });
    }
    // SAFETY: non-NULL; by the API contract it points to a writable T owned by the caller
    // for the duration of the call.
    Ok(unsafe { &mut *p })
}
