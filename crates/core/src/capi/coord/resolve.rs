//! What `ickpt_init` makes of a config, for a layer that derives each process's config from
//! the application's: `ickpt_config_resolve_sized`. The MPI layer resolves the application's
//! config once, gives rank 0 the job directory it names, and each rank a store in it; it
//! reads no `ICKPT_*` variable and no `struct_size` itself, so those rules live here only.

use super::*;
use std::cell::RefCell;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

/// A config as `ickpt_init` would run it (`ickpt_config_resolve`). Its strings and `config`
/// belong to libickpt: they stay valid until the same thread calls `ickpt_config_resolve`
/// again, or ends.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ickpt_resolved_config {
    /// ICKPT_MODE_SYNC or ICKPT_MODE_ASYNC: cfg->mode, or ICKPT_MODE's when it is set.
    pub mode: u32,
    /// The store directory: cfg->dir, or ICKPT_DIR when that is NULL. Never NULL.
    pub dir: *const c_char,
    /// The shared tier: cfg->shared_dir, or ICKPT_SHARED_DIR when that is NULL; NULL: none.
    pub shared_dir: *const c_char,
    /// The object-store tier: cfg->object_url, or ICKPT_OBJECT_URL when that is NULL; NULL:
    /// none.
    pub object_url: *const c_char,
    /// `cfg` as ickpt_init reads it, as long as this library's ickpt_config (its struct_size):
    /// the fields the caller's struct has, the defaults of those it lacks, and dir,
    /// shared_dir and object_url as above. It may be changed and given to ickpt_init.
    pub config: *mut ickpt_config,
}

/// What the last resolve on this thread handed out, which the pointers of the caller's
/// `ickpt_resolved_config` point into.
struct Resolved {
    config: Box<ickpt_config>,
    dir: CString,
    shared_dir: Option<CString>,
    object_url: Option<CString>,
}

thread_local! {
    static RESOLVED: RefCell<Option<Resolved>> = const { RefCell::new(None) };
}

/// Resolve `cfg` (NULL: the defaults) as ickpt_init does: the struct of whichever ickpt.h
/// the caller was built with (docs/abi.md, rule 7), the defaults of the fields it lacks, the
/// `ICKPT_*` variables, and every check of a setting ickpt_init makes, with the same result
/// code and message (what only the store and the kernel can tell, a directory that is not
/// writable or a backend the kernel lacks, ickpt_init still reports). Writes `size` bytes at
/// `out` at most: call it as `ickpt_config_resolve(cfg, &out)`, the header's macro. Needs no
/// ickpt_init, and starts nothing. The strings and the config `out` points to belong to
/// libickpt: they stay valid until this thread calls it again, or ends.
#[no_mangle]
pub extern "C" fn ickpt_config_resolve_sized(
    cfg: *const ickpt_config,
    out: *mut ickpt_resolved_config,
    size: usize,
) -> ickpt_result {
    guard(|| {
        if out.is_null() {
            return Err(Error::Null { what: "out" });
        }
        let (run, _) = Config::from_env(asked_config(cfg)?)?;
        let config = Box::new(if cfg.is_null() {
            default_config()
        } else {
            read_config(cfg)?
        });
        // Paths from C strings and the environment, which hold no NUL.
        let c_string = |b: &[u8]| CString::new(b).expect("a path without NUL");
        let tier = |b: Option<&[u8]>| b.filter(|b| !b.is_empty()).map(c_string);
        let fresh = Resolved {
            config,
            dir: c_string(run.dir.as_os_str().as_bytes()),
            shared_dir: tier(run.shared_dir.as_ref().map(|d| d.as_os_str().as_bytes())),
            object_url: tier(run.object_url.as_ref().map(|u| u.as_bytes())),
        };
        let mode = match run.mode {
            CommitMode::Sync => ICKPT_MODE_SYNC,
            CommitMode::Async => ICKPT_MODE_ASYNC,
        };
        let resolved = RESOLVED.with(|slot| {
            let mut slot = slot.borrow_mut();
            let r = slot.insert(fresh);
            let ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
            r.config.dir = r.dir.as_ptr();
            r.config.shared_dir = ptr(&r.shared_dir);
            r.config.object_url = ptr(&r.object_url);
            ickpt_resolved_config {
                mode,
                dir: r.dir.as_ptr(),
                shared_dir: ptr(&r.shared_dir),
                object_url: ptr(&r.object_url),
                config: &mut *r.config,
            }
        });
        // SAFETY: by contract `out` points to `size` writable bytes.
        unsafe { write_sized(&resolved, out, size) };
        Ok(())
    })
}
