//! Pre-copy decisions (PRWIP): which dirty pages to write out before the
//! checkpoint that will store them, from how long each page went between rewrites before.
//!
//! A page written now is worth pre-copying when its next write is predicted to come after
//! the next checkpoint: copied early and not written again, the checkpoint has nothing left
//! to do for it. Written again after all (a *conflict*), it is stored twice. The paper keeps
//! a rewrite interval per page and per execution context (a function's loop rewrites its
//! pages at its own pace), starts it at the maximum (pre-copy everything, learn from the
//! conflicts), and changes it only on a conflict (the paper says it is only decreased: a
//! conflict's sample is shorter than the time to the checkpoint it was predicted to miss;
//! averaged in, a sample longer than what was learnt, from a checkpoint later than expected,
//! raises it); PRWIP-opt raises it after two conflict-free rounds, since an interval learnt
//! short stays short otherwise. The paper
//! does not say by how much: we double it.
//!
//! Times are milliseconds on a clock of the caller's (`u32`, compared with wrapping
//! arithmetic: right for intervals under 49 days). A page's history is 16 bytes
//! ([`PageHistory`]), allocated only when pre-copy is on.

mod cadence;
mod strategy;

pub use cadence::Cadence;
pub use strategy::{Context, Strategy};

/// An interval not learnt yet: longer than any checkpoint interval, so the page is
/// pre-copied (the paper's optimistic start).
pub const UNKNOWN: u32 = u32::MAX;

/// Contexts a page remembers intervals for; a page written from a third context forgets
/// the one used least recently. Two cover a page one loop writes and another reads back
/// into (the ADI sweeps' pattern) within 16 bytes.
pub const CONTEXTS: usize = 2;

/// Conflict-free rounds after which PRWIP-opt raises an interval (the paper's threshold).
pub const OPT_ROUNDS: u8 = 2;

/// What the predictor remembers of one page: 16 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct PageHistory {
    /// When the page was last seen written; [`NEVER`] before.
    last: u32,
    /// The rewrite interval per context slot, in ms; [`UNKNOWN`] until a conflict.
    interval: [u32; CONTEXTS],
    /// The context of each slot: a context id's tag, 0 for an empty slot. Slot 0 is the
    /// most recently used.
    ctx: [u8; CONTEXTS],
    /// Rounds in a row the page was pre-copied and not written again before the checkpoint.
    clean: u8,
    _pad: u8,
}

/// `last` of a page never seen written.
const NEVER: u32 = u32::MAX;

impl Default for PageHistory {
    fn default() -> Self {
        PageHistory {
            last: NEVER,
            interval: [UNKNOWN; CONTEXTS],
            ctx: [0; CONTEXTS],
            clean: 0,
            _pad: 0,
        }
    }
}

/// The 1-byte tag a context id is remembered by (never 0, which marks an empty slot). Two
/// contexts may share a tag; they then share an interval, which costs precision, not
/// correctness.
fn tag(context: u64) -> u8 {
    // Fibonacci hashing: the top byte of the product mixes every bit of the id.
    let h = (context.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8;
    h.max(1)
}

impl PageHistory {
    /// The slot remembering `context`, made (the least recently used one replaced) if none
    /// does, and moved to the front.
    fn slot(&mut self, context: u64) -> usize {
        let t = tag(context);
        let i = self
            .ctx
            .iter()
            .position(|&c| c == t)
            .unwrap_or(CONTEXTS - 1);
        if self.ctx[i] != t {
            self.ctx[i] = t;
            self.interval[i] = UNKNOWN;
        }
        // Most recent first: the next newcomer replaces the other one.
        self.ctx[..=i].rotate_right(1);
        self.interval[..=i].rotate_right(1);
        0
    }

    /// The interval learnt for `context`; [`UNKNOWN`] if none.
    pub fn interval(&self, context: u64) -> u32 {
        let t = tag(context);
        self.ctx
            .iter()
            .position(|&c| c == t)
            .map_or(UNKNOWN, |i| self.interval[i])
    }

    /// The interval to predict `context`'s next write by: its own once learnt; until then
    /// the shortest any other context of the page learnt, and [`UNKNOWN`] (pre-copy) only
    /// for a page nothing was learnt of. A page one function rewrites quickly is likely
    /// rewritten quickly from the next phase too; and with two slots, a third writer evicts
    /// one, which would otherwise come back optimistic and conflict again (measured on BT
    /// with the writing function as the context: docs/benchmarks.md, "Pre-copy").
    pub fn predicted(&self, context: u64) -> u32 {
        match self.interval(context) {
            UNKNOWN => self.interval.iter().copied().min().unwrap_or(UNKNOWN),
            i => i,
        }
    }

    /// When the page was last seen written, if ever.
    pub fn last_write(&self) -> Option<u32> {
        (self.last != NEVER).then_some(self.last)
    }

    /// Rounds in a row the page's pre-copy held.
    pub fn clean_rounds(&self) -> u8 {
        self.clean
    }
}

/// The predictor's say over one page at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Predictor {
    pub strategy: Strategy,
}

