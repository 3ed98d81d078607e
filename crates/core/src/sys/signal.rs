//! SIGSEGV installation and chaining to whatever handler the application had before.
//!
//! Everything called from the handler side (`chain`, `fault_address`, `is_access_error`)
//! is async-signal-safe: atomics, plain loads and raw system calls only.

use std::io;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

/// The handler type for SA_SIGINFO handlers.
pub type SigInfoHandler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

/// The action faults that are not ickpt's are handed to: the application's, saved when ickpt
/// installed its handler, or later when ickpt took the signal back (`take_back`). Never
/// freed (a handler may be reading one): replaced at most once per take-back.
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());

fn set_previous(a: libc::sigaction) {
    PREVIOUS.store(Box::into_raw(Box::new(a)), Ordering::SeqCst);
}

fn current_action(sig: libc::c_int) -> io::Result<libc::sigaction> {
    // SAFETY: an all-zero sigaction is a valid value for the kernel to overwrite.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a NULL new action only queries; `old` is a valid out-pointer.
    if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old)
}

/// Make `handler` the SIGSEGV handler: SA_SIGINFO, on the alternate stack, every signal
/// blocked while it runs (another signal's handler writing tracked memory would fault with
/// SIGSEGV blocked, which is fatal, and one that longjmps out would leave the registry's
/// in-flight count raised for good).
fn set_handler(handler: SigInfoHandler) -> io::Result<()> {
    // SAFETY: zeroed sigaction is valid; handler, flags and a full mask are filled in.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler as usize;
    sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
    // SAFETY: sa.sa_mask is a valid sigset_t to initialise.
    unsafe { libc::sigfillset(&mut sa.sa_mask) };
    // SAFETY: `sa` is fully initialised and `handler` is async-signal-safe by contract.
    if unsafe { libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Install `handler` for SIGSEGV once per process, remembering the previous action so that
/// faults which are not ours reach it unchanged.
pub fn install_segv_handler(handler: SigInfoHandler) -> io::Result<()> {
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
    let r = INSTALLED.get_or_init(|| {
        let old = current_action(libc::SIGSEGV).map_err(|e| e.raw_os_error().unwrap_or(0))?;
        set_previous(old);
        set_handler(handler).map_err(|e| e.raw_os_error().unwrap_or(0))?;
        Ok(())
    });
    r.map_err(io::Error::from_raw_os_error)
}

/// If the application replaced `handler` as the SIGSEGV handler since ickpt installed it,
/// install `handler` again and hand the application's the faults that are not ickpt's, as
/// with the one it had before. Returns whether it had been replaced. For `ickpt run`, whose
/// program may install one of its own after ickpt started (libgfortran's backtrace handler),
/// called while the program is stopped.
pub fn take_back(handler: SigInfoHandler) -> io::Result<bool> {
    // Never installed: nothing to take back.
    if PREVIOUS.load(Ordering::SeqCst).is_null() {
        return Ok(false);
    }
    let now = current_action(libc::SIGSEGV)?;
    if now.sa_sigaction == handler as usize {
        return Ok(false);
    }
    set_previous(now);
    set_handler(handler)?;
    Ok(true)
}

/// Whether `handler` is still the process's SIGSEGV handler (the application may have
/// replaced it after ickpt started, which would silently stop write tracking).
pub fn segv_handler_is(handler: SigInfoHandler) -> io::Result<bool> {
    Ok(current_action(libc::SIGSEGV)?.sa_sigaction == handler as usize)
}

/// The faulting address of a SIGSEGV.
///
/// # Safety
/// `info` must be the siginfo pointer the kernel passed to the handler.
pub unsafe fn fault_address(info: *const libc::siginfo_t) -> usize {
    // SAFETY: the caller passes the kernel-provided siginfo, valid for the handler's duration.
    unsafe { (*info).si_addr() as usize }
}

/// The address of the instruction that faulted, from the handler's `ucontext_t` (0 where
/// this architecture's context is not read: the caller then has no instruction to go by).
///
/// # Safety
/// `ctx` must be the context pointer the kernel passed to an SA_SIGINFO handler.
pub unsafe fn fault_ip(ctx: *const libc::c_void) -> usize {
    if ctx.is_null() {
        return 0;
    }
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        // SAFETY: the kernel's ucontext_t for this signal, valid while the handler runs.
        unsafe {
            (*ctx.cast::<libc::ucontext_t>()).uc_mcontext.gregs[libc::REG_RIP as usize] as usize
        }
    }
    #[cfg(all(target_arch = "aarch64", target_os = "linux"))]
    {
        // SAFETY: as above.
        unsafe { (*ctx.cast::<libc::ucontext_t>()).uc_mcontext.pc as usize }
    }
    #[cfg(not(any(
        all(target_arch = "x86_64", target_os = "linux"),
        all(target_arch = "aarch64", target_os = "linux")
    )))]
    {
        0
    }
}

