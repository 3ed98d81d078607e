//! `ickpt bench …`: measurements whose figures go into docs/benchmarks.md. Every figure is
//! printed next to a baseline measured in the same run, as a ratio.

mod aickpt;
mod compress;
mod drain;
mod incremental;
mod paired;
mod policy;
mod restart_tiers;
mod restore;
mod tracking;
mod tracking_acck;
mod tracking_raw;
mod util;

use crate::CmdResult;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCmd {
    /// Checkpoint and restore against plain file I/O of the same bytes, as paired ratios over
    /// interleaved repetitions: sync checkpoint and async call for 1/10/50/100% dirty pages of
    /// random data against a write+fsync of the same bytes; restore against a plain read and
    /// full+9 increments against one full, warm and cold page cache; first-write tracking cost.
    Incremental(incremental::Args),
    /// The AI-Ckpt paper's memory benchmark (its §4.3): added run time and access types of
    /// sync, async + address order and async + adaptive order, ascending/random/descending
    /// page order; optionally the copy-on-write buffer swept (figure 4).
    Aickpt(aickpt::Args),
    /// Warm-cache restore of one full version and of full + 9 increments against a plain
    /// sequential read of the full version's file.
    Restore(restore::Args),
    /// First-write cost of each tracking backend against unprotected writes and the bare
    /// kernel mechanism; ACCK coarse-grained monitoring against page granularity.
    Tracking(tracking::Args),
    /// The cost policy against the fixed 1 full : 9 increments on a workload whose dirty
    /// fraction changes: checkpoint time, bytes, full versions, restore time at the end of
    /// each phase, paired per repetition.
    Policy(policy::Args),
    /// The newest version restored through all tiers, the shared tier alone and (with
    /// --object) the object store alone, cold cache, against a plain read.
    RestartTiers(restart_tiers::Args),
    /// zstd's ratio and speed per level on the heat grid and random bytes, through the
    /// commit's own encoder, and a sync full checkpoint with each setting against off.
    Compress(compress::Args),
    /// A full version and 9 increments drained by ickpt to a shared directory (and with
    /// --object to S3) against a plain copy and a plain multipart upload of the same files.
    Drain(drain::Args),
}

impl BenchCmd {
    pub fn set_json(&mut self, json: bool) {
        match self {
            BenchCmd::Incremental(a) => a.json = json,
            BenchCmd::Aickpt(a) => a.json = json,
            BenchCmd::Restore(a) => a.json = json,
            BenchCmd::Tracking(a) => a.json = json,
            BenchCmd::Policy(a) => a.run.json = json,
            BenchCmd::RestartTiers(a) => a.run.json = json,
            BenchCmd::Compress(a) => a.run.json = json,
            BenchCmd::Drain(a) => a.run.json = json,
        }
    }
}

pub fn run(cmd: BenchCmd) -> CmdResult {
    match cmd {
        BenchCmd::Incremental(a) => incremental::run(&a),
        BenchCmd::Aickpt(a) => aickpt::run(&a),
        BenchCmd::Restore(a) => restore::run(&a),
        BenchCmd::Tracking(a) => tracking::run(&a),
        BenchCmd::Policy(a) => policy::run(&a),
        BenchCmd::RestartTiers(a) => restart_tiers::run(&a),
        BenchCmd::Compress(a) => compress::run(&a),
        BenchCmd::Drain(a) => drain::run(&a),
    }
}
