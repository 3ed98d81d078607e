//! What this kernel offers for write tracking, as ickpt probes it: the kernel once per
//! process (`track`), less what the `ICKPT_NO_UFFD` and `ICKPT_NO_PAGEMAP_SCAN` switches hide
//! now (read at each call, as `Engine::open` reads them; a malformed switch is an error).
//! `ickpt probe` and the tests ask here.

use crate::config::{env, SettingError};
use crate::sys::uffd::Features;
use crate::track::{self, Backend};

/// The kernel's features, less what the switches hide.
pub fn features() -> Result<Features, SettingError> {
    Ok(track::features(env::hidden_features()?))
}

/// The backends this kernel offers, less what the switches hide.
pub fn available() -> Result<Vec<Backend>, SettingError> {
    Ok(track::available(env::hidden_features()?))
}

/// What `auto` takes on this kernel.
pub fn auto_choice() -> Result<Backend, SettingError> {
    Ok(track::auto_choice(env::hidden_features()?))
}
