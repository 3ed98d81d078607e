//! Whether the next checkpoint is full or incremental: every n-th (the hybrid paper's fixed
//! ratio), or by the paper's cost model, from what the chain so far cost to write and would
//! cost to restore.

use ickpt_format::Kind;

/// The version the next checkpoint will be an increment of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub version: u64,
    /// Increments since the head's full version (0 when the head is full).
    pub chain_depth: u32,
    /// The head file's `meta_crc`, which binds the next increment to exactly this file.
    pub meta_crc: u32,
}

/// Every `full_every`-th checkpoint is full (by default 1 full : 9 incremental, the hybrid
/// full/incremental paper's optimum). Without a head (first checkpoint, or memory not known
/// to match any version) it is full.
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

/// The hybrid full/incremental paper's saving of a chain of `n` increments over `n` full
/// versions: the checkpoint time saved, less the restore time lost,
/// S_n = n (O_f − O_i) − (R_{f+i} − R_f).
pub fn saving(n: u32, o_f: f64, o_i: f64, r_f_plus_i: f64, r_f: f64) -> f64 {
    f64::from(n) * (o_f - o_i) - (r_f_plus_i - r_f)
}

/// Full or incremental from measured costs (the hybrid full/incremental paper, "Benefits of
/// the hybrid C/R mechanism"). The chain grows while S_n does: one more increment saves
/// O_f − O_i of checkpoint time and adds its own reading to a restart,
/// R_{f+n+1} − R_{f+n} = `restore_weight` × O_i (the paper's restart reads every file; 1.0
/// weighs reading a byte as writing it). It also ends when an increment would be as large as
/// the full version, and when the chain's increments would outweigh it (the storage the paper
/// says bounds chains).
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
}
