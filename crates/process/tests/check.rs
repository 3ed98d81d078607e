//! The restart's checks: what passes on an unchanged machine, and what each refusal says.

mod common;

use ickpt_process::capture::{file_id, process_base};
use ickpt_process::*;

fn temp(name: &str) -> String {
    let p = std::env::temp_dir().join(format!("ickpt-process-{}-{name}", std::process::id()));
    p.to_str().unwrap().to_string()
}

fn fd(fd: i32, kind: FdKind, path: &str) -> FdRecord {
    FdRecord {
        fd,
        kind,
        path: path.into(),
        flags: 0,
        offset: 0,
        locked: false,
        uffd_features: 0,
    }
}

#[test]
fn this_kernel_passes_and_another_build_is_refused_naming_both() {
    let mut r = process_base().unwrap();
    check_same_kernel(&r).unwrap();
    let now = r.kernel.clone();
    r.kernel = "6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1".into();
    let e = check_same_kernel(&r).unwrap_err().to_string();
    assert!(e.contains(&r.kernel) && e.contains(&now), "{e}");
    assert!(e.contains("same kernel build") && e.contains("vDSO"), "{e}");
    r.kernel = now;
    r.arch = "riscv64".into();
    let e = check_same_kernel(&r).unwrap_err().to_string();
    assert!(
        e.contains("riscv64") && e.contains(std::env::consts::ARCH),
        "{e}"
    );
}

#[test]
fn a_mapped_file_changed_since_the_checkpoint_is_refused_by_name() {
    let path = temp("lib.so");
    std::fs::write(&path, b"code").unwrap();
    let mut r = process_base().unwrap();
    let mut lib = common::sample().mappings[0].clone();
    lib.file = Some(file_id(&path).unwrap());
    r.mappings.insert(0, lib.clone());
    // A file that is only written over by stored pages is not checked.
    let mut data = lib.clone();
    data.kind = MappingKind::Region(data.start);
    data.file = Some(common::file("/nonexistent/lib.so"));
    r.mappings.push(data);
    check_files(&r).unwrap();

    std::fs::write(&path, b"longer code").unwrap();
    let e = check_files(&r).unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains(&path) && s.contains("rebuilt or updated since the checkpoint"),
        "{s}"
    );
    assert!(matches!(e, CheckError::FileChanged { .. }));

    // Same size, another file at the path (an install renames a new file over the old).
    std::fs::write(&path, b"code").unwrap();
    r.mappings[0].file = Some(file_id(&path).unwrap());
    let new = temp("lib.so.new");
    std::fs::write(&new, b"code").unwrap();
    std::fs::rename(&new, &path).unwrap();
    let s = check_files(&r).unwrap_err().to_string();
    assert!(s.contains(&path) && s.contains("another file"), "{s}");

    std::fs::remove_file(&path).unwrap();
    let e = check_files(&r).unwrap_err();
    assert!(
        matches!(&e, CheckError::FileMissing { path: p, .. } if *p == path),
        "{e}"
    );
}

#[test]
fn a_rebuilt_executable_is_refused() {
    let mut r = process_base().unwrap();
    r.exe.mtime_ns -= 1;
    let s = check_files(&r).unwrap_err().to_string();
    assert!(s.contains(&r.exe.path) && s.contains("modified"), "{s}");
}

#[test]
fn descriptors_that_cannot_come_back_are_refused_naming_fd_and_target() {
    let path = temp("open-file");
    std::fs::write(&path, b"x").unwrap();
    let mut r = common::sample();
    r.fds = vec![
        fd(0, FdKind::Other, "socket:[1]"),
        fd(2, FdKind::Other, "pipe:[2]"),
        fd(3, FdKind::File, &path),
        fd(4, FdKind::Directory, "/"),
        fd(5, FdKind::Device, "/dev/null"),
        fd(6, FdKind::Userfaultfd, "anon_inode:[userfaultfd]"),
        fd(7, FdKind::Pagemap, "/proc/1/pagemap"),
    ];
    check_fds(&r).unwrap();

    let refused = |f: FdRecord| {
        let mut r = r.clone();
        r.fds.push(f);
        check_fds(&r).unwrap_err().to_string()
    };
    assert_eq!(
        refused(fd(8, FdKind::Other, "socket:[1234]")),
        "fd 8 is socket:[1234]: sockets cannot be restored; close it before a checkpoint"
    );
    let s = refused(fd(8, FdKind::Other, "anon_inode:[eventfd]"));
    assert!(
        s.starts_with("fd 8 is anon_inode:[eventfd]: eventfd descriptors"),
        "{s}"
    );
    let s = refused(fd(9, FdKind::File, "/nonexistent/out.txt"));
    assert!(
        s.starts_with("fd 9 is /nonexistent/out.txt: it cannot be opened again"),
        "{s}"
    );
    let s = refused(fd(9, FdKind::Directory, &path));
    assert!(
        s.starts_with(&format!("fd 9 is {path}: something of another kind")),
        "{s}"
    );
    std::fs::remove_file(&path).unwrap();
    let s = check_fds(&r).unwrap_err().to_string();
    assert!(s.starts_with(&format!("fd 3 is {path}")), "{s}");
}
