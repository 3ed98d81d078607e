//! What a restart checks before it trusts a record: that this machine can carry it out.
//! Each refusal names the thing and what to do, since the user can act only on that.

use std::os::unix::fs::FileTypeExt;

use crate::error::CheckError;
use crate::record::{FdKind, FileId, MappingKind, ProcessRecord};

/// The kernel build, the architecture and the page size are the checkpoint's. The new
/// vDSO is moved onto the old one's address, and the program's code may sit at a return
/// address inside it: only the very same build has the same code there.
pub fn check_same_kernel(r: &ProcessRecord) -> Result<(), CheckError> {
    let (arch, page) = (crate::capture::arch(), crate::capture::page_size());
    if r.arch != arch || r.page_size != page {
        return Err(CheckError::Machine {
            recorded: r.arch.clone(),
            recorded_page: r.page_size,
            now: arch.to_string(),
            now_page: page,
        });
    }
    let now = crate::capture::kernel().map_err(|e| CheckError::Kernel {
        recorded: r.kernel.clone(),
        now: format!("unknown ({e})"),
    })?;
    if now != r.kernel {
        return Err(CheckError::Kernel {
            recorded: r.kernel.clone(),
            now,
        });
    }
    Ok(())
}

/// The executable and every file a mapping is mapped again from are the files the
/// checkpoint saw: same device, inode, size and modification time. A rebuilt library would
/// put other code under the program's stored return addresses.
pub fn check_files(r: &ProcessRecord) -> Result<(), CheckError> {
    let mapped = r
        .mappings
        .iter()
        .filter(|m| m.kind == MappingKind::File)
        .filter_map(|m| m.file.as_ref());
    let mut seen: Vec<&str> = Vec::new();
    for f in std::iter::once(&r.exe).chain(mapped) {
        if seen.contains(&f.path.as_str()) {
            continue;
        }
        seen.push(&f.path);
        same_file(f)?;
    }
    Ok(())
}

fn same_file(then: &FileId) -> Result<(), CheckError> {
    let now = crate::capture::file_id(&then.path).map_err(|e| CheckError::FileMissing {
        path: then.path.clone(),
        reason: e.to_string(),
    })?;
    let what = if (now.dev, now.ino) != (then.dev, then.ino) {
        format!(
            "another file is at its path: device {:#x} inode {} then, device {:#x} inode {} now",
            then.dev, then.ino, now.dev, now.ino
        )
    } else if now.size != then.size {
        format!("{} bytes then, {} now", then.size, now.size)
    } else if now.mtime_ns != then.mtime_ns {
        format!(
            "modified: mtime {} ns then, {} ns now",
            then.mtime_ns, now.mtime_ns
        )
    } else {
        return Ok(());
    };
    Err(CheckError::FileChanged {
        path: then.path.clone(),
        what,
    })
}

/// Every descriptor above 2 can be brought back: a file, directory or device is still at
/// its path and of its kind; anything else (a socket, a pipe, an eventfd, …) is refused.
/// Descriptors 0 to 2 are the restarting command's, so they are not checked.
pub fn check_fds(r: &ProcessRecord) -> Result<(), CheckError> {
    for f in r.fds.iter().filter(|f| f.fd > 2) {
        let refuse = |why: String| CheckError::FdRefused {
            fd: f.fd,
            target: f.path.clone(),
            why,
        };
        let want: fn(&std::fs::FileType) -> bool = match f.kind {
            FdKind::Other => return Err(refuse(unrestorable(&f.path))),
            FdKind::Userfaultfd | FdKind::Pagemap => continue,
            FdKind::File => std::fs::FileType::is_file,
            FdKind::Directory => std::fs::FileType::is_dir,
            FdKind::Device => FileTypeExt::is_char_device,
        };
        match std::fs::metadata(&f.path) {
            Ok(m) if want(&m.file_type()) => {}
            Ok(_) => {
                return Err(refuse(format!(
                    "something of another kind is at that path now; put back what was \
                     there, or start the program anew ({:?} expected)",
                    f.kind
                )))
            }
            Err(e) => {
                return Err(refuse(format!(
                    "it cannot be opened again ({e}); put it back, or start the program anew"
                )))
            }
        }
    }
    Ok(())
}

/// Why a descriptor of kind Other cannot be restored, from what `readlink` called it.
fn unrestorable(target: &str) -> String {
    let what = if target.starts_with("socket:") {
        "sockets cannot be restored"
    } else if target.starts_with("pipe:") {
        "pipes cannot be restored yet"
    } else if let Some(anon) = target.strip_prefix("anon_inode:") {
        let name = anon.trim_start_matches('[').trim_end_matches(']');
        return format!("{name} descriptors cannot be restored yet; close it before a checkpoint");
    } else {
        "this kind of file cannot be restored"
    };
    format!("{what}; close it before a checkpoint")
}
