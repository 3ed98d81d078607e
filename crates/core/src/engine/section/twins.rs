//! Word deltas against twins: a copy of each region taken when its section starts, kept
//! current at every save. Write tracking names the pages written since (the same collect a
//! checkpoint makes), and only those pages are compared, word by word.
//!
//! The twin is taken whole at the start rather than page by page at the first write (the
//! paper's monitor): uffd-async, the default backend, lets first writes through without
//! telling ickpt, so there is no moment to copy a page before it changes. Its cost, one
//! copy of the protected bytes per section start, is measured in `bench cape`.

use crate::track::TrackedRegion;
use ickpt_format::delta::{Word, WORD};

/// A region's bytes as its section last saw them.
pub(crate) struct Twin {
    pub id: u64,
    bytes: Vec<u8>,
}

impl Twin {
    /// `tr`'s bytes now.
    pub fn take(tr: &TrackedRegion) -> Twin {
        let mut bytes = vec![0u8; tr.user_len];
        tr.covering().copy_out(tr.page_offset(), &mut bytes);
        Twin { id: tr.id, bytes }
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Write `words` (checked: inside the region) into the twin.
    pub fn apply(&mut self, page_size: u32, words: &[Word]) {
        let shape = ickpt_format::delta::DeltaShape {
            page_size,
            region_len: self.bytes.len() as u64,
        };
        ickpt_format::delta::apply(&shape, words, &mut self.bytes);
    }

    /// The words of `tr` that differ from the twin in the pages `dirty` marks (one bit per
    /// covering page), in order; the twin takes their new values. Returns the words and the
    /// pages compared.
    pub fn diff(&mut self, tr: &TrackedRegion, dirty: &[u64]) -> (Vec<Word>, u64) {
        let ps = crate::sys::page_size();
        let (off, len) = (tr.page_offset(), tr.user_len);
        let w = WORD as usize;
        let mut words = Vec::new();
        let mut scratch = Vec::with_capacity(ps + 2 * w);
        let mut pages = 0;
        // Word ranges (region offsets), ascending; a word two dirty pages share is compared
        // once.
        let mut done = 0usize;
        for p in set_bits(dirty, tr.npages) {
            pages += 1;
            let lo = (p * ps).max(off) - off;
            let hi = ((p + 1) * ps).min(off + len) - off;
            let start = (lo / w * w).max(done);
            let end = hi.div_ceil(w) * w;
            if start >= end {
                continue;
            }
            let byte_end = end.min(len);
            scratch.resize(byte_end - start, 0);
            tr.covering().copy_out(off + start, &mut scratch);
            let twin = &mut self.bytes[start..byte_end];
            for (k, (now, was)) in scratch.chunks(w).zip(twin.chunks(w)).enumerate() {
                if now != was {
                    let mut v = [0u8; 4];
                    v[..now.len()].copy_from_slice(now);
                    words.push(((start + k * w) as u64, v));
                }
            }
            twin.copy_from_slice(&scratch);
            done = end;
        }
        (words, pages)
    }
}

/// The set bits of `words`, below `bits`, ascending.
fn set_bits(words: &[u64], bits: usize) -> impl Iterator<Item = usize> + '_ {
    words.iter().enumerate().flat_map(move |(i, &w)| {
        let mut w = w;
        std::iter::from_fn(move || {
            (w != 0).then(|| {
                let b = w.trailing_zeros() as usize;
                w &= w - 1;
                i * 64 + b
            })
        })
        .filter(move |&p| p < bits)
    })
}

#[cfg(test)]
mod tests {
    use super::set_bits;

    #[test]
    fn set_bits_ascend_and_stop_at_the_end() {
        let v: Vec<usize> = set_bits(&[0b1010, 1 | 1 << 63, 1], 128).collect();
        assert_eq!(v, [1, 3, 64, 127]);
    }
}
