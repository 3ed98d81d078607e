//! Pure decisions, testable without memory tricks or I/O.

use crate::track::Access;
use ickpt_format::Kind;
use std::collections::HashMap;

/// The version the next checkpoint will be an increment of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub version: u64,
    /// Increments since the head's full version (0 when the head is full).
    pub chain_depth: u32,
    /// The head file's `meta_crc`, which binds the next increment to exactly this file.
    pub meta_crc: u32,
}

/// Every `full_every`-th checkpoint is full (paper 002: 1 full : 9 incremental by default).
/// Without a head (first checkpoint, or memory not known to match any version) it is full.
pub fn next_kind(head: Option<Head>, full_every: u32) -> Kind {
    match head {
        Some(h) if h.chain_depth + 1 < full_every.max(1) => Kind::Incremental,
        _ => Kind::Full,
    }
}

/// Versions garbage collection may delete once a new full version is committed: those whose
/// chain ends in a full version older than the `keep_chains` newest full versions.
/// Returned newest first, so a crash midway never leaves an increment without its parent.
/// Versions whose chain cannot be followed are left for `verify` to report.
/// The chains of the versions in `keep` are never collectable.
pub fn collectable(versions: &[(u64, Kind, u64)], keep_chains: u32, keep: &[u64]) -> Vec<u64> {
    let parent: HashMap<u64, u64> = versions.iter().map(|&(v, _, p)| (v, p)).collect();
    let mut fulls: Vec<u64> = versions
        .iter()
        .filter(|(_, k, _)| *k == Kind::Full)
        .map(|&(v, _, _)| v)
        .collect();
    fulls.sort_unstable_by(|a, b| b.cmp(a));
    let Some(&oldest_kept) = fulls.get(keep_chains.max(1) as usize - 1) else {
        return Vec::new();
    };
    let root = |mut v: u64| -> Option<u64> {
        loop {
            match parent.get(&v) {
                Some(0) => return Some(v),
                Some(&p) => v = p,
                None => return None,
            }
        }
    };
    let kept_roots: Vec<u64> = keep.iter().filter_map(|&v| root(v)).collect();
    let mut out: Vec<u64> = versions
        .iter()
        .filter(|&&(v, _, _)| root(v).is_some_and(|r| r < oldest_kept && !kept_roots.contains(&r)))
        .map(|&(v, _, _)| v)
        .collect();
    out.sort_unstable_by(|a, b| b.cmp(a));
    out
}

/// AI-Ckpt's adaptive flush order (paper 000, Algorithm 4), the part learnt from the last
/// epoch: of the pages to commit, those whose first write last epoch had to WAIT go first,
/// then those that were copied (COW), then those that were AVOIDED, then those written
/// after the commit (AFTER), each class by how early it was written. Algorithm 4 leaves
/// the AFTER pages in any order; the paper's rule for ties (earliest first) is applied to
/// them too, because when a commit is short against the epoch most first writes are AFTER,
/// and their order is the best guess of the order the next epoch writes in. Pages not
/// written last epoch follow in address order (not returned here). `pages` holds (last
/// access, order of that first write, page); the result is the prioritised pages.
pub fn adaptive_priority<P: Copy>(pages: impl IntoIterator<Item = (Access, u32, P)>) -> Vec<P> {
    let rank = |a: Access| match a {
        Access::Wait => Some(0u8),
        Access::Cow => Some(1),
        Access::Avoided => Some(2),
        Access::After => Some(3),
        Access::Untouched => None,
    };
    let mut ranked: Vec<(u8, u32, P)> = pages
        .into_iter()
        .filter_map(|(a, order, p)| rank(a).map(|r| (r, order, p)))
        .collect();
    ranked.sort_unstable_by_key(|&(r, order, _)| (r, order));
    ranked.into_iter().map(|(_, _, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Kind::*;

    #[test]
    fn every_nth_is_full() {
        let mut head = None;
        let mut kinds = Vec::new();
        for v in 1..=21u64 {
            let k = next_kind(head, 10);
            kinds.push(k);
            let depth = match k {
                Full => 0,
                Incremental => head.unwrap().chain_depth + 1,
            };
            head = Some(Head {
                version: v,
                chain_depth: depth,
                meta_crc: 0,
            });
        }
        let fulls: Vec<usize> = (0..21).filter(|&i| kinds[i] == Full).collect();
        assert_eq!(fulls, vec![0, 10, 20]);
        assert_eq!(next_kind(None, 10), Full);
        assert_eq!(
            next_kind(
                Some(Head {
                    version: 3,
                    chain_depth: 0,
                    meta_crc: 0,
                }),
                1
            ),
            Full
        );
    }

    #[test]
    fn collects_only_chains_older_than_the_kept_fulls() {
        // 1 F, 2,3 incr; 4 F, 5 incr; 6 F, 7 incr; 8 incr branching from 5 (after a restore).
        let vs = [
            (1, Full, 0),
            (2, Incremental, 1),
            (3, Incremental, 2),
            (4, Full, 0),
            (5, Incremental, 4),
            (6, Full, 0),
            (7, Incremental, 6),
            (8, Incremental, 5),
        ];
        assert_eq!(collectable(&vs, 2, &[]), vec![3, 2, 1]);
        assert_eq!(collectable(&vs, 1, &[]), vec![8, 5, 4, 3, 2, 1]);
        assert_eq!(collectable(&vs, 3, &[]), Vec::<u64>::new());
        // The engine's head chain stays, whatever else goes.
        assert_eq!(collectable(&vs, 1, &[8]), vec![3, 2, 1]);
        assert_eq!(collectable(&vs, 1, &[2]), vec![8, 5, 4]);
        // So do the chains global records name, each of them.
        assert_eq!(collectable(&vs, 1, &[8, 2]), Vec::<u64>::new());
        assert_eq!(collectable(&vs, 1, &[7, 3]), vec![8, 5, 4]);
        // A chain whose parent is missing is never collected: verify reports it.
        let broken = [(1, Full, 0), (3, Incremental, 2), (4, Full, 0)];
        assert_eq!(collectable(&broken, 1, &[]), vec![1]);
    }

    #[test]
    fn adaptive_priority_is_wait_cow_avoided_after_each_by_first_write() {
        use crate::track::Access::*;
        let pages = [
            (After, 1, 'a'),
            (Avoided, 2, 'b'),
            (Cow, 9, 'c'),
            (Wait, 7, 'd'),
            (Cow, 3, 'e'),
            (Untouched, 0, 'f'),
            (Wait, 4, 'g'),
            (Avoided, 1, 'h'),
            (After, 5, 'i'),
        ];
        assert_eq!(
            adaptive_priority(pages),
            vec!['g', 'd', 'e', 'c', 'h', 'b', 'a', 'i']
        );
    }
}
