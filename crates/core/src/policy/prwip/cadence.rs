//! When the next checkpoint is expected: the configured interval, or the program's own
//! cadence once it calls less often.

use super::UNKNOWN;
use std::time::Duration;

/// When the next checkpoint is expected: a configured interval, or one learnt from the
/// gaps between the last checkpoint calls.
#[derive(Debug, Clone, Default)]
pub struct Cadence {
    configured: Option<Duration>,
    /// The last gaps between checkpoint calls, newest last.
    gaps: [u32; GAPS],
    known: usize,
}

/// Gaps the learnt cadence averages.
const GAPS: usize = 4;

impl Cadence {
    /// `configured`: the application's checkpoint interval, if it gave one.
    pub fn new(configured: Option<Duration>) -> Self {
        Cadence {
            configured: configured.filter(|d| !d.is_zero()),
            ..Default::default()
        }
    }

    /// A checkpoint was called `gap` ms after the one before.
    pub fn called(&mut self, gap: u32) {
        self.gaps.rotate_left(1);
        self.gaps[GAPS - 1] = gap;
        self.known = (self.known + 1).min(GAPS);
    }

    /// The expected time from one checkpoint call to the next, in ms: the larger of the
    /// configured interval and the mean of the last gaps seen; either alone when only it is
    /// known; None with neither (no pre-copy then: the first epoch only learns the cadence).
    ///
    /// The configured interval is a floor, not the answer: a program told "every 5 s"
    /// calls once 5 s have passed since the last call *returned*, at its next step
    /// boundary, so later than 5 s after the call began, by the checkpoint's duration and
    /// up to a step. Expecting the call too early copies pages the real last step writes
    /// again. Gaps shorter than the interval (an extra call) do not lower it.
    pub fn interval_ms(&self) -> Option<u32> {
        let configured = self.configured.map(|d| d.as_millis());
        let seen = (self.known > 0).then(|| {
            let seen = &self.gaps[GAPS - self.known..];
            u128::from(seen.iter().map(|&g| u64::from(g)).sum::<u64>() / seen.len() as u64)
        });
        let ms = match (configured, seen) {
            (Some(c), Some(s)) => c.max(s),
            (c, s) => c.or(s)?,
        };
        Some(ms.min(u128::from(UNKNOWN - 1)) as u32)
    }

    /// Time left at `elapsed` ms since the last checkpoint; 0 when it is overdue.
    pub fn until_next(&self, elapsed: u32) -> Option<u32> {
        self.interval_ms().map(|i| i.saturating_sub(elapsed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cadence_is_the_mean_of_the_last_four_gaps_never_below_the_configured_interval() {
        let mut c = Cadence::new(Some(Duration::from_secs(5)));
        assert_eq!(c.interval_ms(), Some(5000));
        assert_eq!(c.until_next(1200), Some(3800));
        assert_eq!(c.until_next(9000), Some(0));
        c.called(6000);
        c.called(7000);
        assert_eq!(
            c.interval_ms(),
            Some(6500),
            "calls seen 6 and 7 s apart beat the configured 5 s"
        );
        assert_eq!(c.until_next(1200), Some(5300));
        for g in [10, 20, 30, 40] {
            c.called(g);
        }
        assert_eq!(
            c.interval_ms(),
            Some(5000),
            "extra calls do not lower the configured floor"
        );
        let mut c = Cadence::new(None);
        assert_eq!(c.interval_ms(), None);
        c.called(1000);
        assert_eq!(c.interval_ms(), Some(1000));
        for g in [2000, 3000, 4000, 5000] {
            c.called(g);
        }
        assert_eq!(
            c.interval_ms(),
            Some(3500),
            "the first gap has left the window"
        );
        assert_eq!(Cadence::new(Some(Duration::ZERO)).interval_ms(), None);
    }
}
