//! The library's own version: `ickpt_version`.

use super::*;

/// The library version ("0.1.0").
#[no_mangle]
pub extern "C" fn ickpt_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