/// True when the fault is a permission fault raised by the MMU (SEGV_ACCERR), the only kind
/// write tracking causes. Signals sent by kill(2) or faults on unmapped memory are not ours.
///
/// # Safety
/// `info` must be the siginfo pointer the kernel passed to the handler.
pub unsafe fn is_access_error(info: *const libc::siginfo_t) -> bool {
    const SEGV_ACCERR: libc::c_int = 2;
    // SAFETY: as for `fault_address`.
    unsafe { (*info).si_code == SEGV_ACCERR }
}

/// Hand a signal that is not ours to the handler the application had before ickpt, or to
/// the default action, so a genuine segfault behaves exactly as it would without ickpt.
///
/// # Safety
/// Must be called from a SIGSEGV handler with the arguments the kernel passed to it.
pub unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: null or a leaked, never-freed action (`set_previous`).
    let Some(prev) = (unsafe { PREVIOUS.load(Ordering::SeqCst).as_ref() }) else {
        // SAFETY: forwarded from our caller's contract.
        return unsafe { default_action(sig, info) };
    };
    let h = prev.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // SAFETY: forwarded from our caller's contract.
        return unsafe { default_action(sig, info) };
    }
    // Run the application's handler as the kernel would have: with its own mask (plus the
    // signal itself unless SA_NODEFER), and reset first if it asked for SA_RESETHAND.
    // SAFETY: sigset operations on local, initialised sets; pthread_sigmask and sigaction
    // are async-signal-safe.
    unsafe {
        let mut mask = prev.sa_mask;
        if prev.sa_flags & libc::SA_NODEFER == 0 {
            libc::sigaddset(&mut mask, sig);
        }
        if prev.sa_flags & libc::SA_RESETHAND != 0 {
            set_default(sig);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
    }
    if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the application installed this address as an SA_SIGINFO handler.
        let f: SigInfoHandler = unsafe { std::mem::transmute::<usize, SigInfoHandler>(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: the application installed this address as a plain handler.
        let f: extern "C" fn(libc::c_int) =
            unsafe { std::mem::transmute::<usize, extern "C" fn(libc::c_int)>(h) };
        f(sig);
    }
}

/// Restore the default action and let the fault happen again (or, for a signal that was
/// sent rather than raised by the MMU, raise it again), so the process dies by SIGSEGV with
/// a core dump, as it would have without ickpt.
///
/// # Safety
/// As for `chain`.
unsafe fn default_action(sig: libc::c_int, info: *mut libc::siginfo_t) {
    // SAFETY: async-signal-safe calls; `info` is the kernel's siginfo.
    unsafe {
        set_default(sig);
        if (*info).si_code <= 0 {
            libc::raise(sig);
        }
    }
}

fn set_default(sig: libc::c_int) {
    // SAFETY: zeroed sigaction with SIG_DFL (0) is the default disposition; sigaction is
    // async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Write a fixed message to stderr from a signal handler.
pub fn signal_safe_message(msg: &[u8]) {
    // SAFETY: write(2) is async-signal-safe; the buffer is valid for its length.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
    }
}

/// Give SIGPIPE back its default action (the Rust runtime ignores it), so that a command
/// whose reader went away (`ickpt ls | head`) ends quietly, as other Unix tools do.
pub fn default_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_DFL has no memory-safety preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}
