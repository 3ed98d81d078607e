//! The object-store tier under `ickpt run` and `ickpt restart`: the program may hold no socket
//! (a restart could not bring one back), so a process of the supervisor's, outside the
//! program, drains the program's local store to the bucket (`ickpt::OutsideDrain`), a round
//! after each version the program commits (seen through inotify) and a last one when the
//! program has ended. The
//! program's engine is told (`ICKPT_DRAINED_ELSEWHERE=1`) to keep what is not in the bucket
//! yet.

// inotify and poll: raw system calls on descriptors of our own.
#![allow(unsafe_code)]

use crate::pid_namespace::Beside;
use ickpt::store::{parse_version_name, ObjectTier, Tier};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

pub struct ObjectDrain {
    dir: PathBuf,
    url: String,
    command: &'static str,
    /// Closed when the program has ended: the drain's last round follows.
    stop: Option<OwnedFd>,
    /// The process that drains.
    pid: i32,
}

impl ObjectDrain {
    /// Checks the URL now, so a bad one is told before the program starts.
    pub fn new(dir: PathBuf, url: String, command: &'static str) -> Result<ObjectDrain, String> {
        ickpt::store::parse_object_url(&url).map_err(|want| format!("--object {url}: {want}"))?;
        Ok(ObjectDrain {
            dir,
            url,
            command,
            stop: None,
            pid: 0,
        })
    }
}

impl ObjectDrain {
    /// As [`ObjectDrain::new`], the directory made first if it is not there (a restart on
    /// another node, which makes the store in it).
    pub fn new_made(
        dir: PathBuf,
        url: String,
        command: &'static str,
    ) -> Result<ObjectDrain, String> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("making {}: {e}", dir.display()))?;
        ObjectDrain::new(dir, url, command)
    }
}

impl Beside for ObjectDrain {
    fn start(&mut self) -> Result<(), String> {
        let mut fds = [0i32; 2];
        // SAFETY: the kernel fills two descriptors, owned from here on.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(format!("pipe: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: both are new descriptors of ours.
        let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: this process has one thread (pid_namespace::enter checked); the child runs
        // the drain and exits.
        match unsafe { libc::fork() } {
            -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
            0 => {
                drop(wr);
                // The terminal's signals reach the whole job: the drain outlives the program
                // they end, for its last round.
                for sig in [libc::SIGINT, libc::SIGQUIT, libc::SIGTSTP, libc::SIGHUP] {
                    // SAFETY: sets this process's own action.
                    unsafe { libc::signal(sig, libc::SIG_IGN) };
                }
                drain_process(&self.dir, &self.url, self.command, rd);
                std::process::exit(0)
            }
            pid => {
                self.stop = Some(wr);
                self.pid = pid;
                Ok(())
            }
        }
    }

    fn finish(&mut self) {
        drop(self.stop.take());
        if self.pid > 0 {
            let mut status = 0;
            // SAFETY: reaps our own child, retrying when interrupted.
            while unsafe { libc::waitpid(self.pid, &mut status, 0) } < 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
            {}
        }
    }
}

/// Rounds until `stop`'s writer is gone, then a last one.
fn drain_process(dir: &std::path::Path, url: &str, command: &str, stop: OwnedFd) {
    let watch = match Watch::new(dir) {
        Ok(w) => w,
        Err(e) => {
            eprintln!(
                "{command}: no drain to {url}: watching {}: {e}",
                dir.display()
            );
            return;
        }
    };
    let mut drain = None;
    // Said once when rounds start failing (each failure's text differs: timings, retries),
    // and once when they work again.
    let mut failing = false;
    loop {
        let ended = !watch.wait_for_version(&stop);
        match round(dir, url, &mut drain) {
            Err(e) if !failing || ended => {
                eprintln!(
                    "{command}: draining {} to {url}: {e}{}",
                    dir.display(),
                    if ended {
                        ""
                    } else {
                        "; trying again at each version"
                    }
                );
                failing = true;
            }
            Err(_) => {}
            Ok(()) if failing => {
                eprintln!("{command}: draining {} to {url} works again", dir.display());
                failing = false;
            }
            Ok(()) => {}
        }
        if ended {
            match drain.as_ref().map_or(0, |d| d.drained()) {
                0 => eprintln!("{command}: {url} holds no version of {}", dir.display()),
                v => eprintln!("{command}: {url} holds every version up to {v}"),
            }
            return;
        }
    }
}

/// One round, the drain started first if it is not yet (the store gets its identity when the
/// program's engine opens it).
fn round(
    dir: &std::path::Path,
    url: &str,
    drain: &mut Option<ickpt::OutsideDrain>,
) -> Result<(), String> {
    if drain.is_none() {
        let cfg = ickpt::Config::new(dir)
            .with_env()
            .map_err(|e| e.to_string())?;
        let tier = ObjectTier::open(url).map_err(|e| format!("opening the bucket: {e}"))?;
        let lower = vec![Tier {
            name: "object",
            store: Arc::new(tier),
        }];
        *drain = Some(ickpt::OutsideDrain::start(&cfg, lower).map_err(|e| e.to_string())?);
    }
    drain
        .as_ref()
        .expect("started above")
        .round()
        .map_err(|e| e.to_string())
}

/// An inotify watch of the store directory for version files that appear.
struct Watch(OwnedFd);

impl Watch {
    fn new(dir: &std::path::Path) -> std::io::Result<Watch> {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: a new descriptor, owned from here on.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: as above.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: a valid path; the watch lives as long as the descriptor.
        let w = unsafe {
            libc::inotify_add_watch(
                fd.as_raw_fd(),
                path.as_ptr(),
                libc::IN_MOVED_TO | libc::IN_CLOSE_WRITE,
            )
        };
        if w < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Watch(fd))
    }

    /// Wait until a version file appears (true) or `stop`'s writer is gone (false).
    fn wait_for_version(&self, stop: &OwnedFd) -> bool {
        loop {
            let mut p = [
                libc::pollfd {
                    fd: self.0.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: stop.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: polls two descriptors of ours.
            let n = unsafe { libc::poll(p.as_mut_ptr(), 2, -1) };
            if n < 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return false;
            }
            if p[1].revents != 0 {
                return false;
            }
            if self.read_events() {
                return true;
            }
        }
    }

    /// Read the pending events: whether one names a version file.
    fn read_events(&self) -> bool {
        let mut buf = [0u8; 4096];
        // SAFETY: reads into our buffer.
        let n = unsafe { libc::read(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            return false;
        }
        let mut at = 0usize;
        let mut version = false;
        let head = std::mem::size_of::<libc::inotify_event>();
        while at + head <= n as usize {
            // SAFETY: the kernel wrote whole events; read unaligned from our buffer.
            let ev: libc::inotify_event =
                unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
            let name_at = at + head;
            let name_end = (name_at + ev.len as usize).min(n as usize);
            let name = &buf[name_at..name_end];
            let name = name.split(|&b| b == 0).next().unwrap_or(&[]);
            version |= std::str::from_utf8(name).is_ok_and(|s| parse_version_name(s).is_some());
            at = name_end;
        }
        version
    }
}
