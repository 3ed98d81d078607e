//! Pure decisions, testable without memory tricks or I/O.

mod access;
pub mod prwip;

pub use access::Access;
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

/// How the kind of each checkpoint is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KindPolicy {
    /// Every `full_every`-th checkpoint is full ([`next_kind`]).
    #[default]
    Fixed,
    /// From measured costs ([`cost_kind`]).
    Cost,
}

impl KindPolicy {
    pub fn parse(s: &str) -> Option<KindPolicy> {
        match s {
            "fixed" => Some(KindPolicy::Fixed),
            "cost" => Some(KindPolicy::Cost),
            _ => None,
        }
    }
}

/// One commit as the cost policy saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    pub bytes: u64,
    /// From the checkpoint call to the version being committed.
    pub secs: f64,
}

/// What the cost policy knows of the chain the next checkpoint would extend.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ChainCosts {
    /// The chain's full version (O_f), when this engine committed it.
    pub full: Option<Cost>,
    /// The newest increment (of this chain or the one before), which predicts the next one
    /// (O_i): iterative codes rewrite about as much each step, and the kind is chosen before
    /// the dirty pages are collected.
    pub last_increment: Option<Cost>,
    /// Bytes of every increment of the chain so far.
    pub increment_bytes: u64,
    /// Of the pages, those written since the checkpoint before the one being committed:
    /// set when a checkpoint is scheduled, so that a full version, too, predicts the next
    /// increment ([`ChainCosts::committed`]).
    pub written_fraction: Option<f64>,
}

impl ChainCosts {
    /// A version was committed at `cost`. A full one starts the chain, and predicts the next
    /// increment as its written fraction of itself: without it, a policy that chose full
    /// versions because increments were large would never see them shrink.
    pub fn committed(&mut self, kind: Kind, cost: Cost) {
        match kind {
            Kind::Full => {
                self.full = Some(cost);
                self.increment_bytes = 0;
                if let Some(f) = self.written_fraction {
                    self.last_increment = Some(Cost {
                        bytes: (cost.bytes as f64 * f) as u64,
                        secs: cost.secs * f,
                    });
                }
            }
            Kind::Incremental => {
                self.last_increment = Some(cost);
                self.increment_bytes += cost.bytes;
            }
        }
    }
}

/// The longest chain the cost policy makes, in increments: idle steps store a few pages each,
/// and without a bound the chain a restart opens version by version would grow for ever.
pub const MAX_COST_CHAIN: u32 = 256;

/// Why [`cost_kind`] chose what it chose (what its tests check).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostReason {
    /// No full version of this engine's to weigh against: start a chain.
    NoFull,
    /// No increment measured yet: take one.
    Measure,
    /// The next increment would be as large as a full version.
    AsLargeAsFull,
    /// One more increment costs more in restore time than it saves in checkpoint time.
    NoSaving,
    /// The chain's increments would outweigh its full version, or it has
    /// [`MAX_COST_CHAIN`] increments: a new chain lets garbage collection free the old one.
    Storage,
    /// One more increment saves time.
    Saves,
}

/// Paper 002's saving of a chain of `n` increments over `n` full versions: the checkpoint
/// time saved, less the restore time lost, S_n = n (O_f − O_i) − (R_{f+i} − R_f).
pub fn saving(n: u32, o_f: f64, o_i: f64, r_f_plus_i: f64, r_f: f64) -> f64 {
    f64::from(n) * (o_f - o_i) - (r_f_plus_i - r_f)
}

/// Full or incremental from measured costs (paper 002, "Benefits of the hybrid C/R
/// mechanism"). The chain grows while S_n does: one more increment saves O_f − O_i of
/// checkpoint time and adds its own reading to a restart, R_{f+n+1} − R_{f+n} =
/// `restore_weight` × O_i (the paper's restart reads every file; 1.0 weighs reading a byte
/// as writing it). It also ends when an increment would be as large as the full version, and
/// when the chain's increments would outweigh it (the storage the paper says bounds chains).
pub fn cost_kind(c: &ChainCosts, depth: u32, restore_weight: f64) -> (Kind, CostReason) {
    let Some(full) = c.full else {
        return (Kind::Full, CostReason::NoFull);
    };
    if depth >= MAX_COST_CHAIN {
        return (Kind::Full, CostReason::Storage);
    }
    let Some(next) = c.last_increment else {
        return (Kind::Incremental, CostReason::Measure);
    };
    if next.bytes >= full.bytes {
        return (Kind::Full, CostReason::AsLargeAsFull);
    }
    // S_{n+1} − S_n: one more increment's own S_1, its reading being R_{f+1} − R_f.
    let gain = saving(1, full.secs, next.secs, restore_weight * next.secs, 0.0);
    if gain <= 0.0 {
        return (Kind::Full, CostReason::NoSaving);
    }
    if c.increment_bytes + next.bytes > full.bytes {
        return (Kind::Full, CostReason::Storage);
    }
    (Kind::Incremental, CostReason::Saves)
}

