//! `ICKPT_RUN_STATS=FILE`: one JSON line per checkpoint, appended, for benchmarks and for
//! users who want to see what a checkpoint costs the program. The file is opened at start,
//! so it is one of the program's descriptors and comes back with it after a restart.

use std::io::Write;
use std::time::Duration;

/// What a committed checkpoint reports.
pub struct Done {
    pub info: ickpt::CheckpointInfo,
    /// Stopping nothing more: reading the layout, tracking new mappings, the snapshot of
    /// ickpt's own state and the process record.
    pub captured: Duration,
    /// Bytes of ickpt's own state copied.
    pub snapshot: u64,
}

pub struct StatsFile(Option<std::fs::File>);

impl StatsFile {
    pub fn open() -> Result<StatsFile, String> {
        let Some(path) = std::env::var_os("ICKPT_RUN_STATS") else {
            return Ok(StatsFile(None));
        };
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .map(|f| StatsFile(Some(f)))
            .map_err(|e| format!("opening ICKPT_RUN_STATS={}: {e}", path.to_string_lossy()))
    }

    /// `parked`: until every thread was stopped; `stopped`: until they were released;
    /// `precopy`: the pages copied before the stop, and how long that took.
    pub fn record(
        &mut self,
        d: &Done,
        parked: Duration,
        stopped: Duration,
        precopy: (u64, Duration),
    ) {
        let Some(f) = &mut self.0 else {
            return;
        };
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let line = format!(
            "{{\"version\":{},\"kind\":\"{}\",\"pages\":{},\"bytes\":{},\"snapshot_bytes\":{},\"stop_ms\":{:.3},\"park_ms\":{:.3},\"capture_ms\":{:.3},\"commit_ms\":{:.3},\"precopy_pages\":{},\"precopy_ms\":{:.3}}}\n",
            d.info.version,
            d.info.kind.as_str(),
            d.info.pages,
            d.info.bytes,
            d.snapshot,
            ms(stopped),
            ms(parked),
            ms(d.captured),
            ms(d.info.duration),
            precopy.0,
            ms(precopy.1),
        );
        let _ = f.write_all(line.as_bytes());
    }
}
