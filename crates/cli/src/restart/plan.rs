//! The plan stage A hands to stage B, and stage B itself.
//!
//! These types mirror `restorer/plan.h` field for field; the asserts below and the
//! `_Static_assert`s there fix the same sizes and offsets, so the two cannot drift apart
//! without a build failing. Stage A writes the plan at the start of the hole, with the arrays
//! the `*_at` fields point to after it, every address absolute; stage B reads it after stage A's
//! own memory is gone, so nothing in it may point outside the hole or the staged mappings.
//!
//! `go_all` and `go_ckpt` are futex words that stage B waits on with `FUTEX_WAIT_PRIVATE`: the
//! checkpointer releases `go_all` with a store of 1 and a `FUTEX_WAKE_PRIVATE` (a shared wake
//! does not find private waiters).

use std::mem::{offset_of, size_of};

/// "IKSPLAN1", little endian.
pub const PLAN_MAGIC: u64 = 0x314e_414c_5053_4b49;

/// [`Thread::role`]: a program thread stage B recreates and releases through `go_all`.
pub const ROLE_OTHER: u32 = 0;
/// [`Thread::role`]: the thread running stage B, the process's main thread.
pub const ROLE_LEADER: u32 = 1;
/// [`Thread::role`]: ickpt's checkpointing thread, released first through `go_ckpt`; it
/// releases the others. Without one in the plan, the leader releases them itself.
pub const ROLE_CHECKPOINTER: u32 = 2;

/// Stage B's exit status when a step fails (after its message on fd 2).
// Stage B exits with it on its own; only the tests (`tests/stage_b.rs`) read it here.
#[allow(dead_code)]
pub const STAGE_B_FAILED: i32 = 70;

/// Stage B, built by `build.rs` (empty on targets it does not support). Stage A copies it to
/// any address, maps it read and execute, and enters it at its first byte with
/// [`super::jump::enter_stage_b`].
pub const STAGE_B: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/stage_b.bin"));

/// Stage B, or why `ickpt restart` cannot run here.
pub fn stage_b() -> Result<&'static [u8], &'static str> {
    if STAGE_B.is_empty() {
        Err("ickpt restart is not supported on this architecture")
    } else {
        Ok(STAGE_B)
    }
}

/// A range to unmap.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Range {
    pub start: u64,
    pub len: u64,
}

/// `mremap(from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Move {
    pub from: u64,
    pub to: u64,
    pub len: u64,
}

/// One thread of the program, as its signal handler recorded it at the checkpoint.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Thread {
    /// The thread's `ucontext_t` in its signal frame: the stack pointer for `rt_sigreturn`.
    pub frame: u64,
    /// `ARCH_SET_FS` / `CLONE_SETTLS`.
    pub fs_base: u64,
    /// `clear_child_tid` (glibc's `&pd->tid`); 0: none.
    pub tid_address: u64,
    /// 0: none.
    pub robust_head: u64,
    pub robust_len: u64,
    /// 0: none.
    pub rseq: u64,
    pub rseq_len: u32,
    pub rseq_sig: u32,
    /// A 16-byte aligned stack in the hole for stage B's code on this thread.
    pub stack_top: u64,
    /// `ROLE_*`.
    pub role: u32,
    /// The id the thread is created with (`clone3`'s `set_tid`); 0: whatever the kernel gives.
    /// Stage B writes the id the thread got, which a timer signalling it names.
    pub tid: u32,
    /// `PR_SET_NAME`, NUL-terminated; empty: left as it is.
    pub name: [u8; 16],
}

/// A POSIX timer (`struct ickpt_timer`), created again with its id once every thread exists.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timer {
    pub id: i32,
    pub clock: i32,
    /// `sigev_notify`.
    pub notify: i32,
    pub signo: i32,
    /// `SIGEV_THREAD_ID`: the index of its thread in the plan's [`Thread`]s.
    pub thread: u32,
    pub pad: u32,
    /// `sigev_value`.
    pub value: u64,
    pub interval_ns: u64,
    /// 0: disarmed.
    pub left_ns: u64,
}

