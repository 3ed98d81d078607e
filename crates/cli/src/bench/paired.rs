//! Paired measurements: an ickpt operation and its baseline measured back to back in each
//! repetition, which of them goes first alternating, so that neither always meets a colder or
//! warmer device; reported as the ratio of each pair (ickpt / baseline: below 1 is faster
//! than the baseline), its median, minimum and maximum.

use super::util::ms;
use serde_json::{json, Value};
use std::time::Duration;

/// One repetition of a comparison.
pub struct Rep {
    pub ickpt: Duration,
    pub baseline: Duration,
    pub ickpt_first: bool,
}

impl Rep {
    pub fn ratio(&self) -> f64 {
        self.ickpt.as_secs_f64() / self.baseline.as_secs_f64().max(1e-9)
    }
}

/// An ickpt operation against its baseline, over every repetition.
pub struct Comparison {
    /// Short key: `sync_checkpoint`, `restore_cold`, ...
    pub name: &'static str,
    /// What was timed on each side.
    pub ickpt: &'static str,
    pub baseline: &'static str,
    pub dirty_percent: Option<usize>,
    /// Bytes the ickpt side wrote or read (a write or read baseline moves as many).
    pub bytes: u64,
    pub reps: Vec<Rep>,
}

impl Comparison {
    pub fn new(
        name: &'static str,
        ickpt: &'static str,
        baseline: &'static str,
        dirty_percent: Option<usize>,
    ) -> Self {
        Comparison {
            name,
            ickpt,
            baseline,
            dirty_percent,
            bytes: 0,
            reps: Vec::new(),
        }
    }

    /// One pair of `ran`: its step `ickpt` (plus `extra`, time the ickpt side spent outside
    /// the step) against its step `baseline`, in the order they actually ran.
    pub fn push(&mut self, ran: &Ran, ickpt: usize, baseline: usize, extra: Duration) {
        self.reps.push(Rep {
            ickpt: ran.times[ickpt] + extra,
            baseline: ran.times[baseline],
            ickpt_first: ran.before(ickpt, baseline),
        });
    }

    pub fn ratios(&self) -> Vec<f64> {
        self.reps.iter().map(Rep::ratio).collect()
    }

    /// Median, minimum and maximum of the per-repetition ratios.
    pub fn ratio_stats(&self) -> (f64, f64, f64) {
        let r = sorted(self.ratios());
        (median_f(&r), r[0], r[r.len() - 1])
    }

    pub fn ickpt_median(&self) -> f64 {
        median_f(&sorted(self.reps.iter().map(|r| ms(r.ickpt)).collect()))
    }

    pub fn baseline_median(&self) -> f64 {
        median_f(&sorted(self.reps.iter().map(|r| ms(r.baseline)).collect()))
    }

    pub fn to_json(&self) -> Value {
        let (med, min, max) = self.ratio_stats();
        json!({
            "name": self.name, "ickpt": self.ickpt, "baseline": self.baseline,
            "dirty_percent": self.dirty_percent, "bytes": self.bytes,
            "ickpt_ms": self.ickpt_median(), "baseline_ms": self.baseline_median(),
            "median_ratio": med, "min_ratio": min, "max_ratio": max,
            "reps": self.reps.iter().map(|r| json!({
                "ickpt_ms": ms(r.ickpt), "baseline_ms": ms(r.baseline),
                "ratio": r.ratio(), "ickpt_first": r.ickpt_first,
            })).collect::<Vec<_>>(),
        })
    }

    /// One CSV row per repetition, in `CSV_HEADER`'s columns.
    pub fn csv_rows(&self) -> String {
        debug_assert!(
            ![self.name, self.ickpt, self.baseline]
                .iter()
                .any(|s| s.contains(',')),
            "CSV fields are written unquoted"
        );
        let pct = self.dirty_percent.map_or(String::new(), |p| p.to_string());
        self.reps
            .iter()
            .enumerate()
            .map(|(i, r)| {
                format!(
                    "{},{},{},{pct},{},{i},{},{:.3},{:.3},{:.4}\n",
                    self.name,
                    self.ickpt,
                    self.baseline,
                    self.bytes,
                    r.ickpt_first,
                    ms(r.ickpt),
                    ms(r.baseline),
                    r.ratio()
                )
            })
            .collect()
    }
}

pub const CSV_HEADER: &str =
    "comparison,ickpt,baseline,dirty_percent,bytes,rep,ickpt_first,ickpt_ms,baseline_ms,ratio\n";

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// The median of sorted values (the mean of the middle two for an even count).
/// The median of `v`, sorted.
pub(super) fn median_f(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The steps of one repetition: each step's time by step number, and the order they ran in.
pub struct Ran {
    pub times: Vec<Duration>,
    order: Vec<usize>,
}

impl Ran {
    /// Whether step `a` ran before step `b`.
    fn before(&self, a: usize, b: usize) -> bool {
        let at = |s| self.order.iter().position(|&x| x == s);
        at(a) < at(b)
    }
}

/// Run `steps` timed steps of repetition `rep`: step 0 is the ickpt side, the rest baselines.
/// Even repetitions run them in order, odd ones in reverse, so the ickpt side alternates
/// between first and last.
pub fn interleave<E>(
    rep: usize,
    steps: usize,
    mut step: impl FnMut(usize) -> Result<Duration, E>,
) -> Result<Ran, E> {
    let mut times = vec![Duration::ZERO; steps];
    let order: Vec<usize> = if rep % 2 == 0 {
        (0..steps).collect()
    } else {
        (0..steps).rev().collect()
    };
    for &s in &order {
        times[s] = step(s)?;
    }
    Ok(Ran { times, order })
}