/// What a store keeps (paper 002's garbage collection, with the limits users of SCR and
/// restic expect). Each limit narrows what is kept; none can take the newest version, nor a
/// version some kept version's restore reads (a chain is only ever cut below its full).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// The chains of the `chains` newest full versions (at least 1).
    pub chains: u32,
    /// Only what a restore of the `versions` newest versions needs; None: no such limit.
    pub versions: Option<u32>,
    /// Only what a restore of a version committed within this long needs; None: no limit.
    pub within: Option<std::time::Duration>,
}

impl Retention {
    /// Whether a commit that is not full can make something collectable: only when the
    /// limit moves with every version, not only with every full one.
    pub fn per_version(&self) -> bool {
        self.versions.is_some() || self.within.is_some()
    }
}

/// One version as garbage collection sees it (from its header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    pub version: u64,
    /// The version it increments; 0 for a full version.
    pub parent: u64,
    pub created_unix_ns: u64,
}

/// `v` and every version its restore reads, newest first, up to its full one (`parent` 0);
/// None when a link is missing. Bounded by the number of versions, whatever `parent` says.
pub fn restore_set(parent: &HashMap<u64, u64>, mut v: u64) -> Option<Vec<u64>> {
    let mut set = vec![v];
    loop {
        match parent.get(&v) {
            Some(0) => return Some(set),
            Some(&p) if set.len() <= parent.len() => {
                set.push(p);
                v = p;
            }
            _ => return None,
        }
    }
}

