//! The jump from stage A into stage B.
//!
//! Stage B unmaps stage A's stack among everything else of stage A, so it cannot run on it:
//! this switches to a stack in the hole first, then calls the blob as an ordinary C function,
//! `void stage_b(struct ickpt_plan *)`, which never returns.

use super::plan::Plan;

/// Switches the stack pointer to `stack_top` (rounded down to 16 bytes) and calls stage B at
/// `blob_at` with `plan` as its argument.
///
/// # Safety
///
/// `blob_at` holds a copy of [`super::plan::STAGE_B`], mapped readable and executable;
/// `plan` is a complete plan in the hole; `stack_top` is the top of a writable stack in the
/// hole that nothing else uses, with room for stage B (a few KiB). All signals are blocked.
/// Nothing of the calling thread's state survives: stage B replaces the process.
#[cfg(target_arch = "x86_64")]
pub unsafe fn enter_stage_b(blob_at: usize, plan: *mut Plan, stack_top: usize) -> ! {
    // SAFETY: the caller guarantees the blob, the plan and the stack. After the switch nothing
    // refers to the old stack; `call` leaves rsp at 8 mod 16 as the ABI expects at a function's
    // entry; a zero rbp ends frame-pointer walks there. Stage B never returns (ud2 if it did).
    unsafe {
        std::arch::asm!(
            "mov rsp, {stack}",
            "and rsp, -16",
            "xor ebp, ebp",
            "call {blob}",
            "ud2",
            stack = in(reg) stack_top,
            blob = in(reg) blob_at,
            in("rdi") plan,
            options(noreturn),
        )
    }
}

/// Stage B exists only for x86-64; [`super::plan::stage_b`] says so before anyone gets here.
///
/// # Safety
///
/// None needed: it only panics.
#[cfg(not(target_arch = "x86_64"))]
pub unsafe fn enter_stage_b(_blob_at: usize, _plan: *mut Plan, _stack_top: usize) -> ! {
    panic!("ickpt restart is not supported on this architecture")
}
