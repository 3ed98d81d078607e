//! System calls writing into tracked memory: read(2), pread(2) and recv(2) into a protected
//! buffer. With uffd the kernel hands their faults to ickpt's handler thread and the plain
//! calls work; with uffd-async the kernel resolves them itself; with mprotect they fail
//! with EFAULT (AI-Ckpt §3.4), and `ickpt::tracked_io` (ickpt_read & co. in C) makes them
//! work. Either way the bytes land in the next version. Run once per backend
//! (ICKPT_BACKEND).

mod common;
use common::{scratch_dir, Buf};
use ickpt::{Backend, Config, Engine};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

const PS: usize = 4096;

/// The three system calls, each filling `dst` (4 pages) from a source holding `fill`.
fn via_read(dst: &mut [u8], fill: u8, wrapped: bool) -> std::io::Result<usize> {
    let (mut tx, rx) = UnixStream::pair()?;
    tx.write_all(&vec![fill; dst.len()])?;
    drop(tx);
    let fd = rx.as_raw_fd();
    let mut got = 0;
    while got < dst.len() {
        let n = if wrapped {
            ickpt::tracked_io::read(fd, &mut dst[got..])?
        } else {
            // SAFETY: `dst[got..]` is writable for its length.
            let n = unsafe { libc::read(fd, dst[got..].as_mut_ptr().cast(), dst.len() - got) };
            if n < 0 {
                return Err(std::io::Error::last_os_error());
            }
            n as usize
        };
        got += n;
    }
    Ok(got)
}

fn via_pread(dst: &mut [u8], fill: u8, wrapped: bool) -> std::io::Result<usize> {
    let path = scratch_dir("pread-src");
    std::fs::write(&path, vec![fill; dst.len() + 10])?;
    let f = std::fs::File::open(&path)?;
    let r = if wrapped {
        ickpt::tracked_io::pread(f.as_raw_fd(), dst, 10)
    } else {
        // SAFETY: `dst` is writable for its length.
        let n = unsafe { libc::pread(f.as_raw_fd(), dst.as_mut_ptr().cast(), dst.len(), 10) };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    };
    let _ = std::fs::remove_file(&path);
    r
}

fn via_recv(dst: &mut [u8], fill: u8, wrapped: bool) -> std::io::Result<usize> {
    let (mut tx, rx) = UnixStream::pair()?;
    tx.write_all(&vec![fill; dst.len()])?;
    let fd = rx.as_raw_fd();
    let mut got = 0;
    while got < dst.len() {
        let n = if wrapped {
            ickpt::tracked_io::recv(fd, &mut dst[got..], 0)?
        } else {
            // SAFETY: `dst[got..]` is writable for its length.
            let n = unsafe { libc::recv(fd, dst[got..].as_mut_ptr().cast(), dst.len() - got, 0) };
            if n < 0 {
                return Err(std::io::Error::last_os_error());
            }
            n as usize
        };
        got += n;
    }
    Ok(got)
}

type Call = fn(&mut [u8], u8, bool) -> std::io::Result<usize>;
const CALLS: [(&str, Call); 3] = [("read", via_read), ("pread", via_pread), ("recv", via_recv)];

#[test]
fn system_calls_write_into_tracked_memory_and_the_bytes_are_checkpointed() {
    let dir = scratch_dir("syscalls");
    let e = Engine::open(Config::new(&dir)).unwrap();
    let mut buf = Buf::new(16 * PS);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    e.checkpoint().unwrap();
    let backend = e.backend();
    for (i, (name, call)) in CALLS.iter().enumerate() {
        let fill = 0x10 + i as u8;
        let span = &mut buf.slice_mut()[(4 * i + 1) * PS..(4 * i + 5) * PS];
        let plain = call(span, fill, false);
        match backend {
            // The write fault inside the system call cannot be taken: EFAULT, nothing lost.
            Backend::Mprotect => {
                let err = plain.expect_err(name);
                assert_eq!(err.raw_os_error(), Some(libc::EFAULT), "{name}: {err}");
                assert_eq!(call(span, fill, true).unwrap(), 4 * PS, "{name}");
            }
            _ => assert_eq!(plain.unwrap(), 4 * PS, "{name} on {backend:?}"),
        }
        assert!(span.iter().all(|&b| b == fill), "{name}");
        let v = e.checkpoint().unwrap();
        assert_eq!(v.pages, 4, "{name} on {backend:?}: the 4 pages it wrote");
    }
    let want = buf.slice().to_vec();
    buf.slice_mut().fill(0);
    e.restore(e.latest().unwrap().unwrap()).unwrap();
    assert!(buf.slice() == &want[..]);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_wrappers_work_with_every_backend_even_during_a_commit() {
    let dir = scratch_dir("syscalls-commit");
    let mut c = Config::new(&dir);
    c.mode = ickpt::format::CommitMode::Async;
    // Slow storage: the commit is still running while the calls write.
    c.bandwidth = Some(4 << 20);
    let e = Engine::open(c).unwrap();
    let mut buf = Buf::new(64 * PS);
    // SAFETY: `buf` outlives the engine.
    unsafe { e.protect(1, buf.ptr, buf.len).unwrap() };
    e.checkpoint().unwrap();
    e.wait().unwrap();
    buf.slice_mut().fill(1);
    let v = e.checkpoint().unwrap().version;
    for (i, (name, call)) in CALLS.iter().enumerate() {
        let span = &mut buf.slice_mut()[4 * i * PS..(4 * i + 4) * PS];
        assert_eq!(call(span, 0x20 + i as u8, true).unwrap(), 4 * PS, "{name}");
    }
    let after = buf.slice().to_vec();
    e.wait().unwrap();
    // The version holds memory as it was at its checkpoint, not the system calls' bytes.
    e.restore(v).unwrap();
    assert!(buf.slice().iter().all(|&b| b == 1));
    buf.slice_mut().copy_from_slice(&after);
    let w = e.checkpoint().unwrap().version;
    e.wait().unwrap();
    buf.slice_mut().fill(0);
    e.restore(w).unwrap();
    assert!(buf.slice() == &after[..]);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}