/// The versions `retention` lets go at `now_unix_ns`: every version that is neither within
/// all its limits nor read by the restore of one that is, of the newest version, or of a
/// version in `keep` (the engine's head, what global records name, what a drain has not
/// copied yet). Returned newest first, so a crash midway never leaves an increment without
/// its parent. Versions whose chain cannot be followed are left for `verify` to report.
pub fn collectable(
    versions: &[Known],
    retention: &Retention,
    now_unix_ns: u64,
    keep: &[u64],
) -> Vec<u64> {
    let parent: HashMap<u64, u64> = versions.iter().map(|k| (k.version, k.parent)).collect();
    let restore_set = |v: u64| restore_set(&parent, v);
    let mut rooted: Vec<(&Known, u64)> = versions
        .iter()
        .filter_map(|k| Some((k, *restore_set(k.version)?.last()?)))
        .collect();
    rooted.sort_unstable_by_key(|(k, _)| std::cmp::Reverse(k.version));
    let mut fulls: Vec<u64> = rooted.iter().map(|&(_, root)| root).collect();
    fulls.sort_unstable_by(|a, b| b.cmp(a));
    fulls.dedup();
    let oldest_chain = fulls
        .get(retention.chains.max(1) as usize - 1)
        .copied()
        .unwrap_or(0);
    let newest_allowed = retention.versions.map_or(usize::MAX, |n| n.max(1) as usize);
    let oldest_time = retention.within.map_or(0, |d| {
        now_unix_ns.saturating_sub(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    });
    let mut pinned: Vec<u64> = keep.to_vec();
    pinned.extend(rooted.first().map(|(k, _)| k.version));
    pinned.extend(
        rooted
            .iter()
            .enumerate()
            .filter(|&(i, &(k, root))| {
                root >= oldest_chain && i < newest_allowed && k.created_unix_ns >= oldest_time
            })
            .map(|(_, (k, _))| k.version),
    );
    let kept: std::collections::HashSet<u64> = pinned
        .into_iter()
        .filter_map(restore_set)
        .flatten()
        .collect();
    rooted
        .iter()
        .map(|(k, _)| k.version)
        .filter(|v| !kept.contains(v))
        .collect()
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

    /// Versions 1..: (parent, created second).
    fn known(vs: &[(u64, u64)]) -> Vec<Known> {
        vs.iter()
            .enumerate()
            .map(|(i, &(parent, t))| Known {
                version: i as u64 + 1,
                parent,
                created_unix_ns: t * 1_000_000_000,
            })
            .collect()
    }

    fn chains(n: u32) -> Retention {
        Retention {
            chains: n,
            versions: None,
            within: None,
        }
    }

    #[test]
    fn collects_only_chains_older_than_the_kept_fulls() {
        // 1 F, 2,3 incr; 4 F, 5 incr; 6 F, 7 incr; 8 incr branching from 5 (after a restore).
        let vs = known(&[
            (0, 1),
            (1, 2),
            (2, 3),
            (0, 4),
            (4, 5),
            (0, 6),
            (6, 7),
            (5, 8),
        ]);
        let at = |r: Retention, keep: &[u64]| collectable(&vs, &r, 9_000_000_000, keep);
        assert_eq!(at(chains(2), &[]), vec![3, 2, 1]);
        assert_eq!(at(chains(3), &[]), Vec::<u64>::new());
        // The newest version stays whatever the limits, and so does what its restore reads.
        assert_eq!(at(chains(1), &[]), vec![3, 2, 1]);
        // So does what the engine's head and global records need.
        assert_eq!(at(chains(1), &[2]), vec![3]);
        assert_eq!(at(chains(1), &[3]), Vec::<u64>::new());
        // A chain whose parent is missing is never collected: verify reports it.
        let broken = [
            Known {
                version: 1,
                parent: 0,
                created_unix_ns: 0,
            },
            Known {
                version: 3,
                parent: 2,
                created_unix_ns: 0,
            },
            Known {
                version: 4,
                parent: 0,
                created_unix_ns: 0,
            },
        ];
        assert_eq!(collectable(&broken, &chains(1), 0, &[]), vec![1]);
        // Nor does a crafted loop of parents hang it.
        let looped = known(&[(2, 1), (1, 2), (0, 3)]);
        assert_eq!(collectable(&looped, &chains(1), 0, &[]), Vec::<u64>::new());
    }

    #[test]
    fn version_and_age_limits_narrow_the_chains_kept() {
        // Two chains of four: 1 F, 2-4; 5 F, 6-8; created at seconds 10, 20, ... 80.
        let vs = known(&[
            (0, 10),
            (1, 20),
            (2, 30),
            (3, 40),
            (0, 50),
            (5, 60),
            (6, 70),
            (7, 80),
        ]);
        let keep_versions = |n| Retention {
            versions: Some(n),
            ..chains(2)
        };
        let at = |r: Retention| collectable(&vs, &r, 85_000_000_000, &[]);
        // The three newest are all in the second chain: the first goes.
        assert_eq!(at(keep_versions(3)), vec![4, 3, 2, 1]);
        // Five newest reach into the first chain, which stays whole (4 reads 1-3).
        assert_eq!(at(keep_versions(5)), Vec::<u64>::new());
        // The chain limit still applies beside it.
        assert_eq!(
            at(Retention {
                versions: Some(8),
                ..chains(1)
            }),
            vec![4, 3, 2, 1]
        );
        let within = |s| Retention {
            within: Some(std::time::Duration::from_secs(s)),
            ..chains(2)
        };
        // Committed within 30 s of second 85: 6, 7, 8.
        assert_eq!(at(within(30)), vec![4, 3, 2, 1]);
        assert_eq!(at(within(50)), Vec::<u64>::new());
        // Nothing that recent: the newest version and its chain are kept anyway.
        assert_eq!(at(within(1)), vec![4, 3, 2, 1]);
        // A branch after a restore: 9 increments 3, so the first chain is read again.
        let mut branched = vs.clone();
        branched.push(Known {
            version: 9,
            parent: 3,
            created_unix_ns: 90_000_000_000,
        });
        assert_eq!(
            collectable(&branched, &keep_versions(1), 95_000_000_000, &[]),
            vec![8, 7, 6, 5, 4]
        );
    }

    proptest::proptest! {
        /// Whatever the limits: the newest version and what `keep` names stay, each with every
        /// version its restore reads, and nothing outside the store is named.
        #[test]
        fn never_collects_what_a_kept_restore_reads(
            parents in proptest::collection::vec(0u64..8, 1..40),
            chains_kept in 1u32..4,
            versions in proptest::option::of(1u32..10),
            within_s in proptest::option::of(0u64..50),
            keep in proptest::collection::vec(1u64..45, 0..3),
        ) {
            // Version i+1's parent is 0 (full) or one of the 7 before it.
            let vs: Vec<Known> = parents
                .iter()
                .enumerate()
                .map(|(i, &p)| Known {
                    version: i as u64 + 1,
                    parent: if p == 0 || p > i as u64 { 0 } else { i as u64 + 1 - p },
                    created_unix_ns: i as u64 * 1_000_000_000,
                })
                .collect();
            let r = Retention {
                chains: chains_kept,
                versions,
                within: within_s.map(std::time::Duration::from_secs),
            };
            let gone = collectable(&vs, &r, vs.len() as u64 * 1_000_000_000, &keep);
            let parent: HashMap<u64, u64> = vs.iter().map(|k| (k.version, k.parent)).collect();
            let newest = vs.len() as u64;
            for &start in keep.iter().filter(|v| parent.contains_key(v)).chain([&newest]) {
                let mut v = start;
                loop {
                    proptest::prop_assert!(!gone.contains(&v), "{v} read by kept {start}");
                    match parent[&v] {
                        0 => break,
                        p => v = p,
                    }
                }
            }
            proptest::prop_assert!(gone.windows(2).all(|w| w[0] > w[1]));
            proptest::prop_assert!(gone.iter().all(|v| parent.contains_key(v)));
        }
    }

    #[test]
    fn saving_is_paper_002s_formula() {
        // n (O_f − O_i) − (R_{f+i} − R_f): 3 × (10 − 4) − (15 − 12) = 15.
        assert_eq!(saving(3, 10.0, 4.0, 15.0, 12.0), 15.0);
        assert_eq!(saving(0, 10.0, 4.0, 12.0, 12.0), 0.0);
    }

    /// The kinds the cost policy picks over `steps` checkpoints that each write `dirty` of a
    /// 1 GiB region, commits costing 10 ms plus 2 ns a byte (500 MB/s).
    fn cost_run(dirty: f64, steps: usize, weight: f64) -> Vec<Kind> {
        const FULL: u64 = 1 << 30;
        let cost = |bytes: u64| Cost {
            bytes,
            secs: 0.010 + bytes as f64 * 2e-9,
        };
        let mut c = ChainCosts {
            written_fraction: Some(dirty),
            ..ChainCosts::default()
        };
        let mut depth = 0;
        (0..steps)
            .map(|_| {
                let (kind, _) = cost_kind(&c, depth, weight);
                let bytes = match kind {
                    Full => FULL,
                    Incremental => (FULL as f64 * dirty) as u64,
                };
                depth = if kind == Full { 0 } else { depth + 1 };
                c.committed(kind, cost(bytes));
                kind
            })
            .collect()
    }

    fn chain_lengths(kinds: &[Kind]) -> Vec<usize> {
        let starts: Vec<usize> = (0..kinds.len()).filter(|&i| kinds[i] == Full).collect();
        starts.windows(2).map(|w| w[1] - w[0]).collect()
    }

    #[test]
    fn the_cost_policy_chains_while_increments_save_and_storage_allows() {
        // 10% dirty: an increment saves 2.157 s − 0.225 s of writing and costs 0.225 s of
        // reading; ten fit beside the full one, the eleventh would outweigh it (storage).
        assert_eq!(chain_lengths(&cost_run(0.10, 40, 1.0)), vec![11, 11, 11]);
        // 1%: a hundred increments before the chain outweighs its full.
        assert_eq!(chain_lengths(&cost_run(0.01, 250, 1.0)), vec![101, 101]);
        // Idle steps (a page in a million): the chain stops at MAX_COST_CHAIN increments.
        let idle = MAX_COST_CHAIN as usize + 1;
        assert_eq!(
            chain_lengths(&cost_run(1e-6, 3 * idle, 1.0)),
            vec![idle, idle]
        );
        // 60%: an increment would save 0.86 s of writing and cost 1.30 s of reading (the full
        // version predicts it from the pages written): every version full.
        assert_eq!(
            chain_lengths(&cost_run(0.60, 7, 1.0)),
            vec![1, 1, 1, 1, 1, 1]
        );
        // Weighing restores at a quarter, a 60% increment pays, but two outweigh the full.
        assert_eq!(chain_lengths(&cost_run(0.60, 7, 0.25)), vec![2, 2, 2]);
        // Every page rewritten: as large as a full version.
        let whole = ChainCosts {
            full: Some(Cost {
                bytes: 100,
                secs: 1.0,
            }),
            last_increment: Some(Cost {
                bytes: 100,
                secs: 0.1,
            }),
            increment_bytes: 100,
            written_fraction: None,
        };
        assert_eq!(cost_kind(&whole, 1, 1.0), (Full, CostReason::AsLargeAsFull));
        assert_eq!(
            cost_kind(&ChainCosts::default(), 0, 1.0),
            (Full, CostReason::NoFull)
        );
    }

    #[test]
    fn adaptive_priority_is_wait_cow_avoided_after_each_by_first_write() {
        use crate::policy::Access::*;
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
