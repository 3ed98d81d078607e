//! The edge between C and Rust: panics stop here, errors become result codes and messages.

use super::engine_lock::EngineLock;
use super::{code_of, ickpt_result};
use crate::engine::Engine;
use crate::error::{Error, ForkedChild};
use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    // During thread teardown the slot may be gone; the code alone must then do.
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = c);
}

pub fn last_error_ptr() -> *const c_char {
    LAST_ERROR
        .try_with(|e| e.borrow().as_ptr())
        .unwrap_or(c"(no message: the thread is exiting)".as_ptr())
}

/// The calling thread's last message, as text.
pub fn last_error_text() -> String {
    LAST_ERROR
        .try_with(|e| e.borrow().to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Run `f`, turning its error or panic into a result code and a message.
pub fn guard(f: impl FnOnce() -> Result<(), Error>) -> ickpt_result {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => ickpt_result::ICKPT_OK,
        Ok(Err(e)) => {
            set_last_error(&e.to_string());
            code_of(&e)
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(&format!("internal error (please report): {what}"));
            ickpt_result::ICKPT_ERR_INTERNAL
        }
    }
}

/// Run `f` on the process's engine, or fail with ICKPT_ERR_NOT_INITIALIZED.
pub fn with_engine<T, E>(
    engine: &'static EngineLock<Option<(u32, Engine)>>,
    f: impl FnOnce(&Engine) -> Result<T, E>,
) -> Result<T, Error>
where
    Error: From<E>,
{
    if super::whole::active() {
        return Err(Error::WholeProcess { call: "this call" });
    }
    let g = engine.read();
    match &*g {
        Some((pid, e)) if *pid == std::process::id() => Ok(f(e)?),
        Some(_) => Err(ForkedChild.into()),
        None => Err(Error::NotInitialized),
    }
}
