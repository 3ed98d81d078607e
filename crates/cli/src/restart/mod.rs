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
mod local_chain;
pub mod plan;
mod plan_build;
mod signals;
mod stage;

use crate::pid_namespace::{Inside, Mode};
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

/// Run this command again (the kernel lays the new image out elsewhere), in the same
/// process and so in the same namespaces.
fn again(attempt: u32, inside: &Inside) -> CmdResult {
    if attempt >= ATTEMPTS {
        return Err(format!(
            "the restore hole stayed covered by ickpt's own memory over {ATTEMPTS} tries"
        )
        .into());
    }
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()?;
    if inside.user_ns {
        keep_sys_admin_across_exec()?;
    }
    let mut cmd = std::process::Command::new(exe);
    cmd.args(std::env::args_os().skip(1))
        .env("ICKPT_RESTART_ATTEMPT", (attempt + 1).to_string());
    inside.export(&mut cmd);
    let e = cmd.exec();
    Err(format!("running ickpt again: {e}").into())
}

pub fn run(s: &StoreArgs, version: Option<u64>, namespace: Mode) -> CmdResult {
    crate::job::one_store_only(s)?;
    let blob = plan::stage_b()?;
    // First, while this process has one thread: from here on it is the program's process.
    let beside = match (&s.object, &s.dir) {
        (Some(url), Some(dir)) => Some(Box::new(crate::object_drain::ObjectDrain::new_made(
            std::path::absolute(dir)?,
            url.clone(),
            "ickpt restart",
        )?) as Box<dyn crate::pid_namespace::Beside>),
        (Some(_), None) => {
            return Err("--object needs --dir: the program's local store, which the restarted program writes and this command drains to the bucket".into())
        }
        _ => None,
    };
    let inside = crate::pid_namespace::enter(namespace, "ickpt restart", beside)?;
    // A signal meant for the program (forwarded by the supervisor, or from the terminal)
    // stays pending until stage B gives the program its handlers and masks back.
    signals::block_all()?;
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
    fds::recreate_store(&record, s.dir.as_deref(), store.identity().ok().flatten())?;
    if let (Some(dir), Some(_)) = (&s.dir, &s.object) {
        let versions: Vec<u64> = chain.iter().map(|c| c.version).collect();
        local_chain::fill(dir, store, &versions)?;
    }
    ickpt_process::check_fds(&record).map_err(|e| e.to_string())?;
    // ICKPT_RESTART_REEXEC=1 takes the path of a covered hole once (the tests do).
    let forced = attempt == 0 && std::env::var_os("ICKPT_RESTART_REEXEC").is_some();
    let Some(hole) = plan_build::map_hole(&record)?.filter(|_| !forced) else {
        drop(catalog);
        return again(attempt, &inside);
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
    write_pid_file(&record, s, &inside)?;
    let (plan_at, blob_at, stack_top) =
        plan_build::write(hole, &record, &staged, v, blob, &inside)?;
    // SAFETY: the plan, the blob (read-execute) and the stack are in the hole, complete;
    // every signal is blocked; this process is single-threaded; nothing after this line runs.
    unsafe { jump::enter_stage_b(blob_at, plan_at, stack_top) }
}

/// Name this process in the program's store for `ickpt checkpoint`: the store is where the
/// program's lock file is (or --dir), the signal the one the library handled.
fn write_pid_file(record: &ProcessRecord, s: &StoreArgs, inside: &Inside) -> Result<(), String> {
    let held = record.fds.iter().find(|f| f.locked).and_then(|f| {
        std::path::Path::new(&f.path)
            .parent()
            .map(std::path::Path::to_path_buf)
    });
    let Some(dir) = held.or_else(|| s.dir.clone()) else {
        return Ok(());
    };
    let signal = ickpt_process::checkpoint_signal::in_record(record)
        .ok_or("the checkpoint records no handler of ickpt's checkpoint signal")?;
    if inside.namespaced && record.pid != std::process::id() {
        eprintln!(
            "ickpt restart: the program was process {} and is now process {} (it was not in a PID namespace of its own)",
            record.pid,
            std::process::id()
        );
    }
    crate::pid_file::write(&dir, inside.outer_pid, signal)
}

/// A user namespace's capabilities end at the exec of a program run by another user than its
/// root, unless ambient: the one that chooses thread ids is kept so (stage B drops it).
fn keep_sys_admin_across_exec() -> Result<(), String> {
    /// linux/capability.h
    const CAP_SYS_ADMIN: u32 = 21;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    let os = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    // SAFETY: capget and capset read and write the two structures above, as the kernel's
    // version 3 layout has them; prctl takes integers.
    unsafe {
        if libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) != 0 {
            return Err(os("capget"));
        }
        data[0].inheritable |= 1 << CAP_SYS_ADMIN;
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return Err(os("capset"));
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_RAISE,
            CAP_SYS_ADMIN as libc::c_ulong,
            0,
            0,
        ) != 0
        {
            return Err(os("raising CAP_SYS_ADMIN as ambient"));
        }
    }
    Ok(())
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