/// Every thread drops its capabilities before it returns to the program: they came with a
/// user namespace `ickpt restart` made, which the program, started by an exec, never had.
pub const FLAG_DROP_CAPS: u32 = 1;

/// The plan (`struct ickpt_plan`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Futex word: every thread but the checkpointer waits here for 1.
    pub go_all: u32,
    /// Futex word: the checkpointer waits here for 1.
    pub go_ckpt: u32,
    /// [`PLAN_MAGIC`].
    pub magic: u64,
    /// Stage A's own registered rseq area, unregistered first; 0: none.
    pub rseq_now: u64,
    pub rseq_now_len: u32,
    pub rseq_now_sig: u32,
    /// [`Range`]s: everything of stage A to unmap.
    pub n_unmap: u64,
    pub unmap_at: u64,
    /// [`Move`]s: `[vvar]`, `[vvar_vclock]`, `[vdso]` from where they are now to their old
    /// addresses; entry i passes through `temp` + the lengths of the entries before it.
    pub n_special: u64,
    pub special_at: u64,
    /// Free in the hole, at least the sum of the special lengths.
    pub temp: u64,
    /// [`Move`]s: each staged mapping onto its old address, in order.
    pub n_move: u64,
    pub move_at: u64,
    /// `prctl_mm_map`'s first fields: start_code end_code start_data end_data start_brk brk
    /// start_stack arg_start arg_end env_start env_end.
    pub mm: [u64; 11],
    pub auxv_at: u64,
    /// Bytes.
    pub auxv_size: u32,
    /// `FLAG_*`.
    pub flags: u32,
    /// [`Thread`]s: exactly one has [`ROLE_LEADER`].
    pub n_thread: u64,
    pub thread_at: u64,
    /// `*(u64 *)restart_word = restart_value` before any thread resumes; 0: none.
    pub restart_word: u64,
    pub restart_value: u64,
    /// Threads cloned so far.
    pub created: i32,
    /// The step that failed, written before stage B exits with [`STAGE_B_FAILED`].
    pub failed_step: i32,
    /// [`Timer`]s.
    pub n_timer: u64,
    pub timer_at: u64,
}

const _: () = {
    assert!(size_of::<Range>() == 16);
    assert!(size_of::<Move>() == 24);
    assert!(size_of::<Thread>() == 88);
    assert!(offset_of!(Thread, name) == 72);
    assert!(size_of::<Timer>() == 48);
    assert!(offset_of!(Timer, value) == 24);
    assert!(offset_of!(Thread, rseq_len) == 48);
    assert!(offset_of!(Thread, stack_top) == 56);
    assert!(offset_of!(Thread, role) == 64);
    assert!(offset_of!(Thread, tid) == 68);
    assert!(size_of::<Plan>() == 248);
    assert!(offset_of!(Plan, n_timer) == 232);
    assert!(offset_of!(Plan, go_all) == 0);
    assert!(offset_of!(Plan, go_ckpt) == 4);
    assert!(offset_of!(Plan, magic) == 8);
    assert!(offset_of!(Plan, rseq_now) == 16);
    assert!(offset_of!(Plan, n_unmap) == 32);
    assert!(offset_of!(Plan, n_special) == 48);
    assert!(offset_of!(Plan, temp) == 64);
    assert!(offset_of!(Plan, n_move) == 72);
    assert!(offset_of!(Plan, mm) == 88);
    assert!(offset_of!(Plan, auxv_at) == 176);
    assert!(offset_of!(Plan, flags) == 188);
    assert!(offset_of!(Plan, n_thread) == 192);
    assert!(offset_of!(Plan, restart_word) == 208);
    assert!(offset_of!(Plan, created) == 224);
    assert!(offset_of!(Plan, failed_step) == 228);
};
