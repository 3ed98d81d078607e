//! The plan for stage B, written into the hole the program reserved: the plan at its start,
//! its arrays after it, stage B's code, a scratch area for moving the kernel's special
//! mappings, and one small stack per thread.

use super::plan::{
    Move, Plan, Range, Thread, Timer, FLAG_DROP_CAPS, PLAN_MAGIC, ROLE_CHECKPOINTER, ROLE_LEADER,
    ROLE_OTHER,
};
use super::stage::Staged;
use ickpt_process::{layout, role, MappingKind, ProcessRecord, TimerNotify};

const ARRAYS: u64 = 4096;
pub const BLOB: u64 = 4 << 20;
const TEMP: u64 = 5 << 20;
const STACKS: u64 = 8 << 20;
/// The kernel's mappings stage B moves onto their old addresses, vvar first.
const SPECIAL: [&str; 3] = ["[vvar]", "[vvar_vclock]", "[vdso]"];

/// Map the hole at its old address; None when something of this process is there (then
/// `ickpt restart` runs itself again, with a new layout).
pub fn map_hole(record: &ProcessRecord) -> Result<Option<u64>, String> {
    let (at, len) = record.hole;
    if !(STACKS + (1 << 20)..=1 << 30).contains(&len) {
        return Err(format!(
            "the recorded restore hole ({len} bytes) has an impossible size"
        ));
    }
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping.
    let p = unsafe {
        libc::mmap(
            at as *mut libc::c_void,
            len as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE
                | libc::MAP_ANONYMOUS
                | libc::MAP_NORESERVE
                | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EEXIST) {
            return Ok(None);
        }
        return Err(format!("mapping the restore hole at {at:#x}: {e}"));
    }
    if p as u64 != at {
        // SAFETY: the mapping just made, elsewhere than asked (a kernel without NOREPLACE).
        unsafe { libc::munmap(p, len as usize) };
        return Ok(None);
    }
    Ok(Some(at))
}

/// One line of /proc/self/maps: (start, end, name).
fn maps_now(text: &str) -> Vec<(u64, u64, &str)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let range = f.next()?;
            let name = f.nth(4).unwrap_or("");
            let (a, b) = range.split_once('-')?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
                name,
            ))
        })
        .collect()
}

/// arch_prctl's code for reading the thread pointer (FS base).
const ARCH_GET_FS: i32 = 0x1003;

extern "C" {
    static __rseq_offset: isize;
    static __rseq_size: u32;
}

/// This thread's rseq area as glibc registered it: (address, length, signature), or zeros.
fn own_rseq() -> (u64, u32, u32) {
    let mut fs: u64 = 0;
    // SAFETY: ARCH_GET_FS writes the thread pointer into `fs`.
    unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_GET_FS, &mut fs as *mut u64) };
    // SAFETY: plain reads of two constants glibc sets at startup.
    let (off, size) = unsafe { (__rseq_offset, __rseq_size) };
    if size == 0 || fs == 0 {
        return (0, 0, 0);
    }
    ((fs as i64 + off as i64) as u64, 32, 0x5305_3053)
}

