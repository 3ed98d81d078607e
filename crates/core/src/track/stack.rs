//! Protected memory on a thread's own stack (a loop counter in `main`, VeloC/FTI style).
//!
//! A write to a write-protected stack page raises SIGSEGV with the stack pointer at most a few
//! frames below it. The kernel writes the signal frame below the stack pointer; when that
//! lands on the protected page too it cannot, and kills the process: ickpt_restore and
//! ickpt_checkpoint re-protect the page while their own frames sit on it. So a thread that
//! protects memory on its own stack gets an alternate signal stack in a mapping of ickpt's
//! own (the handler is installed with SA_ONSTACK), unless it has one already. The userfaultfd
//! backend needs none for its own regions, but its fallback regions and uffd-async's fence
//! take faults as signals, so every backend gets one.
//!
//! Memory on *another* thread's stack is that thread's business: it needs an alternate
//! signal stack of its own (it protected something on its own stack, or called sigaltstack).

use crate::sys::altstack::{self, AltStack};
use crate::track::RangeProblem;
use crate::track::TrackError;
use std::cell::RefCell;

#[derive(Default)]
struct ThisThread {
    /// The thread's stack bounds, read once.
    stack: Option<(usize, usize)>,
    /// The alternate stack ickpt gave it, released when it exits (after being disabled).
    alt: Option<AltStack>,
}

thread_local! {
    static THIS: RefCell<ThisThread> = RefCell::new(ThisThread::default());
}

fn intersects(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Whether `span` may lie on the calling thread's stack (true when its bounds cannot be
/// read). Its own calls write there while it commits, so a commit fences such a region.
pub fn on_this_stack(span: (usize, usize)) -> bool {
    THIS.with(|t| {
        let mut t = t.borrow_mut();
        match t.stack {
            Some(s) => intersects(s, span),
            None => match altstack::thread_stack() {
                Ok(s) => intersects(*t.stack.insert(s), span),
                Err(_) => true,
            },
        }
    })
}

/// Called before the calling thread protects `span` (covering pages): refuse a range over
/// its alternate signal stack (the handler could not run), and give it one if the range lies
/// on its own stack.
pub fn before_protect(span: (usize, usize)) -> Result<(), TrackError> {
    let current = altstack::current().map_err(TrackError::Signal)?;
    if current.is_some_and(|alt| intersects(alt, span)) {
        return Err(TrackError::Refused(RangeProblem::SignalStack));
    }
    THIS.with(|t| {
        let mut t = t.borrow_mut();
        let stack = match t.stack {
            Some(s) => s,
            None => *t
                .stack
                .insert(altstack::thread_stack().map_err(TrackError::Signal)?),
        };
        if current.is_some() || !intersects(stack, span) {
            return Ok(());
        }
        let alt = AltStack::new().map_err(TrackError::OwnAlloc)?;
        alt.install().map_err(TrackError::Signal)?;
        if altstack::is_main_thread() {
            // Kept for good: thread-local destructors run at exit() before the atexit
            // handlers, whose frames may still land on the protected page.
            std::mem::forget(alt);
        } else {
            t.alt = Some(alt);
        }
        Ok(())
    })
}