impl Predictor {
    pub fn new(strategy: Strategy) -> Self {
        Predictor { strategy }
    }

    /// The page was seen written at `now` from `context`; `conflict`: it had been pre-copied
    /// since the last checkpoint. A conflict teaches the interval (the time since the write
    /// before, averaged into what was known); a plain write only records its time, so
    /// no plain write ever raises an interval.
    pub fn written(&self, h: &mut PageHistory, now: u32, context: u64, conflict: bool) {
        let s = h.slot(context);
        if conflict {
            h.clean = 0;
            if let Some(last) = h.last_write() {
                let sample = now.wrapping_sub(last).min(UNKNOWN - 1);
                h.interval[s] = match h.interval[s] {
                    UNKNOWN => sample,
                    i => ((u64::from(i) + u64::from(sample)) / 2) as u32,
                };
            }
        }
        h.last = now;
    }

    /// Whether a page seen written at `now` from `context` should be written out now, the
    /// next checkpoint expected `until_checkpoint` ms from now: its next write, predicted at
    /// its last write plus its interval, comes later.
    pub fn precopy(&self, h: &PageHistory, now: u32, context: u64, until_checkpoint: u32) -> bool {
        match self.strategy {
            Strategy::Off => false,
            Strategy::Blind => true,
            Strategy::Prwip | Strategy::PrwipOpt => {
                let interval = h.predicted(context);
                if interval == UNKNOWN {
                    return true;
                }
                let since = h.last_write().map_or(0, |l| now.wrapping_sub(l));
                u64::from(interval) > u64::from(since) + u64::from(until_checkpoint)
            }
        }
    }

