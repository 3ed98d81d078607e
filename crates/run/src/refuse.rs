//! What a checkpoint refuses before it stores anything, naming it: a process with children
//! (a restart would bring back only this one), descriptors a restart cannot open again.

use ickpt_process::{FdKind, FdRecord};

/// Refuse when any thread of this process has a child.
pub fn children() -> Result<(), String> {
    let answer = has_children();
    if answer == Some(false) {
        return Ok(());
    }
    // To name one, or to find out where `waitid` could not say: /proc/self/task/*/children.
    let tids = ickpt_process::capture::list_tids().map_err(|e| format!("listing threads: {e}"))?;
    for t in tids {
        let kids = ickpt_process::capture::read_text(&format!("/proc/self/task/{t}/children"))
            .unwrap_or_default();
        if let Some(pid) = kids.split_whitespace().next() {
            return Err(child_refused(&format!(" ({pid})")));
        }
    }
    match answer {
        Some(true) => Err(child_refused("")),
        _ => Ok(()),
    }
}

/// The refusal for a child process; `which`: its pid in brackets, or nothing when unknown.
fn child_refused(which: &str) -> String {
    format!("the program has a child process{which}: a restart would not bring it back, so no checkpoint is taken while it lives")
}

/// Whether any thread of this process has a child, of any kind (`__WALL`), running, stopped
/// or ended but not yet waited for: one `waitid` that changes nothing (`WNOHANG`,
/// `WNOWAIT`) rather than a read of /proc for each thread, in the program's stop. None when
/// `waitid` fails otherwise than with ECHILD (none is documented for these arguments).
fn has_children() -> Option<bool> {
    // SAFETY: siginfo_t is plain data, for which all zeros is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED
        | libc::WSTOPPED
        | libc::WCONTINUED
        | libc::WNOHANG
        | libc::WNOWAIT
        | libc::__WALL;
    // SAFETY: `info` is valid for writes; WNOWAIT leaves any child as it is.
    if unsafe { libc::waitid(libc::P_ALL, 0, &mut info, flags) } == 0 {
        return Some(true);
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ECHILD) => Some(false),
        _ => None,
    }
}

/// Refuse descriptors above 2 that a restart cannot open again (0-2 come from whoever
/// restarts the program).
pub fn descriptors(fds: &[FdRecord]) -> Result<(), String> {
    match fds.iter().find(|f| f.fd > 2 && f.kind == FdKind::Other) {
        Some(f) => Err(format!(
            "descriptor {} is {}, which a restart cannot reopen (sockets, pipes, eventfds and the like are not restorable yet); no checkpoint is taken while it is open",
            f.fd, f.path
        )),
        None => Ok(()),
    }
}

/// Whether a page of the file mapping `start..end` was written (is anonymous now, as RELRO
/// is after relocation) or cannot be told: /proc/self/pagemap's file-page bit (61) is clear
/// on a present or swapped page.
pub fn written_file_pages(pagemap: &std::fs::File, start: u64, end: u64) -> bool {
    let pages = ((end - start) / 4096) as usize;
    let mut buf = vec![0u8; pages * 8];
    !crate::pagemap::read(pagemap, start, &mut buf)
        || (0..pages).any(|i| crate::pagemap::written_file_page(crate::pagemap::word(&buf, i)))
}
