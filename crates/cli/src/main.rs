//! `ickpt`: inspect, verify, restore and benchmark checkpoint stores.

mod bench;
mod checkpoint_cmd;
mod human;
mod inspect;
mod job;
mod ls;
mod maintain;
mod merge;
mod object_drain;
mod pid_file;
mod pid_namespace;
mod probe;
mod progress;
mod restart;
mod restore;
mod run_cmd;
mod sections;
mod verify;

use clap::{Parser, Subcommand};
use ickpt::read::catalog::Catalog;
use ickpt::store::Store;
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
    /// Machine-readable JSON on stdout instead of tables, errors included (before or after
    /// the command: `ickpt --json ls` and `ickpt ls --json` are the same).
    #[arg(long, global = true)]
    json: bool,
}

#[derive(clap::Args, Clone)]
struct StoreArgs {
    /// The checkpoint store directory.
    #[arg(long, env = "ICKPT_DIR")]
    dir: Option<PathBuf>,
    /// The store's shared tier, where a drain copied its versions: read as one store with
    /// --dir, each file from the first that holds an intact copy (--dir may be gone).
    #[arg(long, env = "ICKPT_SHARED_DIR")]
    shared: Option<PathBuf>,
    /// The store's object-store tier (s3://bucket/prefix; endpoint and credentials from the
    /// AWS variables), read after --dir and --shared.
    #[arg(long, env = "ICKPT_OBJECT_URL")]
    object: Option<String>,
    /// Set from the global `--json`.
    #[arg(skip)]
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
    /// Remove the versions a retention policy lets go, from every tier given (local first),
    /// as the library's own collection does: never one a kept version's restore reads, nor
    /// the newest, nor one the newest global records name; and every tier's orphans
    /// (versions left without a version their chain needs, older than one that restores:
    /// 'ickpt verify' lists them). Refused while an application holds the store. Say what to
    /// keep with one or more --keep-* options, or give --orphans alone.
    Prune {
        #[command(flatten)]
        store: StoreArgs,
        /// Keep the chains of the N newest full versions.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        keep_chains: Option<u32>,
        /// Keep only what a restore of the N newest versions reads.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        keep_versions: Option<u32>,
        /// Keep only what a restore of a version committed within DURATION reads (12h, 7d,
        /// 90min).
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
        keep_within: Option<std::time::Duration>,
        /// Remove the orphans (with no --keep-* option: only them).
        #[arg(long)]
        orphans: bool,
        /// Show what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove versions from every tier given. Refuses a version other versions' restores
    /// read, unless --with-dependents (which removes those too), and one the newest global
    /// records name (an MPI restart point), unless --force.
    Rm {
        #[command(flatten)]
        store: StoreArgs,
        /// Version numbers.
        #[arg(required = true)]
        versions: Vec<u64>,
        /// Also remove every version whose restore reads one of them.
        #[arg(long)]
        with_dependents: bool,
        /// Remove a version an MPI job's restart may need.
        #[arg(long)]
        force: bool,
        /// Show what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// List the section saves in the store (docs/sections.md): section, name, saves,
    /// bytes, changed words, each file checked as a restart reads it (exit 1 if one is
    /// damaged).
    Sections(StoreArgs),
    /// Merge two delta files of the same regions (what program sections saved) into one,
    /// word by word, the second winning where both changed a word (CAPE's merge).
    Merge {
        /// The earlier delta.
        a: std::path::PathBuf,
        /// The later delta.
        b: std::path::PathBuf,
        /// Where the merged delta goes (written whole, then renamed into place).
        #[arg(short, long)]
        out: std::path::PathBuf,
    },
    /// Run an unmodified program so that ickpt checkpoints it as a whole process
    /// (docs/transparent.md): `ickpt run --dir D --interval 30s -- ./solver input.dat`.
    /// Dynamically linked x86-64 programs, Linux 6.7 or later; no privilege needed.
    Run(run_cmd::RunArgs),
    /// Ask the program `ickpt run` started on --dir for a checkpoint now.
    Checkpoint {
        /// The store directory given to `ickpt run`.
        #[arg(long, env = "ICKPT_DIR")]
        dir: PathBuf,
        /// Wait until the version is committed, and print its number.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits (default 60s).
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "60s")]
        timeout: std::time::Duration,
        /// Set from the global `--json`.
        #[arg(skip)]
        json: bool,
    },
    /// Restart a program `ickpt run` checkpointed, from the newest version that restores (or
    /// --version), on any tier given: it goes on where that version was taken, with the
    /// descriptors 0-2 of this command.
    Restart {
        #[command(flatten)]
        store: StoreArgs,
        /// The version to restart from (default: the newest that restores).
        #[arg(long)]
        version: Option<u64>,
        /// Whether the program comes back in a PID namespace of its own, with its process
        /// and thread ids as they were (auto: when the machine allows it).
        #[arg(long, env = "ICKPT_PID_NAMESPACE", value_enum, default_value = "auto")]
        pid_namespace: pid_namespace::Mode,
    },
    /// Benchmarks; results go to stdout (tables, or --json).
    #[command(subcommand)]
    Bench(bench::BenchCmd),
    /// What this kernel offers for write tracking (userfaultfd write-protect, its async
    /// mode, PAGEMAP_SCAN), as ickpt probes it.
    Probe {
        /// Print only the names of the available backends, one per line (for scripts).
        #[arg(long)]
        list: bool,
    },
}

