//! What ickpt measured: `ickpt_get_stats` (`ickpt_stats`) and `ickpt_get_phases`
//! (`ickpt_phases`, where the last checkpoint's time went).

use super::*;

/// Where the time of a checkpoint went, in nanoseconds (from `ickpt_get_phases`). Fields
/// are only ever appended: the call writes as many bytes as the caller's struct has.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ickpt_phases {
    /// The version these phases are of.
    pub version: u64,
    /// Times the version was scheduled: 1, or 2 when a sync commit that ran without a fence
    /// (uffd-async) met a write and was taken again with fences.
    pub attempts: u64,
    /// Taking the written pages and write-protecting them again (and raising the fence, for
    /// a fenced commit), with application threads held.
    pub collect_ns: u64,
    /// Copying pages out of application memory or copy-on-write slots.
    pub copy_ns: u64,
    /// Checksumming them.
    pub crc_ns: u64,
    /// Lifting fences, or checking that no write reached a page collected without one.
    pub release_ns: u64,
    /// Inside the store's write calls.
    pub write_ns: u64,
    /// Making the version durable and visible: fsync, rename, directory fsync.
    pub commit_ns: u64,
    /// Garbage collection after a full version.
    pub gc_ns: u64,
}

impl From<&CheckpointInfo> for ickpt_phases {
    fn from(i: &CheckpointInfo) -> Self {
        let ns = |d: std::time::Duration| d.as_nanos() as u64;
        let p = &i.phases;
        ickpt_phases {
            version: i.version,
            attempts: i.commit.phases.attempts.into(),
            collect_ns: ns(p.collect),
            copy_ns: ns(p.copy),
            crc_ns: ns(p.crc),
            release_ns: ns(p.release),
            write_ns: ns(p.write),
            commit_ns: ns(p.commit),
            gc_ns: ns(p.gc),
        }
    }
}

/// Totals since `ickpt_init`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ickpt_stats {
    /// ICKPT_BACKEND_* in use.
    pub backend: u32,
    pub regions: u32,
    pub protected_bytes: u64,
    pub checkpoints: u64,
    pub full_checkpoints: u64,
    pub incremental_checkpoints: u64,
    pub failed_checkpoints: u64,
    pub pages_written: u64,
    pub bytes_written: u64,
    pub checkpoint_ns: u64,
    /// First writes trapped.
    pub faults: u64,
    pub restores: u64,
    pub pages_restored: u64,
    pub restore_ns: u64,
    /// First writes that met a running commit: copied aside, waited, or already taken;
    /// and first writes outside any commit.
    pub cow_pages: u64,
    pub wait_pages: u64,
    pub avoided_pages: u64,
    pub after_pages: u64,
    /// Time application threads spent waiting for the committer.
    pub wait_ns: u64,
    /// Time ickpt spent handling first writes (kernel trap entry and exit not included).
    pub monitor_ns: u64,
    /// Pages adaptive granularity stored whole without a trap each (written or not).
    pub acck_released_pages: u64,
    /// 2 MiB spans adaptive granularity turned into huge pages.
    pub acck_huge_spans: u64,
    /// Regions the backend tracks by page protection because userfaultfd refused their
    /// memory type.
    pub regions_by_protection: u32,
}

impl From<&Stats> for ickpt_stats {
    fn from(s: &Stats) -> Self {
        ickpt_stats {
            backend: match s.backend {
                "mprotect" => ICKPT_BACKEND_MPROTECT,
                "uffd" => ICKPT_BACKEND_UFFD,
                "uffd-async" => ICKPT_BACKEND_UFFD_ASYNC,
                _ => ICKPT_BACKEND_AUTO,
            },
            regions: s.regions as u32,
            protected_bytes: s.protected_bytes,
            checkpoints: s.checkpoints,
            full_checkpoints: s.full_checkpoints,
            incremental_checkpoints: s.incremental_checkpoints,
            failed_checkpoints: s.failed_checkpoints,
            pages_written: s.pages_written,
            bytes_written: s.bytes_written,
            checkpoint_ns: s.checkpoint_time.as_nanos() as u64,
            faults: s.faults,
            restores: s.restores,
            pages_restored: s.pages_restored,
            restore_ns: s.restore_time.as_nanos() as u64,
            cow_pages: s.cow_pages,
            wait_pages: s.wait_pages,
            avoided_pages: s.avoided_pages,
            after_pages: s.after_pages,
            wait_ns: s.wait_time.as_nanos() as u64,
            monitor_ns: s.monitor_time.as_nanos() as u64,
            acck_released_pages: s.acck_released_pages,
            acck_huge_spans: s.acck_huge_spans,
            regions_by_protection: s.regions_by_protection as u32,
        }
    }
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
