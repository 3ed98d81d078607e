//! What a store keeps: the retention limits, and the versions they let go. `engine::gc`
//! applies them to a store (and `ickpt prune` through it); the rules are here.

use std::collections::HashMap;

/// What a store keeps (the hybrid full/incremental paper's garbage collection, with the
/// limits users of SCR and restic expect). Each limit narrows what is kept; none can take the
/// newest version, nor a version some kept version's restore reads (a chain is only ever cut
/// below its full).
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
