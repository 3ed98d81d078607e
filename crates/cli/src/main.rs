//! `ickpt`: inspect, verify, restore and benchmark checkpoint stores.

mod bench;
mod human;
mod inspect;
mod ls;
mod probe;
mod progress;
mod restore;
mod verify;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ickpt",
    version,
    about = "Inspect, verify, restore and benchmark ickpt checkpoints"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
struct StoreArgs {
    /// The checkpoint store directory.
    #[arg(long, env = "ICKPT_DIR")]
    dir: PathBuf,
    /// Machine-readable JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// List committed versions: kind, parent, pages, bytes, creation time.
    Ls(StoreArgs),
    /// Show one version: header, regions, runs and its chain.
    Inspect {
        #[command(flatten)]
        store: StoreArgs,
        /// Version number (default: the newest).
        version: Option<u64>,
    },
    /// Check every version's checksums and that every chain reaches a full version.
    /// Exits 1 if anything is wrong.
    Verify(StoreArgs),
    /// Write one region of a version to a file (by reverse scan of its chain).
    Restore {
        #[command(flatten)]
        store: StoreArgs,
        /// Version to restore (default: the newest).
        #[arg(long)]
        version: Option<u64>,
        /// Region id.
        #[arg(long)]
        region: u64,
        /// Output file (created or truncated).
        #[arg(long)]
        out: PathBuf,
    },
    /// Benchmarks; results go to stdout (tables, or --json).
    #[command(subcommand)]
    Bench(bench::BenchCmd),
    /// What this kernel offers for write tracking (userfaultfd write-protect, its async
    /// mode, PAGEMAP_SCAN), as ickpt probes it.
    Probe {
        #[arg(long)]
        json: bool,
        /// Print only the names of the available backends, one per line (for scripts).
        #[arg(long, conflicts_with = "json")]
        list: bool,
    },
}

fn main() -> ExitCode {
    // `ickpt ls --json | head` must end quietly, as other Unix tools do, rather than panic
    // in println! when the reader goes away: restore the default SIGPIPE action that the
    // Rust runtime replaced with "ignore".
    // SAFETY: setting a signal's disposition to SIG_DFL has no memory-safety preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Ls(s) => ls::run(&s),
        Cmd::Inspect { store, version } => inspect::run(&store, version),
        Cmd::Verify(s) => verify::run(&s),
        Cmd::Restore {
            store,
            version,
            region,
            out,
        } => restore::run(&store, version, region, &out),
        Cmd::Bench(b) => bench::run(b),
        Cmd::Probe { json, list } => probe::run(json, list),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ickpt: error: {e}");
            ExitCode::FAILURE
        }
    }
}

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

fn open_store(s: &StoreArgs) -> Result<ickpt::store::DirStore, ickpt::Error> {
    Ok(ickpt::store::DirStore::open_read(&s.dir)?)
}

/// The version named, or the newest in the store.
fn pick_version(store: &dyn ickpt::store::Store, v: Option<u64>) -> Result<u64, ickpt::Error> {
    match v {
        Some(v) => Ok(v),
        None => ickpt::catalog::versions(store)?
            .last()
            .copied()
            .ok_or_else(|| ickpt::Error::NoCheckpoint {
                dir: store.describe(""),
            }),
    }
}
