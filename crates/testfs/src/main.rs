//! ickpt-testfs BACKING MOUNTPOINT [FAULTS]: mounts a FUSE passthrough of BACKING at
//! MOUNTPOINT and serves it in the foreground until it is unmounted or the process gets
//! SIGTERM, SIGINT or SIGHUP (then it detaches the mount itself). A test tool: it needs root
//! (it mounts with mount(2)) and /dev/fuse, and is never installed.

mod attr;
mod faults;
mod inodes;
mod passthrough;

use clap::Parser;
use faults::Faults;
use fuser::{Config, MountOption, Session};
use nix::mount::{umount2, MntFlags};
use nix::sys::signal::{SigSet, Signal};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

#[derive(Parser)]
#[command(
    name = "ickpt-testfs",
    about = "A FUSE passthrough of a directory that fails chosen operations (for ickpt's tests)"
)]
struct Args {
    /// Directory whose files the mount shows (and where its data lives).
    backing: PathBuf,
    /// Where to mount it.
    mountpoint: PathBuf,
    /// A rename with any flag (RENAME_NOREPLACE...) fails with EINVAL, as on NFS.
    #[arg(long)]
    no_rename_flags: bool,
    /// link(2) fails with EPERM.
    #[arg(long)]
    no_link: bool,
    /// link(2) fails with EROFS, as on fusepy's file systems.
    #[arg(long)]
    link_erofs: bool,
    /// Writes fail with EIO once they would take the total written through the mount past
    /// BYTES.
    #[arg(long, value_name = "BYTES")]
    eio_after: Option<u64>,
    /// Writes fail with ENOSPC once they would take the total past BYTES.
    #[arg(long, value_name = "BYTES")]
    enospc_after: Option<u64>,
    /// fsync fails with EIO (directories' fsync is not affected).
    #[arg(long, conflicts_with = "eio_fsync_after")]
    eio_fsync: bool,
    /// fsync fails with EIO once BYTES have been written through the mount.
    #[arg(long, value_name = "BYTES")]
    eio_fsync_after: Option<u64>,
}

impl Args {
    fn faults(&self) -> Faults {
        Faults {
            no_rename_flags: self.no_rename_flags,
            no_link: self.no_link,
            link_erofs: self.link_erofs,
            eio_after: self.eio_after,
            enospc_after: self.enospc_after,
            eio_fsync_after: self.eio_fsync_after.or(self.eio_fsync.then_some(0)),
        }
    }
}

/// On a termination signal, detach the mount and leave: the data is already in the backing
/// files (every write is a pwrite there), and exiting closes /dev/fuse, which fails whatever
/// still uses the detached mount instead of leaving it hanging. `mounting` is held while
/// mount(2) may be under way: a signal then would otherwise exit before the mount exists
/// and leave it behind, served by no one.
fn exit_on_signals(mountpoint: PathBuf, mounting: Arc<Mutex<()>>) -> nix::Result<()> {
    let mut set = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        set.add(s);
    }
    // Blocked before any other thread starts, so only the waiting thread takes them.
    set.thread_block()?;
    std::thread::spawn(move || {
        let sig = set
            .wait()
            .map_or_else(|e| e.to_string(), |s| s.as_str().to_owned());
        let _mounted = mounting.lock().unwrap_or_else(|e| e.into_inner());
        eprintln!("ickpt-testfs: {sig}: unmounting {}", mountpoint.display());
        // EINVAL: the test detached it already.
        let _ = umount2(&mountpoint, MntFlags::MNT_DETACH);
        std::process::exit(0);
    });
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let fs = match passthrough::Passthrough::new(&args.backing, args.faults()) {
        Ok(fs) => fs,
        Err(e) => {
            eprintln!("ickpt-testfs: {}: {e}", args.backing.display());
            return ExitCode::from(2);
        }
    };
    let mountpoint = match args.mountpoint.canonicalize() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("ickpt-testfs: {}: {e}", args.mountpoint.display());
            return ExitCode::from(2);
        }
    };
    let mounting = Arc::new(Mutex::new(()));
    let guard = mounting.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = exit_on_signals(mountpoint.clone(), Arc::clone(&mounting)) {
        eprintln!("ickpt-testfs: cannot block termination signals: {e}");
        return ExitCode::FAILURE;
    }
    let mut config = Config::default();
    // No AutoUnmount: fuser would need fusermount for it.
    config.mount_options = vec![
        MountOption::FSName("ickpt-testfs".into()),
        MountOption::DefaultPermissions,
    ];
    let served = Session::new(fs, &mountpoint, &config).and_then(|session| {
        drop(guard);
        session.run()
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "ickpt-testfs: cannot serve {} at {}: {e} (it needs root and /dev/fuse)",
                args.backing.display(),
                mountpoint.display()
            );
            ExitCode::FAILURE
        }
    }
}
