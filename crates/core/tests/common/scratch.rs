//! Scratch directories for tests; shared by ickpt's and the command's integration tests.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A fresh, empty directory under cargo's per-target scratch space (`target/tmp`), unique per
/// call, removed when the test that made it passes. A failing test (panicking) keeps it, so its
/// store can be looked at. Tests used to leave every store behind in `/tmp`: hundreds of MB a
/// run, until the disk filled.
pub fn scratch_dir(name: &str) -> Scratch {
    static N: AtomicU32 = AtomicU32::new(0);
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    Scratch(d)
}

/// A scratch directory's path; see [`scratch_dir`].
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() && std::fs::remove_dir_all(&self.0).is_err() {
            // Some tests put a file where a store would be.
            let _ = std::fs::remove_file(&self.0);
        }
    }
}
