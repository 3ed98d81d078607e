//! The checkpoint signal: the real-time signal `ickpt run`'s library handles and `ickpt
//! checkpoint` sends (`ICKPT_RUN_SIGNAL`, SIGRTMIN+3 unless it says otherwise).

use crate::ProcessRecord;

/// The file name of the library `ickpt run` preloads.
pub const LIBRARY: &str = "libickpt_run.so";

/// The signal `ICKPT_RUN_SIGNAL` names, or SIGRTMIN+3.
pub fn from_env() -> Result<i32, String> {
    match std::env::var("ICKPT_RUN_SIGNAL") {
        Ok(v) => v
            .parse::<i32>()
            .ok()
            .filter(|s| (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(s))
            .ok_or_else(|| format!("ICKPT_RUN_SIGNAL={v:?} is not a real-time signal number")),
        Err(_) => Ok(libc::SIGRTMIN() + 3),
    }
}

/// The signal a checkpointed process had the library handle: the real-time signal whose
/// handler lies in an executable mapping of the library.
pub fn in_record(record: &ProcessRecord) -> Option<i32> {
    let library_code = |at: u64| {
        record.mappings.iter().any(|m| {
            (m.start..m.end).contains(&at)
                && m.prot & crate::prot::EXEC != 0
                && m.name.rsplit('/').next() == Some(LIBRARY)
        })
    };
    record
        .sigactions
        .iter()
        .enumerate()
        .map(|(i, a)| (i as i32 + 1, a.handler))
        .find(|&(sig, handler)| {
            (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&sig) && library_code(handler)
        })
        .map(|(sig, _)| sig)
}
