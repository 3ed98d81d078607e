//! Cutting the simulated disk's power, and the disk a power loss leaves: durable state kept,
//! each unsynced change kept, lost or torn as a seed chooses.

use super::{Change, CrashFs, Inode, State};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

impl CrashFs {
    /// Changing operations done so far (the k of [`cut_power_at`](Self::cut_power_at)).
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// Let operations 0..op run; the power fails at operation `op`.
    pub fn cut_power_at(&self, op: u64) {
        self.lock().cut_at = Some(op);
    }

    /// Whether the power has failed.
    pub fn is_cut(&self) -> bool {
        self.lock().powered().is_err()
    }

    /// The disk after the power failed now, as the machine finds it on reboot: durable
    /// state, plus each unsynced directory change kept or lost and each file's unsynced data
    /// kept, cut short or garbled, all chosen by `seed`. Same options, powered, unlocked.
    pub fn after_power_loss(&self, seed: u64) -> CrashFs {
        let st = self.lock();
        let mut rng = SplitMix(seed);
        let mut names = st.durable.clone();
        for c in &st.pending {
            if rng.next() & 1 == 0 {
                continue;
            }
            match c {
                Change::Create { name, ino } | Change::Link { to: name, ino } => {
                    names.insert(name.clone(), *ino);
                }
                Change::Rename { from, to, ino } => {
                    if names.get(from) == Some(ino) {
                        names.remove(from);
                    }
                    names.insert(to.clone(), *ino);
                }
                Change::Unlink { name, ino } => {
                    if names.get(name) == Some(ino) {
                        names.remove(name);
                    }
                }
            }
        }
        let mut inodes = HashMap::new();
        for &ino in names.values() {
            let data = torn(&st.inodes[&ino], &mut rng);
            inodes.insert(
                ino,
                Inode {
                    live: data.clone(),
                    durable: data,
                },
            );
        }
        CrashFs {
            state: Arc::new(Mutex::new(State {
                opts: st.opts,
                exists: st.exists,
                live: names.clone(),
                durable: names,
                pending: Vec::new(),
                inodes,
                next_ino: st.next_ino,
                ops: 0,
                cut_at: None,
                locked: false,
                noreplace_refused: 0,
            })),
        }
    }
}

/// What is left of a file's data: what was synced, then some of the unsynced bytes, of
/// which a stretch may be garbage (blocks allocated but never written).
fn torn(inode: &Inode, rng: &mut SplitMix) -> Vec<u8> {
    let (live, durable) = (&inode.live, &inode.durable);
    if live == durable || live.len() < durable.len() {
        return durable.clone();
    }
    // Synced bytes overwritten since (`overwrite_at`) come back old, new, or new over one
    // range of them: the disk may have written part of the overwrite.
    let lo = durable.len();
    let mut data = durable.clone();
    if live[..lo] != durable[..] {
        let a = rng.below(lo + 1);
        let b = a + rng.below(lo - a + 1);
        data[a..b].copy_from_slice(&live[a..b]);
    }
    // Appended bytes: kept, cut short, or garbled.
    let keep = lo + rng.below(live.len() - lo + 1);
    data.extend_from_slice(&live[lo..keep]);
    if keep > lo && rng.next() & 1 == 0 {
        let a = lo + rng.below(keep - lo);
        let b = a + 1 + rng.below(keep - a);
        for x in &mut data[a..b] {
            *x = rng.next() as u8;
        }
    }
    data
}

/// SplitMix64: a seeded generator with no dependency.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fs::{FsDir, StoreFs};
    use crate::store::CrashOptions;
    use std::path::Path;

    fn dir(fs: &CrashFs) -> Box<dyn FsDir> {
        fs.open_dir(Path::new("/sim"), true).unwrap()
    }

    fn file(d: &dyn FsDir, name: &str, data: &[u8], sync: bool) {
        let mut f = d.create_new(name).unwrap();
        f.write_all(data).unwrap();
        if sync {
            f.sync().unwrap();
        }
    }

    fn read(fs: &CrashFs, name: &str) -> Option<Vec<u8>> {
        let d = dir(fs);
        let f = d.open_file(name).ok()?;
        let mut b = vec![0; f.size().unwrap() as usize];
        f.read_exact_at(&mut b, 0).unwrap();
        Some(b)
    }

    #[test]
    fn an_unsynced_overwrite_comes_back_old_new_or_partly_new() {
        let fs = CrashFs::new(CrashOptions::default());
        let d = dir(&fs);
        let mut f = d.create_new("a").unwrap();
        f.write_all(b"aaaaaaaa").unwrap();
        f.sync().unwrap();
        f.overwrite_at(2, b"bbbb").unwrap();
        assert!(
            f.overwrite_at(6, b"ccc").is_err(),
            "an overwrite never extends"
        );
        d.sync().unwrap();
        let (mut old, mut new, mut part) = (false, false, false);
        for seed in 0..200 {
            let got = read(&fs.after_power_loss(seed), "a").unwrap();
            assert_eq!(got.len(), 8);
            assert_eq!(&got[..2], b"aa");
            assert_eq!(&got[6..], b"aa");
            match &got[2..6] {
                b"aaaa" => old = true,
                b"bbbb" => new = true,
                mid => {
                    assert!(mid.iter().all(|&c| c == b'a' || c == b'b'), "{mid:?}");
                    part = true;
                }
            }
        }
        assert!(old && new && part);
        f.sync().unwrap();
        for seed in 0..20 {
            assert_eq!(read(&fs.after_power_loss(seed), "a").unwrap(), b"aabbbbaa");
        }
    }

    #[test]
    fn synced_state_survives_every_power_loss() {
        let fs = CrashFs::new(CrashOptions::default());
        let d = dir(&fs);
        file(&*d, "a", b"hello", true);
        d.sync().unwrap();
        for seed in 0..50 {
            let after = fs.after_power_loss(seed);
            assert_eq!(read(&after, "a").as_deref(), Some(&b"hello"[..]));
        }
    }

    #[test]
    fn unsynced_changes_are_each_kept_or_lost() {
        let fs = CrashFs::new(CrashOptions::default());
        let d = dir(&fs);
        file(&*d, "a", b"synced data", true);
        file(&*d, "b", b"never synced", false);
        let (mut a_seen, mut a_lost, mut b_torn) = (false, false, false);
        for seed in 0..200 {
            let after = fs.after_power_loss(seed);
            match read(&after, "a") {
                Some(data) => {
                    assert_eq!(data, b"synced data", "synced data is never torn");
                    a_seen = true;
                }
                None => a_lost = true,
            }
            if let Some(b) = read(&after, "b") {
                b_torn |= b.len() < 12 || b != b"never synced";
            }
        }
        assert!(
            a_seen && a_lost,
            "an unsynced entry is sometimes kept, sometimes lost"
        );
        assert!(b_torn, "unsynced data is sometimes torn");
    }

    #[test]
    fn the_power_cut_fails_that_operation_and_all_after() {
        let fs = CrashFs::new(CrashOptions::default());
        let d = dir(&fs);
        fs.cut_power_at(2);
        let mut f = d.create_new("a").unwrap();
        f.write_all(b"x").unwrap();
        assert!(f.sync().is_err());
        assert!(d.sync().is_err());
        assert!(d.entries().is_err());
        assert!(fs.is_cut());
        assert_eq!(fs.ops(), 2);
    }
}
