//! The committer's flush order: how a page was first written in an epoch (the AI-Ckpt paper,
//! §3.3), which the tracking protocol records for each page, and the order the next commit
//! takes pages in, learnt from it (`adaptive_priority`).

/// A page's first write in an epoch, as the commit under way saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Access {
    Untouched = 0,
    /// Copied into a copy-on-write slot while scheduled.
    Cow = 1,
    /// Waited for the committer to take it.
    Wait = 2,
    /// Written during the commit, after the committer had taken it.
    Avoided = 3,
    /// Written after the commit finished.
    After = 4,
}

/// AI-Ckpt's adaptive flush order (its Algorithm 4), the part learnt from the last
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