    /// The checkpoint stored the page's pre-copy as it was: no conflict this round. PRWIP-opt
    /// doubles every learnt interval of a page from its [`OPT_ROUNDS`]th such round on.
    pub fn held(&self, h: &mut PageHistory) {
        h.clean = h.clean.saturating_add(1);
        if self.strategy == Strategy::PrwipOpt && h.clean >= OPT_ROUNDS {
            for i in h.interval.iter_mut().filter(|i| **i != UNKNOWN) {
                *i = i.saturating_mul(2).min(UNKNOWN - 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prwip() -> Predictor {
        Predictor::new(Strategy::Prwip)
    }

    #[test]
    fn history_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<PageHistory>(), 16);
    }

    #[test]
    fn strategies_round_trip_through_names_and_codes() {
        for s in [
            Strategy::Off,
            Strategy::Blind,
            Strategy::Prwip,
            Strategy::PrwipOpt,
        ] {
            assert_eq!(Strategy::parse(s.as_str()), Some(s));
            assert_eq!(Strategy::from_code(s.code()), Some(s));
        }
        assert_eq!(Strategy::parse("PRWIP"), None);
        assert_eq!(Strategy::from_code(4), None);
    }

    #[test]
    fn an_unknown_page_is_precopied_optimistically() {
        let h = PageHistory::default();
        assert!(prwip().precopy(&h, 0, 1, 10_000));
        assert!(Predictor::new(Strategy::Blind).precopy(&h, 0, 1, 10_000));
        assert!(!Predictor::new(Strategy::Off).precopy(&h, 0, 1, 10_000));
    }

    #[test]
    fn a_conflict_lowers_the_interval_to_what_was_seen_then_averages() {
        let p = prwip();
        let mut h = PageHistory::default();
        p.written(&mut h, 1000, 7, false);
        assert_eq!(h.interval(7), UNKNOWN, "a plain write teaches nothing");
        p.written(&mut h, 1300, 7, true);
        assert_eq!(h.interval(7), 300);
        p.written(&mut h, 1400, 7, true);
        assert_eq!(h.interval(7), 200, "(300 + 100) / 2");
        assert_eq!(h.clean_rounds(), 0);
    }

    #[test]
    fn a_page_rewritten_before_the_checkpoint_waits() {
        let p = prwip();
        let mut h = PageHistory::default();
        p.written(&mut h, 0, 1, false);
        p.written(&mut h, 100, 1, true); // interval 100 ms
                                         // Written at 100, next write expected at 200: a checkpoint 50 ms away comes first.
        assert!(p.precopy(&h, 100, 1, 50));
        // One 500 ms away does not: the page would be written again before it.
        assert!(!p.precopy(&h, 100, 1, 500));
        // Seen 60 ms after its last write with 50 ms left: next write at 200 < 210.
        assert!(!p.precopy(&h, 160, 1, 50));
    }

    #[test]
    fn intervals_are_kept_per_context() {
        let p = prwip();
        let mut h = PageHistory::default();
        p.written(&mut h, 0, 1, false);
        p.written(&mut h, 10, 1, true);
        assert_eq!(h.interval(1), 10);
        assert_eq!(h.interval(2), UNKNOWN);
        p.written(&mut h, 5000, 2, true);
        assert_eq!(h.interval(2), 4990);
        assert_eq!(h.interval(1), 10, "two contexts fit");
        // A third replaces the least recently used (context 1).
        p.written(&mut h, 6000, 3, false);
        assert_eq!(h.interval(1), UNKNOWN);
        assert_eq!(h.interval(2), 4990);
    }

    #[test]
    fn a_context_new_to_a_page_predicts_by_what_the_others_learnt() {
        let p = prwip();
        let mut h = PageHistory::default();
        assert!(p.precopy(&h, 0, 1, 1000), "nothing learnt: optimistic");
        p.written(&mut h, 0, 1, false);
        p.written(&mut h, 10, 1, true);
        // Context 2 has learnt nothing; context 1 saw the page rewritten within 10 ms.
        assert_eq!((h.interval(2), h.predicted(2)), (UNKNOWN, 10));
        p.written(&mut h, 20, 2, false);
        assert!(
            !p.precopy(&h, 20, 2, 1000),
            "not optimistic once the page conflicted"
        );
        // Its own first sample is its interval, not averaged with the borrowed one.
        p.written(&mut h, 4020, 2, true);
        assert_eq!((h.interval(2), h.predicted(2)), (4000, 4000));
        assert!(p.precopy(&h, 4020, 2, 1000));
        // A third context evicts context 1 and predicts by the shortest left (context 2's).
        p.written(&mut h, 5000, 3, false);
        assert_eq!((h.interval(1), h.predicted(3)), (UNKNOWN, 4000));
    }

    #[test]
    fn only_prwip_opt_raises_after_two_clean_rounds() {
        for (strategy, after) in [(Strategy::Prwip, 100), (Strategy::PrwipOpt, 200)] {
            let p = Predictor::new(strategy);
            let mut h = PageHistory::default();
            p.written(&mut h, 0, 1, false);
            p.written(&mut h, 100, 1, true);
            p.held(&mut h);
            assert_eq!(h.interval(1), 100, "{strategy:?}: one round is not enough");
            p.held(&mut h);
            assert_eq!(h.interval(1), after, "{strategy:?}");
        }
        // A conflict starts the count again.
        let p = Predictor::new(Strategy::PrwipOpt);
        let mut h = PageHistory::default();
        p.written(&mut h, 0, 1, false);
        p.written(&mut h, 100, 1, true);
        p.held(&mut h);
        p.written(&mut h, 150, 1, true);
        assert_eq!(h.interval(1), 75);
        p.held(&mut h);
        assert_eq!(h.interval(1), 75);
    }

    #[test]
    fn intervals_never_reach_unknown_by_growing() {
        let p = Predictor::new(Strategy::PrwipOpt);
        let mut h = PageHistory::default();
        p.written(&mut h, 0, 1, false);
        p.written(&mut h, u32::MAX - 5, 1, true);
        for _ in 0..40 {
            p.held(&mut h);
        }
        assert_eq!(h.interval(1), UNKNOWN - 1);
    }

    #[test]
    fn clock_wrap_keeps_intervals_right() {
        let p = prwip();
        let mut h = PageHistory::default();
        p.written(&mut h, u32::MAX - 10, 1, false);
        p.written(&mut h, 20, 1, true);
        assert_eq!(h.interval(1), 31);
    }
}
