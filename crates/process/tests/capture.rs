//! The capture, in this test process, against what std, libc and the kernel's other files
//! say about it.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;

use ickpt_process::capture::*;
use ickpt_process::*;

fn temp(name: &str) -> String {
    let p = std::env::temp_dir().join(format!("ickpt-process-{}-{name}", std::process::id()));
    p.to_str().unwrap().to_string()
}

#[test]
fn kernel_arch_and_page_size_are_this_machines() {
    let read = |p| std::fs::read_to_string(p).unwrap().trim_end().to_string();
    let want = format!(
        "{} {}",
        read("/proc/sys/kernel/osrelease"),
        read("/proc/sys/kernel/version")
    );
    assert_eq!(kernel().unwrap(), want);
    assert_eq!(arch(), std::env::consts::ARCH);
    // SAFETY: getauxval only reads the auxiliary vector.
    let at_pagesz = unsafe { libc::getauxval(libc::AT_PAGESZ) };
    assert_eq!(page_size() as u64, at_pagesz);
}

#[test]
fn auxv_holds_what_getauxval_returns() {
    let words = auxv().unwrap();
    assert!(words.len() % 2 == 0 && words.len() <= 128);
    assert_eq!(words[words.len() - 2..], [0, 0], "AT_NULL ends it");
    let pairs: Vec<(u64, u64)> = words.chunks(2).map(|p| (p[0], p[1])).collect();
    for t in [
        libc::AT_PAGESZ,
        libc::AT_ENTRY,
        libc::AT_PHDR,
        libc::AT_RANDOM,
    ] {
        // SAFETY: getauxval only reads the auxiliary vector.
        let v = unsafe { libc::getauxval(t) };
        assert!(pairs.contains(&(t, v)), "type {t}");
    }
}

static IN_DATA: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0x5eed);

#[test]
fn mm_fields_bound_this_programs_code_data_stack_and_arguments() {
    let [start_code, end_code, start_data, end_data, start_brk, brk, start_stack, arg_start, arg_end, env_start, env_end] =
        mm_fields().unwrap();
    let code = mm_fields_bound_this_programs_code_data_stack_and_arguments as *const () as u64;
    assert!(start_code <= code && code < end_code);
    let data = &IN_DATA as *const _ as u64;
    assert!(start_data <= data && data < end_data, "{data:#x}");
    assert!(start_brk <= brk);
    let maps = read_maps().unwrap();
    let stack = maps.iter().find(|m| m.name == "[stack]").unwrap();
    for addr in [start_stack, arg_start, env_end - 1] {
        assert!(stack.start <= addr && addr < stack.end, "{addr:#x}");
    }
    let len = |p| std::fs::read(p).unwrap().len() as u64;
    assert_eq!(arg_end - arg_start, len("/proc/self/cmdline"));
    assert_eq!(env_end - env_start, len("/proc/self/environ"));
    // The break is brk(0), as sbrk(0) says; another test thread's malloc may move it
    // meanwhile, so take a moment when it stood still.
    let same = (0..100).any(|_| {
        // SAFETY: sbrk(0) only reads the break.
        let before = unsafe { libc::sbrk(0) } as u64;
        let brk = mm_fields().unwrap()[5];
        // SAFETY: as above.
        let after = unsafe { libc::sbrk(0) } as u64;
        before == after && brk == before
    });
    assert!(same);
}

extern "C" fn handler(_: libc::c_int) {}

#[test]
fn sigactions_are_the_kernels_with_their_restorer() {
    let sig = libc::SIGRTMIN() + 7;
    // SAFETY: all zeros is a valid sigaction, filled in below.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler as *const () as usize;
    sa.sa_flags = libc::SA_RESTART;
    // SAFETY: the mask is a valid sigset_t.
    unsafe { libc::sigaddset(&mut sa.sa_mask, libc::SIGUSR1) };
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: `sa` is initialised; the handler does nothing; no other test uses `sig`.
    assert_eq!(unsafe { libc::sigaction(sig, &sa, &mut old) }, 0);
    let all = sigactions().unwrap();
    // SAFETY: puts back what was there.
    unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) };
    assert_eq!(all.len(), 64);
    let a = all[sig as usize - 1];
    assert_eq!(a.handler, handler as *const () as u64);
    assert_ne!(a.flags & libc::SA_RESTART as u64, 0);
    assert_eq!(a.mask, 1 << (libc::SIGUSR1 - 1));
    if cfg!(target_arch = "x86_64") {
        // glibc installs its own restorer (x86-64 requires one).
        const SA_RESTORER: u64 = 0x0400_0000;
        assert_ne!(a.flags & SA_RESTORER, 0);
        assert_ne!(a.restorer, 0);
    }
    assert_eq!(all[libc::SIGKILL as usize - 1].handler, 0, "SIG_DFL");
}

