//! A real S3-compatible server for the object-store tier's tests: Garage (crates.io, built by
//! `make deps` into ~/.cache/ickpt, see scripts/deps.sh), started on 127.0.0.1 in single-node
//! mode with a bucket and a key, killed with the test process (PR_SET_PDEATHSIG). Its binary is
//! `ICKPT_GARAGE`, or the one `make deps` built. Missing, the tests fail, unless
//! `ICKPT_ALLOW_NO_S3=1` (a developer machine without it): then they say so and pass.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BUCKET: &str = "ickpt-test";
// Garage's formats: "GK" and 24 hex digits, and 64 hex digits.
const KEY_ID: &str = "GK0123456789abcdef01234567";
const SECRET: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

pub struct Garage {
    dir: PathBuf,
    pub s3: SocketAddr,
    child: Option<Child>,
}

/// The garage binary, or None when the tests may go without it (`ICKPT_ALLOW_NO_S3=1`).
pub fn binary() -> Option<PathBuf> {
    let path = std::env::var_os("ICKPT_GARAGE")
        .map(PathBuf::from)
        .or_else(|| {
            let home = std::env::var_os("HOME")?;
            // The version make deps builds, written once for it and the tests.
            let version = include_str!("../../../../scripts/garage.version").trim();
            Some(Path::new(&home).join(format!(".cache/ickpt/garage-{version}/bin/garage")))
        })
        .filter(|p| p.is_file());
    if path.is_none() {
        assert!(
            std::env::var_os("ICKPT_ALLOW_NO_S3").is_some_and(|v| v == "1"),
            "no garage binary: run 'make deps' (or set ICKPT_GARAGE; ICKPT_ALLOW_NO_S3=1 skips these tests)"
        );
        eprintln!("SKIPPED: no garage binary and ICKPT_ALLOW_NO_S3=1");
    }
    path
}

/// Two distinct free ports: both listeners are held while the second is chosen.
fn free_ports() -> (u16, u16) {
    let bind = || TcpListener::bind("127.0.0.1:0").unwrap();
    let (a, b) = (bind(), bind());
    let port = |l: &TcpListener| l.local_addr().unwrap().port();
    (port(&a), port(&b))
}

impl Garage {
    /// A new server with its data in `dir`, running and answering.
    pub fn start(bin: &Path, dir: &Path) -> Garage {
        std::fs::create_dir_all(dir).unwrap();
        let (rpc, s3) = free_ports();
        let config = format!(
            "metadata_dir = \"{d}/meta\"\ndata_dir = \"{d}/data\"\ndb_engine = \"lmdb\"\n\
             replication_factor = 1\nrpc_bind_addr = \"127.0.0.1:{rpc}\"\n\
             rpc_public_addr = \"127.0.0.1:{rpc}\"\nrpc_secret = \"{SECRET}\"\n\
             [s3_api]\ns3_region = \"garage\"\napi_bind_addr = \"127.0.0.1:{s3}\"\n\
             root_domain = \".s3.garage\"\n",
            d = dir.display()
        );
        std::fs::write(dir.join("garage.toml"), config).unwrap();
        let mut g = Garage {
            dir: dir.to_path_buf(),
            s3: SocketAddr::from(([127, 0, 0, 1], s3)),
            child: None,
        };
        g.run(bin);
        g
    }

    /// Start the server (again, after `kill`) on the same data and port.
    pub fn run(&mut self, bin: &Path) {
        let log = std::fs::File::create(self.dir.join("garage.log")).unwrap();
        let mut cmd = Command::new(bin);
        cmd.arg("-c")
            .arg(self.dir.join("garage.toml"))
            .args(["server", "--single-node", "--default-bucket"])
            .env("GARAGE_DEFAULT_ACCESS_KEY", KEY_ID)
            .env("GARAGE_DEFAULT_SECRET_KEY", SECRET)
            .env("GARAGE_DEFAULT_BUCKET", BUCKET)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        // SAFETY: prctl is async-signal-safe; the closure touches nothing else of the parent.
        unsafe {
            cmd.pre_exec(|| {
                // Dies with the test process, whichever way that ends.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        self.child = Some(cmd.spawn().expect("starting garage"));
        // Answering on the S3 port, bounded; then the bucket exists (made at start-up).
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(self.s3).is_err() {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "garage exited ({status}): {}",
                    std::fs::read_to_string(self.dir.join("garage.log")).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "garage did not answer within 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL the server, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The environment the object-store client reads, for this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", format!("http://{}", self.s3)),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", KEY_ID.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET.into()),
            ("AWS_REGION", "garage".into()),
        ]
    }

    /// Put this server's variables in the process's environment (tests of one binary share
    /// one server).
    pub fn export(&self) {
        for (k, v) in self.env() {
            std::env::set_var(k, v);
        }
    }
}

impl Drop for Garage {
    fn drop(&mut self) {
        self.kill();
    }
}