fn main() -> ExitCode {
    // `ickpt ls --json | head` must end quietly rather than panic in println! when the
    // reader goes away.
    ickpt::sys::signal::default_sigpipe();
    let mut cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Scripts that asked for JSON read stdout, whatever went wrong: a misspelt command
        // or option too. Help and --version are answers, not errors.
        Err(e) if e.use_stderr() && json_asked() => {
            let text = e.render().to_string();
            println!(
                "{}",
                serde_json::json!({ "error": text.trim_end(), "usage": true })
            );
            return ExitCode::from(2);
        }
        Err(e) => e.exit(),
    };
    let json = cli.json;
    cli.cmd.set_json(json);
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
        Cmd::Prune {
            store,
            keep_chains,
            keep_versions,
            keep_within,
            orphans,
            dry_run,
        } => maintain::prune(
            &store,
            keep_chains,
            keep_versions,
            keep_within,
            orphans,
            dry_run,
        ),
        Cmd::Rm {
            store,
            versions,
            with_dependents,
            force,
            dry_run,
        } => maintain::rm(
            &store,
            &versions,
            ickpt::maintain::RmOptions {
                with_dependents,
                force,
            },
            dry_run,
        ),
        Cmd::Bench(b) => bench::run(b),
        Cmd::Merge { a, b, out } => merge::run(&a, &b, &out, json),
        Cmd::Sections(s) => sections::run(&s),
        Cmd::Probe { list } => probe::run(json, list),
        Cmd::Run(args) => run_cmd::run(&args),
        Cmd::Checkpoint {
            dir,
            wait,
            timeout,
            json,
        } => checkpoint_cmd::run(&dir, wait, timeout, json),
        Cmd::Restart {
            store,
            version,
            pid_namespace,
        } => restart::run(&store, version, pid_namespace),
    };
    match r {
        Ok(code) => code,
        Err(e) if json => {
            // Scripts read stdout: the error is a JSON object there, like every other answer.
            println!("{}", serde_json::json!({ "error": e.to_string() }));
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("ickpt: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Whether `--json` is anywhere on the command line (before `--`), for errors found before
/// the line could be parsed.
fn json_asked() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

impl Cmd {
    /// Hand the global `--json` to the command's own arguments.
    fn set_json(&mut self, json: bool) {
        match self {
            Cmd::Ls(s) | Cmd::Verify(s) | Cmd::Sections(s) => s.json = json,
            Cmd::Inspect { store, .. }
            | Cmd::Restore { store, .. }
            | Cmd::Prune { store, .. }
            | Cmd::Rm { store, .. }
            | Cmd::Restart { store, .. } => store.json = json,
            Cmd::Checkpoint { json: j, .. } => *j = json,
            Cmd::Probe { .. } | Cmd::Merge { .. } | Cmd::Run(_) => {}
            Cmd::Bench(b) => b.set_json(json),
        }
    }
}

type CmdResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// The command was used in a way it cannot serve; the message says what to give instead.
#[derive(Debug)]
struct UsageError(&'static str);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for UsageError {}

impl StoreArgs {
    /// The store directory: `--dir`, else `ICKPT_DIR` (clap reads both).
    fn dir(&self) -> Result<&std::path::Path, UsageError> {
        self.dir.as_deref().ok_or(UsageError(
            "no store directory: give --dir DIR, or set ICKPT_DIR as the application does",
        ))
    }
}

/// The store, or with `--shared` its tiers seen as one (`ickpt::store::TieredStore`): the
/// local directory first, when it is there.
fn open_store(s: &StoreArgs) -> Result<Box<dyn Store>, Box<dyn std::error::Error>> {
    if s.shared.is_none() && s.object.is_none() {
        return Ok(Box::new(ickpt::store::DirStore::open_read(s.dir()?)?));
    }
    Ok(Box::new(ickpt::store::TieredStore::new(open_tiers(
        s, false,
    )?)))
}

/// The store a reading command reads: its tiers as one (a copy found damaged is read again
/// from another tier's, as the library's restore does), or the directory alone.
pub(crate) struct ReadStore {
    pub tiered: Option<ickpt::store::TieredStore>,
    dir: Option<ickpt::store::DirStore>,
}

impl ReadStore {
    pub fn open(s: &StoreArgs) -> Result<ReadStore, Box<dyn std::error::Error>> {
        if s.shared.is_some() || s.object.is_some() {
            return Ok(ReadStore {
                tiered: Some(ickpt::store::TieredStore::new(open_tiers(s, false)?)),
                dir: None,
            });
        }
        Ok(ReadStore {
            tiered: None,
            dir: Some(ickpt::store::DirStore::open_read(s.dir()?)?),
        })
    }

    pub fn store(&self) -> &dyn Store {
        match (&self.tiered, &self.dir) {
            (Some(t), _) => t,
            (None, Some(d)) => d,
            (None, None) => unreachable!("one of the two is always open"),
        }
    }
}

/// Each tier given, fastest first; the local directory left out when it is not there
/// (another node). With `change`, the directories are opened as their writer would, taking
/// the lock an application holds while it runs, so that nothing is removed under it.
fn open_tiers(
    s: &StoreArgs,
    change: bool,
) -> Result<Vec<ickpt::store::Tier>, Box<dyn std::error::Error>> {
    use ickpt::store::{DirStore, OpenError, Tier};
    let open = |d: &std::path::Path| -> Result<DirStore, OpenError> {
        // A store already, whatever happens next: a maintenance command never makes one.
        let read = DirStore::open_read(d)?;
        if !change {
            return Ok(read);
        }
        DirStore::open_write(d).map_err(|e| match e {
            OpenError::Locked { dir } => OpenError::InUse { dir },
            e => e,
        })
    };
    let mut tiers = Vec::new();
    match open(s.dir()?) {
        Ok(l) => tiers.push(Tier {
            name: "local",
            store: std::sync::Arc::new(l),
        }),
        // Another node: the job's local directory is not here.
        Err(OpenError::Missing { .. } | OpenError::NoSuchDir { .. })
            if s.shared.is_some() || s.object.is_some() => {}
        Err(e) => return Err(e.into()),
    }
    if let Some(shared) = &s.shared {
        tiers.push(Tier {
            name: "shared",
            store: std::sync::Arc::new(open(shared)?),
        });
    }
    if let Some(url) = &s.object {
        tiers.push(Tier {
            name: "object",
            store: std::sync::Arc::new(ickpt::store::ObjectTier::open(url)?),
        });
    }
    Ok(tiers)
}

/// The version files each tier holds, fastest tier first, and whether each copy's own
/// metadata passes (`looks_whole`, what a restore through the tiers checks to choose a copy).
struct TierCopies(Vec<(&'static str, std::collections::HashMap<u64, bool>)>);

impl TierCopies {
    /// The tiers holding version `v`, fastest first, each with whether its copy looks whole.
    fn holding(&self, v: u64) -> impl Iterator<Item = (&'static str, bool)> + '_ {
        self.0
            .iter()
            .filter_map(move |(tier, copies)| copies.get(&v).map(|&whole| (*tier, whole)))
    }
}

/// What each tier holds; a tier that cannot be listed is an error naming it (a TIERS column
/// that hid it would say a version is on fewer tiers than it is).
fn tier_copies(tiers: &[ickpt::store::Tier]) -> Result<TierCopies, Box<dyn std::error::Error>> {
    let mut out = Vec::new();
    for t in tiers {
        let names = t
            .store
            .list()
            .map_err(|e| format!("listing the {} tier {}: {e}", t.name, t.store.describe("")))?;
        let copies = names
            .iter()
            .filter_map(|n| {
                let v = ickpt::store::parse_version_name(n)?;
                let whole = t
                    .store
                    .open(n)
                    .is_ok_and(|f| ickpt::store::looks_whole(n, &*f));
                Some((v, whole))
            })
            .collect();
        out.push((t.name, copies));
    }
    Ok(TierCopies(out))
}

/// The version named, or the newest one a restore accepts; versions passed over on the way
/// are reported on stderr (a stray or damaged newest file must not hide the intact ones).
fn pick_version(catalog: &Catalog<'_>, v: Option<u64>) -> Result<u64, ickpt::ReadError> {
    if let Some(v) = v {
        return Ok(v);
    }
    let versions = catalog.versions()?;
    for &v in versions.iter().rev() {
        match catalog.chain(v) {
            Ok(_) => return Ok(v),
            Err(e) => eprintln!("ickpt: passing over version {v}: {e}"),
        }
    }
    let dir = catalog.store().describe("");
    Err(if versions.is_empty() {
        ickpt::ReadError::NoCheckpoint { dir }
    } else {
        ickpt::ReadError::NoRestorable {
            dir,
            tried: versions.len(),
            newest: "see above".into(),
        }
    })
}

/// This version's AFTER count: recorded by the version its engine committed next (always
/// the next number), if that one says it followed this one (format 3 on).
fn after_of(catalog: &Catalog<'_>, v: u64) -> Option<u64> {
    let next = catalog.open(v + 1).ok()?.meta.stats?;
    (next.previous_version == v).then_some(next.after_previous)
}