/// Fill the hole: returns (the plan's address, the blob's address, the leader's stack top).
pub fn write(
    hole: u64,
    record: &ProcessRecord,
    staged: &Staged,
    version: u64,
    blob: &[u8],
    ns: &crate::pid_namespace::Inside,
) -> Result<(*mut Plan, usize, usize), String> {
    let hole_len = record.hole.1;
    let maps_text = std::fs::read_to_string("/proc/self/maps")
        .map_err(|e| format!("reading /proc/self/maps: {e}"))?;
    let now = maps_now(&maps_text);
    let mut special = Vec::new();
    let mut temp_len = 0;
    for name in SPECIAL {
        let old = record
            .mappings
            .iter()
            .find(|m| m.kind == MappingKind::Special && m.name == name);
        let cur = now.iter().find(|m| m.2 == name);
        match (old, cur) {
            (None, None) => {}
            (Some(o), Some(c)) if o.end - o.start == c.1 - c.0 => {
                special.push(Move { from: c.0, to: o.start, len: c.1 - c.0 });
                temp_len += c.1 - c.0;
            }
            _ => {
                return Err(format!(
                    "this kernel's {name} differs from the checkpoint's: restart on the kernel the program ran on"
                ))
            }
        }
    }
    if temp_len > STACKS - TEMP {
        return Err("the kernel's special mappings are larger than stage B's scratch area".into());
    }
    let moves: Vec<Move> = staged
        .slots
        .iter()
        .map(|s| Move {
            from: s.at,
            to: s.rec.start,
            len: s.rec.end - s.rec.start,
        })
        .collect();
    let n = record.threads.len() as u64;
    let stack = ((hole_len - STACKS) / n.max(1)) & !4095;
    if stack < 8192 {
        return Err(format!("{n} threads do not fit the restore hole"));
    }
    let stack = stack.min(64 << 10);
    if !record.threads.iter().any(|t| t.role == role::LEADER) {
        return Err("the checkpoint recorded no main thread".into());
    }
    let threads: Vec<Thread> = record
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| Thread {
            frame: t.frame,
            fs_base: t.fs_base,
            tid_address: t.tid_address,
            robust_head: t.robust_head,
            robust_len: t.robust_len,
            rseq: t.rseq,
            rseq_len: t.rseq_len,
            rseq_sig: t.rseq_sig,
            stack_top: hole + STACKS + (i as u64 + 1) * stack - 16,
            role: match t.role {
                role::LEADER => ROLE_LEADER,
                role::CHECKPOINTER => ROLE_CHECKPOINTER,
                _ => ROLE_OTHER,
            },
            // In a namespace of its own, each thread but the leader (this process) gets its
            // old id again.
            tid: if ns.namespaced && t.role != role::LEADER {
                t.tid
            } else {
                0
            },
            name: t.name,
        })
        .collect();
    let timers = timers(record)?;
    let leader_top = threads
        .iter()
        .find(|t| t.role == ROLE_LEADER)
        .map(|t| t.stack_top)
        .expect("checked above");
    // The arrays, one after another from ARRAYS.
    let mut at = hole + ARRAYS;
    let mut put = |bytes: &[u8]| -> Result<u64, String> {
        let here = at.next_multiple_of(16);
        if here + bytes.len() as u64 > hole + BLOB {
            return Err("the restart plan does not fit the restore hole".into());
        }
        // SAFETY: inside the hole mapped read-write by `map_hole`, below the blob.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), here as *mut u8, bytes.len()) };
        at = here + bytes.len() as u64;
        Ok(here)
    };
    let special_at = put(as_bytes(&special))?;
    let move_at = put(as_bytes(&moves))?;
    let thread_at = put(as_bytes(&threads))?;
    let auxv_at = put(as_bytes(&record.auxv))?;
    let timer_at = put(as_bytes(&timers))?;
    // Last: everything of this process to unmap, read once nothing allocates any more (a
    // mapping made after the read would survive into the restarted program).
    let mut text = String::with_capacity(4 << 20);
    let mut unmap: Vec<Range> = Vec::with_capacity(1 << 16);
    {
        use std::io::Read;
        std::fs::File::open("/proc/self/maps")
            .and_then(|mut f| f.read_to_string(&mut text))
            .map_err(|e| format!("reading /proc/self/maps: {e}"))?;
    }
    let inside = |s: u64, e: u64, a: (u64, u64)| s >= a.0 && e <= a.1;
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), name) = (f.next(), f.nth(4).unwrap_or("")) else {
            continue;
        };
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(s), Ok(e)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        if !inside(s, e, (hole, hole + hole_len))
            && !inside(s, e, staged.area)
            && !SPECIAL.contains(&name)
            && name != "[vsyscall]"
            && unmap.len() < unmap.capacity()
        {
            unmap.push(Range {
                start: s,
                len: e - s,
            });
        }
    }
    let unmap_at = put(as_bytes(&unmap))?;
    let (rseq_now, rseq_now_len, rseq_now_sig) = own_rseq();
    let plan = Plan {
        go_all: 0,
        go_ckpt: 0,
        magic: PLAN_MAGIC,
        rseq_now,
        rseq_now_len,
        rseq_now_sig,
        n_unmap: unmap.len() as u64,
        unmap_at,
        n_special: special.len() as u64,
        special_at,
        temp: hole + TEMP,
        n_move: moves.len() as u64,
        move_at,
        mm: record.mm,
        auxv_at,
        auxv_size: (record.auxv.len() * 8) as u32,
        flags: if ns.user_ns { FLAG_DROP_CAPS } else { 0 },
        n_thread: threads.len() as u64,
        thread_at,
        restart_word: record.restart_word,
        restart_value: version,
        created: 0,
        failed_step: 0,
        n_timer: timers.len() as u64,
        timer_at,
    };
    let plan_at = hole as *mut Plan;
    // SAFETY: the start of the hole, mapped read-write, aligned, nothing else there.
    unsafe { plan_at.write(plan) };
    let blob_at = hole + BLOB;
    if blob.len() as u64 > TEMP - BLOB {
        return Err("stage B is larger than its place in the hole".into());
    }
    // SAFETY: inside the hole; then its pages become read-execute.
    unsafe {
        std::ptr::copy_nonoverlapping(blob.as_ptr(), blob_at as *mut u8, blob.len());
        if libc::mprotect(
            blob_at as *mut libc::c_void,
            (blob.len() as u64).next_multiple_of(4096) as usize,
            libc::PROT_READ | libc::PROT_EXEC,
        ) != 0
        {
            return Err(format!(
                "making stage B executable: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok((plan_at, blob_at as usize, leader_top as usize))
}

/// The record's timers as stage B creates them: a thread a timer signals is named by its
/// place among the threads, whose ids stage B learns as it creates them (they are new ones
/// without a PID namespace).
fn timers(record: &ProcessRecord) -> Result<Vec<Timer>, String> {
    record
        .timers
        .iter()
        .map(|t| {
            let (notify, _) = layout::timer_notify_code(t.notify);
            let thread = match t.notify {
                TimerNotify::ThreadId(tid) => record
                    .threads
                    .iter()
                    .position(|th| th.tid == tid)
                    .ok_or_else(|| {
                        format!("POSIX timer {} signals thread {tid}, which the checkpoint did not record", t.id)
                    })? as u32,
                _ => u32::MAX,
            };
            Ok(Timer {
                id: t.id as i32,
                clock: t.clock,
                notify: notify as i32,
                signo: t.signal as i32,
                thread,
                pad: 0,
                value: t.value,
                interval_ns: t.interval_ns,
                left_ns: t.left_ns,
            })
        })
        .collect()
}

fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: plain #[repr(C)] integer records (or u64s), read as bytes for copying.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}