#[test]
fn cwd_umask_exe_and_threads_are_this_processs() {
    assert_eq!(
        cwd().unwrap(),
        std::env::current_dir().unwrap().to_str().unwrap()
    );
    // SAFETY: umask has no memory-safety preconditions; the old value goes straight back.
    let old = unsafe { libc::umask(0o027) };
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    assert_eq!(umask().unwrap(), old);
    let exe = exe().unwrap();
    let path = std::env::current_exe().unwrap();
    let m = std::fs::metadata(&path).unwrap();
    assert_eq!(exe.path, path.to_str().unwrap());
    assert_eq!((exe.dev, exe.ino, exe.size), (m.dev(), m.ino(), m.size()));
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() } as u32;
    // A listing of /proc/self/task may miss threads while others (the other tests') exit;
    // one of a few listings has both.
    let both = (0..20).any(|_| {
        let tids = list_tids().unwrap();
        tids.contains(&std::process::id()) && tids.contains(&me)
    });
    assert!(both);
}

#[test]
fn file_id_is_what_stat_says() {
    let path = temp("file-id");
    std::fs::write(&path, b"twelve bytes").unwrap();
    let id = file_id(&path).unwrap();
    let m = std::fs::metadata(&path).unwrap();
    let mtime = m
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    assert_eq!(id.path, path);
    assert_eq!((id.dev, id.ino, id.size), (m.dev(), m.ino(), 12));
    assert_eq!(id.mtime_ns, mtime.as_nanos() as i128);
    std::fs::remove_file(&path).unwrap();
    let e = file_id(&path).unwrap_err().to_string();
    assert!(e.contains(&path), "{e}");
}

#[test]
fn each_kind_of_descriptor_is_recognised() {
    let path = temp("fds");
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    file.write_all(&[1; 300]).unwrap();
    file.seek(SeekFrom::Start(123)).unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }, 0);
    let unlocked = File::open(&path).unwrap();
    let dir = File::open(std::env::temp_dir()).unwrap();
    let null = File::open("/dev/null").unwrap();
    let pagemap = File::open("/proc/self/pagemap").unwrap();
    let (sock, _peer) = std::os::unix::net::UnixDatagram::pair().unwrap();

    let fds = list_fds().unwrap();
    let find = |fd: &dyn AsRawFd| fds.iter().find(|f| f.fd == fd.as_raw_fd()).unwrap().clone();
    let f = find(&file);
    assert_eq!(
        (f.kind, f.path.as_str(), f.offset, f.locked),
        (FdKind::File, path.as_str(), 123, true)
    );
    assert_eq!(f.flags & libc::O_ACCMODE, libc::O_RDWR);
    assert_ne!(f.flags & libc::O_CLOEXEC, 0, "std opens with O_CLOEXEC");
    let u = find(&unlocked);
    assert_eq!(
        (u.kind, u.locked, u.flags & libc::O_ACCMODE),
        (FdKind::File, false, libc::O_RDONLY)
    );
    assert_eq!(find(&dir).kind, FdKind::Directory);
    assert_eq!(
        (find(&null).kind, find(&null).path.as_str()),
        (FdKind::Device, "/dev/null")
    );
    assert_eq!(find(&pagemap).kind, FdKind::Pagemap);
    let s = find(&sock);
    assert!(
        s.kind == FdKind::Other && s.path.starts_with("socket:["),
        "{s:?}"
    );
    assert!(fds.windows(2).all(|w| w[0].fd < w[1].fd));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_userfaultfd_is_recorded_with_its_features() {
    const UFFD_USER_MODE_ONLY: libc::c_int = 1;
    const UFFDIO_API: libc::c_ulong = 0xc018_aa3f; // _IOWR(0xAA, 0x3F, struct uffdio_api)
    const UFFD_FEATURE_THREAD_ID: u64 = 1 << 8;
    // SAFETY: creates a descriptor; no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | UFFD_USER_MODE_ONLY) }
        as i32;
    if fd < 0 {
        eprintln!("SKIPPED: userfaultfd: {}", std::io::Error::last_os_error());
        return;
    }
    // struct uffdio_api { api, features, ioctls }
    let mut api = [0xaa_u64, UFFD_FEATURE_THREAD_ID, 0];
    // SAFETY: `api` is a valid, writable uffdio_api for the ioctl.
    assert_eq!(unsafe { libc::ioctl(fd, UFFDIO_API, api.as_mut_ptr()) }, 0);
    let fds = list_fds().unwrap();
    // SAFETY: closes the descriptor this test opened.
    unsafe { libc::close(fd) };
    let u = fds.iter().find(|f| f.fd == fd).unwrap();
    assert_eq!(u.kind, FdKind::Userfaultfd);
    assert_ne!(
        u.uffd_features & UFFD_FEATURE_THREAD_ID,
        0,
        "{:#x}",
        u.uffd_features
    );
}

