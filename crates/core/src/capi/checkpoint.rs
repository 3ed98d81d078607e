//! Taking checkpoints: `ickpt_checkpoint(_tagged)`, `ickpt_wait`, `ickpt_latest`, and
//! `ickpt_checkpoint_info`, what a checkpoint wrote.

use super::*;

pub const ICKPT_KIND_FULL: u32 = 0;

pub const ICKPT_KIND_INCREMENTAL: u32 = 1;

/// What a checkpoint wrote. From `ickpt_checkpoint` in async mode it describes the version
/// just scheduled (`bytes` and the commit fields are 0 until `ickpt_wait` reports it).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ickpt_checkpoint_info {
    pub version: u64,
    /// The version this one increments; 0 for a full version.
    pub parent: u64,
    /// ICKPT_KIND_FULL or ICKPT_KIND_INCREMENTAL.
    pub kind: u32,
    /// ICKPT_MODE_* the version was committed in.
    pub mode: u32,
    /// Pages stored in this version (async, from ickpt_checkpoint: pages scheduled).
    pub pages: u64,
    /// Size of the version file in bytes.
    pub bytes: u64,
    /// Time spent in the call that returned this.
    pub duration_ns: u64,
    /// From the request until the last page was handed to the store.
    pub commit_ns: u64,
    /// Time application threads spent blocked waiting for this commit's pages.
    pub wait_ns: u64,
    /// First writes during the commit that copied the page aside (COW), waited for the
    /// committer (WAIT), or found the page already taken (AVOIDED).
    pub cow_pages: u64,
    pub wait_pages: u64,
    pub avoided_pages: u64,
    /// First writes after the previous commit had finished (its AFTER count).
    pub after_previous: u64,
    /// Most copy-on-write buffer bytes in use at once during the commit.
    pub peak_cow_bytes: u64,
}

impl From<&CheckpointInfo> for ickpt_checkpoint_info {
    fn from(i: &CheckpointInfo) -> Self {
        ickpt_checkpoint_info {
            version: i.version,
            parent: i.parent,
            kind: kind_code(i.kind),
            mode: match i.commit.mode {
                CommitMode::Sync => ICKPT_MODE_SYNC,
                CommitMode::Async => ICKPT_MODE_ASYNC,
            },
            pages: i.pages,
            bytes: i.bytes,
            duration_ns: i.duration.as_nanos() as u64,
            commit_ns: i.commit.commit_ns,
            wait_ns: i.commit.wait_ns,
            cow_pages: i.commit.cow_pages,
            wait_pages: i.commit.wait_pages,
            avoided_pages: i.commit.avoided_pages,
            after_previous: i.commit.after_previous,
            peak_cow_bytes: i.commit.peak_cow_bytes,
        }
    }
}

pub(super) fn kind_code(k: Kind) -> u32 {
    match k {
        Kind::Full => ICKPT_KIND_FULL,
        Kind::Incremental => ICKPT_KIND_INCREMENTAL,
    }
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
        if whole::active() {
            let i = whole::checkpoint(tag)?;
            if !info.is_null() {
                // SAFETY: non-NULL and, by contract, points to an ickpt_checkpoint_info.
                unsafe { *info = i };
            }
            return Ok(());
        }
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
        // Under `ickpt run` a checkpoint is committed when ickpt_checkpoint returns.
        if whole::active() {
            return Ok(());
        }
        let last = with_engine(&ENGINE, |e| e.wait()?.ok_or_else(|| no_checkpoint(e)));
        match last {
            Ok(i) => write_info(info, &i),
            Err(Error::Read(ReadError::NoCheckpoint { .. })) if info.is_null() => {}
            Err(e) => return Err(e),
        }
        Ok(())
    })
}

pub(super) fn write_info(info: *mut ickpt_checkpoint_info, i: &crate::CheckpointInfo) {
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
