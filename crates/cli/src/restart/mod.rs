//! `ickpt restart`: bring back a process `ickpt run` checkpointed, from its newest version
//! that restores (or the one asked for), on any tier.
//!
//! Stage A (here, ordinary Rust) reads the version's process record, checks it against this
//! machine, stages every mapping at addresses nothing else uses and fills them by the reverse
//! scan, reopens descriptors, sets signal actions and writes a plan into the hole the program
//! reserved. Stage B (`restorer/`, no libc) then unmaps this process's own memory, moves the
//! staged mappings and the vDSO onto their old addresses, recreates the threads and returns
//! each into its signal frame. `docs/transparent.md` tells the whole story.

mod fds;
pub mod jump;
pub mod plan;
mod plan_build;
mod signals;
mod stage;

use crate::{CmdResult, StoreArgs};
use ickpt::read::catalog::{Catalog, OpenVersion};
use ickpt::read::reverse_scan::{reverse_scan, Sink};
use ickpt::ReadError;
use ickpt_process::ProcessRecord;

/// Region ids of the process record and of the snapshot of ickpt's own memory (as the
/// library `ickpt run` preloads names them).
const RECORD_ID: u64 = 1 << 63;
const SNAPSHOT_ID: u64 = (1 << 63) | 1;
/// A record larger than this is refused before anything is allocated for it.
const MAX_RECORD: u64 = 256 << 20;
/// How many times `ickpt restart` runs itself again when its own layout covers the hole.
const ATTEMPTS: u32 = 16;

fn read_record(
    catalog: &Catalog<'_>,
    chain: &[OpenVersion],
    v: u64,
) -> Result<ProcessRecord, String> {
    let newest = &chain[0].meta;
    let entry = newest
        .regions
        .iter()
        .find(|r| r.id == RECORD_ID)
        .ok_or_else(|| {
            format!("version {v} is not a whole-process checkpoint (it holds no process record); restore its regions with `ickpt restore`")
        })?;
    if entry.length > MAX_RECORD {
        return Err(format!(
            "version {v}: its process record claims {} bytes",
            entry.length
        ));
    }
    let index = newest
        .regions
        .iter()
        .position(|r| r.id == RECORD_ID)
        .expect("found above");
    let mut buf = vec![0u8; entry.length as usize];
    let mut deliver = |i: usize, offset: u64, bytes: &[u8]| -> Result<(), ReadError> {
        if i == index {
            let at = offset as usize;
            if let Some(dst) = buf.get_mut(at..at + bytes.len()) {
                dst.copy_from_slice(bytes);
            }
        }
        Ok(())
    };
    reverse_scan::<ReadError>(
        catalog,
        chain,
        &|r| r.id == RECORD_ID,
        Sink::Copy(&mut deliver),
        &mut |_, _| {},
    )
    .map_err(|e| format!("version {v}: reading its process record: {e}"))?;
    ickpt_process::decode(&buf).map_err(|e| format!("version {v}: its process record: {e}"))
}

/// Run this command again (the kernel lays the new image out elsewhere).
fn again(attempt: u32) -> CmdResult {
    if attempt >= ATTEMPTS {
        return Err(format!(
            "the restore hole stayed covered by ickpt's own memory over {ATTEMPTS} tries"
        )
        .into());
    }
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()?;
    let e = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env("ICKPT_RESTART_ATTEMPT", (attempt + 1).to_string())
        .exec();
    Err(format!("running ickpt again: {e}").into())
}

pub fn run(s: &StoreArgs, version: Option<u64>) -> CmdResult {
    crate::job::one_store_only(s)?;
    let blob = plan::stage_b()?;
    let attempt: u32 = std::env::var("ICKPT_RESTART_ATTEMPT")
        .ok()
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    let read = crate::ReadStore::open(s)?;
    let store = read.store();
    let catalog = Catalog::new(store)?;
    let candidates = match version {
        Some(v) => vec![v],
        None => catalog.versions()?.into_iter().rev().collect(),
    };
    if candidates.is_empty() {
        return Err(ReadError::NoCheckpoint {
            dir: store.describe(""),
        }
        .into());
    }
    let mut chosen = None;
    for &v in &candidates {
        let attempt = catalog
            .chain(v)
            .map_err(|e| e.to_string())
            .and_then(|chain| read_record(&catalog, &chain, v).map(|r| (chain, r)));
        match attempt {
            Ok((chain, record)) => {
                chosen = Some((v, chain, record));
                break;
            }
            Err(e) if version.is_some() => return Err(e.into()),
            Err(e) => eprintln!("ickpt restart: passing over version {v}: {e}"),
        }
    }
    let (v, chain, record) = chosen.ok_or("no version holds a process record that reads")?;
    ickpt_process::check_same_kernel(&record).map_err(|e| e.to_string())?;
    ickpt_process::check_files(&record).map_err(|e| e.to_string())?;
    fds::recreate_store(&record, s.dir.as_deref())?;
    ickpt_process::check_fds(&record).map_err(|e| e.to_string())?;
    let Some(hole) = plan_build::map_hole(&record)? else {
        drop(catalog);
        return again(attempt);
    };
    let mut staged = stage::Staged::new(&record)?;
    let newest = &chain[0].meta;
    let memory = staged.region_memory(&newest.regions)?;
    let report = reverse_scan::<ReadError>(
        &catalog,
        &chain,
        &|_| true,
        Sink::Memory(memory),
        &mut |_, _| {},
    )
    .map_err(|e| format!("version {v}: {e}"))?;
    staged.apply_snapshots(&record, SNAPSHOT_ID)?;
    staged.protect()?;
    eprintln!(
        "ickpt restart: version {v} ({} pages read), {} threads, {} mappings",
        report.pages,
        record.threads.len(),
        record.mappings.len()
    );
    drop(chain);
    drop(catalog);
    drop(read);
    single_threaded()?;
    fds::reopen(&record)?;
    fds::cwd_and_umask(&record)?;
    signals::block_all()?;
    signals::set_actions(&record)?;
    signals::set_itimers(&record)?;
    let (plan_at, blob_at, stack_top) = plan_build::write(hole, &record, &staged, v, blob)?;
    // SAFETY: the plan, the blob (read-execute) and the stack are in the hole, complete;
    // every signal is blocked; this process is single-threaded; nothing after this line runs.
    unsafe { jump::enter_stage_b(blob_at, plan_at, stack_top) }
}

/// Stage B replaces the whole process, so no other thread of it may run: the tiers' clients
/// are gone with the store, and this waits briefly for their threads to end.
fn single_threaded() -> Result<(), String> {
    for _ in 0..500 {
        let n = ickpt_process::capture::list_tids()
            .map_err(|e| e.to_string())?
            .len();
        if n == 1 {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Err("threads of the store clients are still running".into())
}