#[test]
fn this_process_is_classified_and_its_record_round_trips() {
    let mut r = process_base().unwrap();
    for m in read_maps().unwrap() {
        match classify(&m, || true) {
            Ok(kind) => {
                if m.is_special() {
                    assert_eq!(kind, MappingKind::Special);
                }
                let file = (kind == MappingKind::File).then(|| file_id(&m.name).unwrap());
                r.mappings.push(m.record(kind, file));
            }
            Err(ClassifyError::Shared { .. }) => assert!(m.shared),
        }
    }
    assert!(r
        .mappings
        .iter()
        .any(|m| m.name == "[stack]" && m.growsdown));
    assert_eq!(r.pid, std::process::id());
    let bytes = encode(&r).unwrap();
    assert_eq!(decode(&bytes).unwrap(), r);
}

#[test]
fn a_posix_timer_and_a_thread_name_are_read_as_set() {
    let name = std::thread::current().name().map(str::to_owned);
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() } as u32;
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"timer-test".as_ptr()) };
    assert_eq!(&thread_name(me)[..11], b"timer-test\0");
    // SAFETY: a zeroed sigevent is valid; SIGEV_THREAD_ID to this thread, signal 40.
    let mut ev: libc::sigevent = unsafe { std::mem::zeroed() };
    ev.sigev_notify = libc::SIGEV_THREAD_ID;
    ev.sigev_signo = 40;
    ev.sigev_value = libc::sigval {
        sival_ptr: 0x77 as *mut libc::c_void,
    };
    ev.sigev_notify_thread_id = me as i32;
    let mut id: libc::c_int = -1;
    // SAFETY: the raw call with a valid sigevent and out-pointer.
    let rc = unsafe { libc::syscall(libc::SYS_timer_create, libc::CLOCK_MONOTONIC, &ev, &mut id) };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 7,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: 100,
            tv_nsec: 0,
        },
    };
    // SAFETY: the timer just made; a valid itimerspec, no old value asked for.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_timer_settime,
            id,
            0,
            &spec,
            std::ptr::null_mut::<libc::itimerspec>(),
        )
    };
    assert_eq!(rc, 0);
    let timers = posix_timers();
    // SAFETY: the timer made above, deleted once.
    unsafe { libc::syscall(libc::SYS_timer_delete, id) };
    let timers = timers.unwrap();
    let t = timers.iter().find(|t| t.id == id as u32).expect("listed");
    assert_eq!(t.notify, TimerNotify::ThreadId(me));
    assert_eq!(
        (t.signal, t.value, t.clock),
        (40, 0x77, libc::CLOCK_MONOTONIC)
    );
    assert_eq!(t.interval_ns, 7_000_000_000);
    assert!(t.left_ns > 90_000_000_000 && t.left_ns <= 100_000_000_000);
    if let Some(n) = name {
        let c = std::ffi::CString::new(n.chars().take(15).collect::<String>()).unwrap();
        // SAFETY: as above.
        unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr()) };
    }
}
