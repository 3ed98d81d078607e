//! Listings of the descriptors that others would disturb: one that another thread closes
//! while they are listed, and one taken from an earlier listing. A binary of its own: the
//! listing's own directories, open while it runs, would show in the listings of the
//! crate's unit tests, which check they do not.

use ickpt_process::{list_fds, list_fds_with, FdKind, FdMemo, FdRecord};
use std::io::{Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Another thread opening and closing descriptors while they are listed: each listing
/// succeeds, whatever it catches mid-close.
#[test]
fn descriptors_closed_while_listed_are_left_out() {
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                drop(std::fs::File::open("/dev/null").unwrap());
            }
        })
    };
    let listed = (0..10_000).map(|_| list_fds()).collect::<Vec<_>>();
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
    for r in listed {
        r.unwrap();
    }
}

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("fds-listing-{}-{name}", std::process::id()))
}

fn of(fds: &[FdRecord], fd: i32) -> FdRecord {
    fds.iter()
        .find(|r| r.fd == fd)
        .unwrap_or_else(|| panic!("fd {fd} not listed: {fds:?}"))
        .clone()
}

/// A record the memo may reuse is taken again while its descriptor refers to the same file,
/// its path unread (a rename does not show) and its offset and flags read anew; once the
/// descriptor refers to another file it is read whole. A record the memo may not reuse is
/// read whole every time.
#[test]
fn a_record_is_taken_again_while_its_descriptor_is_the_same_file() {
    let (kept, moved, other) = (temp("kept"), temp("moved"), temp("other"));
    let (plain, plain_moved) = (temp("plain"), temp("plain-moved"));
    for p in [&kept, &other, &plain] {
        std::fs::write(p, b"0123456789").unwrap();
    }
    let mut file = std::fs::File::open(&kept).unwrap();
    let plain_file = std::fs::File::open(&plain).unwrap();
    let fd = file.as_raw_fd();
    let kept_path = kept.to_str().unwrap().to_string();
    let mut memo = FdMemo::reusing(Box::new({
        let p = kept_path.clone();
        move |r| r.path == p
    }));
    file.seek(SeekFrom::Start(3)).unwrap();
    let first = of(&list_fds_with(&mut memo).unwrap(), fd);
    assert_eq!((first.path.as_str(), first.offset), (kept_path.as_str(), 3));

    std::fs::rename(&kept, &moved).unwrap();
    std::fs::rename(&plain, &plain_moved).unwrap();
    file.seek(SeekFrom::Start(5)).unwrap();
    let listed = list_fds_with(&mut memo).unwrap();
    let again = of(&listed, fd);
    assert_eq!(
        again,
        FdRecord {
            offset: 5,
            ..first.clone()
        }
    );
    assert_eq!(
        of(&listed, plain_file.as_raw_fd()).path,
        plain_moved.to_str().unwrap()
    );
    // What fdinfo says, had it been read anew (its path aside).
    let fresh = of(&list_fds().unwrap(), fd);
    assert_eq!(
        (fresh.kind, fresh.flags, fresh.offset, fresh.locked),
        (again.kind, again.flags, again.offset, again.locked)
    );

    let replacement = std::fs::File::open(&other).unwrap();
    // SAFETY: dup2 onto a descriptor this test owns.
    assert_eq!(unsafe { libc::dup2(replacement.as_raw_fd(), fd) }, fd);
    let now = of(&list_fds_with(&mut memo).unwrap(), fd);
    assert_eq!(
        (now.kind, now.path.as_str(), now.offset),
        (FdKind::File, other.to_str().unwrap(), 0)
    );
    for p in [&moved, &other, &plain_moved] {
        let _ = std::fs::remove_file(p);
    }
}
