//! The restart bound: a chain ends before a restart from it would read more than `bound`
//! times its full version.
//!
//! A restart reads each page once, from the newest version that stored it, but each file
//! front to back: a page a newer version rewrote is read past, not skipped, unless a long
//! stretch of them lies together. When the pages written each step are spread over memory,
//! a restart from a full version and n increments reads all n + 1 files, and its time
//! follows their bytes. The fixed ratio and the cost policy weigh a chain by what it saves
//! the checkpoints; this rule caps what it costs a restart, whichever of them chose.

use ickpt_format::Kind;

/// What a bound may be, as settings and their errors say it.
pub const BOUND_EXPECTED: &str = "0 (no bound) or a number 1 or above, e.g. 1.5";

/// Whether `bound` is one: 0 (none), or a finite number from 1 on.
pub fn valid_bound(bound: f64) -> bool {
    bound == 0.0 || bound >= 1.0 && bound.is_finite()
}

/// The bytes of the chain the next checkpoint would extend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainBytes {
    /// The full version's file.
    pub full: u64,
    /// The increments' files, together.
    pub increments: u64,
}

impl ChainBytes {
    /// A version of `bytes` was committed on top of this chain (or began one).
    pub fn committed(chain: Option<ChainBytes>, kind: Kind, bytes: u64) -> Option<ChainBytes> {
        match kind {
            Kind::Full => Some(ChainBytes {
                full: bytes,
                increments: 0,
            }),
            Kind::Incremental => chain.map(|c| ChainBytes {
                increments: c.increments.saturating_add(bytes),
                ..c
            }),
        }
    }

    /// The chain of file lengths `lengths`, newest first, as a catalog returns a chain: the
    /// last is its full version.
    pub fn of_files(lengths: impl DoubleEndedIterator<Item = u64>) -> Option<ChainBytes> {
        let mut rev = lengths.rev();
        let full = rev.next()?;
        Some(ChainBytes {
            full,
            increments: rev.fold(0u64, |a, b| a.saturating_add(b)),
        })
    }

    /// Whether an increment of `next` bytes keeps a restart within `bound` times the full
    /// version's bytes.
    pub fn admits(&self, next: u64, bound: f64) -> bool {
        let read = self.full as f64 + self.increments as f64 + next as f64;
        read <= bound * self.full as f64
    }
}

/// Whether the next checkpoint, which `chosen` would make, is full instead because of the
/// bound. `bound` 0: no bound. `most`: the largest the increment can be (every page
/// tracked); `next`: its bytes, as far as they are known before the pages are collected,
/// asked only when `most` would pass the bound, as it may cost a scan.
pub fn bounded_kind(
    chosen: Kind,
    chain: Option<ChainBytes>,
    bound: f64,
    most: u64,
    next: impl FnOnce() -> u64,
) -> Kind {
    match (chosen, chain) {
        (Kind::Incremental, Some(c))
            if bound > 0.0 && !c.admits(most, bound) && !c.admits(next(), bound) =>
        {
            Kind::Full
        }
        _ => chosen,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;
    /// Every page of the benchmark's 256 MB written.
    const ALL: u64 = 256 * MB;

    #[test]
    fn a_chain_ends_when_a_restart_would_read_past_the_bound() {
        // The whole-process benchmark's chain: a full version of 256 MB, increments of 1%
        // and 10%, then a step rewriting half the pages.
        let mut c = ChainBytes::committed(None, Kind::Full, 256 * MB);
        for b in [3 * MB, 27 * MB] {
            assert_eq!(
                bounded_kind(Kind::Incremental, c, 1.5, ALL, || b),
                Kind::Incremental
            );
            c = ChainBytes::committed(c, Kind::Incremental, b);
        }
        assert_eq!(
            bounded_kind(Kind::Incremental, c, 1.5, ALL, || 135 * MB),
            Kind::Full
        );
        // Without the bound, or with one that admits it, an increment.
        assert_eq!(
            bounded_kind(Kind::Incremental, c, 0.0, ALL, || 135 * MB),
            Kind::Incremental
        );
        assert_eq!(
            bounded_kind(Kind::Incremental, c, 1.7, ALL, || 135 * MB),
            Kind::Incremental
        );
    }

    #[test]
    fn the_bound_never_makes_an_increment_of_a_full_choice() {
        let c = ChainBytes::committed(None, Kind::Full, 100);
        let never = || -> u64 { panic!("no estimate is needed") };
        assert_eq!(bounded_kind(Kind::Full, c, 1.5, 100, never), Kind::Full);
        // Nothing known of the chain: the policy's choice stands.
        assert_eq!(
            bounded_kind(Kind::Incremental, None, 1.5, 100, never),
            Kind::Incremental
        );
        assert_eq!(ChainBytes::committed(None, Kind::Incremental, 5), None);
        // A chain so short that even every page written stays within it: nothing estimated.
        let c = ChainBytes::committed(None, Kind::Full, 1000);
        assert_eq!(
            bounded_kind(Kind::Incremental, c, 2.0, 1000, never),
            Kind::Incremental
        );
    }

    #[test]
    fn steady_writes_give_chains_of_the_bounds_length() {
        // 10% rewritten each step under a bound of 1.5: five increments, then a full one.
        let (full, inc) = (1000, 100);
        let mut c = ChainBytes::committed(None, Kind::Full, full);
        let mut kinds = String::new();
        for _ in 0..12 {
            let k = bounded_kind(Kind::Incremental, c, 1.5, full, || inc);
            kinds.push(if k == Kind::Full { 'F' } else { 'I' });
            c = ChainBytes::committed(c, k, if k == Kind::Full { full } else { inc });
        }
        assert_eq!(kinds, "IIIIIFIIIIIF");
    }

    #[test]
    fn a_chain_read_back_from_its_files() {
        let c = ChainBytes::of_files([10u64, 20, 300].into_iter()).expect("three files");
        assert_eq!(
            c,
            ChainBytes {
                full: 300,
                increments: 30
            }
        );
        assert_eq!(ChainBytes::of_files(std::iter::empty()), None);
    }
}
