//! A fixed-size bitmap updated with atomics, so the fault handler can set bits without locks.
//! It lives in a mapping of ickpt's own (see `own_mem`), with one more word counting faults.

use crate::track::memory::own_mem::OwnSlice;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct AtomicBitmap {
    /// Word 0 counts faults; words 1.. are the bits.
    mem: OwnSlice<AtomicU64>,
    bits: usize,
}

impl AtomicBitmap {
    pub fn new(bits: usize) -> io::Result<Self> {
        let words = bits
            .div_ceil(64)
            .checked_add(1)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        Ok(AtomicBitmap {
            mem: OwnSlice::new(words)?,
            bits,
        })
    }

    fn bit_words(&self) -> &[AtomicU64] {
        &self.mem[1..]
    }

    /// Signal-safe.
    #[inline]
    pub fn set(&self, i: usize) {
        self.bit_words()[i / 64].fetch_or(1 << (i % 64), Ordering::SeqCst);
    }

    /// Signal-safe.
    #[inline]
    pub fn is_set(&self, i: usize) -> bool {
        self.bit_words()[i / 64].load(Ordering::SeqCst) & (1 << (i % 64)) != 0
    }

    /// Set bit `i`; true if it was set already. Signal-safe.
    #[inline]
    pub fn test_and_set(&self, i: usize) -> bool {
        let bit = 1 << (i % 64);
        self.bit_words()[i / 64].fetch_or(bit, Ordering::SeqCst) & bit != 0
    }

    /// Signal-safe.
    pub fn set_all(&self) {
        for (w, word) in self.bit_words().iter().enumerate() {
            word.store(full_word(self.bits, w), Ordering::SeqCst);
        }
    }

    /// Move every set bit into `out` (resized to fit) and clear it here.
    pub fn take_into(&self, out: &mut Vec<u64>) {
        out.clear();
        out.extend(self.bit_words().iter().map(|w| w.swap(0, Ordering::SeqCst)));
    }

    /// Set in `out` (as long as this bitmap's words) every bit set here, leaving them set.
    pub fn copy_into(&self, out: &mut Vec<u64>) {
        out.clear();
        out.extend(self.bit_words().iter().map(|w| w.load(Ordering::SeqCst)));
    }

    /// Move the bits of `lo..hi` into `out` (as long as this bitmap's words, other bits
    /// untouched there) and clear them here.
    pub fn take_range(&self, lo: usize, hi: usize, out: &mut Vec<u64>) {
        out.resize(self.bits.div_ceil(64), 0);
        let mut i = lo;
        while i < hi {
            let (w, b) = (i / 64, i % 64);
            let n = (64 - b).min(hi - i);
            let mask = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << b
            };
            out[w] |= self.bit_words()[w].fetch_and(!mask, Ordering::SeqCst) & mask;
            i += n;
        }
    }

    /// Put bits back (a checkpoint that failed must not forget what was dirty).
    pub fn merge(&self, bits: &[u64]) {
        for (w, b) in self.bit_words().iter().zip(bits) {
            if *b != 0 {
                w.fetch_or(*b, Ordering::SeqCst);
            }
        }
    }

    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.bit_words()
            .iter()
            .map(|w| w.load(Ordering::Relaxed).count_ones() as usize)
            .sum()
    }

    /// Signal-safe.
    pub fn count_faults(&self, n: u64) {
        self.mem[0].fetch_add(n, Ordering::Relaxed);
    }

    /// Signal-safe.
    pub fn count_fault(&self) {
        self.mem[0].fetch_add(1, Ordering::Relaxed);
    }

    pub fn faults(&self) -> u64 {
        self.mem[0].load(Ordering::Relaxed)
    }

    /// The mapping holding the bits, which no protected region may cover.
    pub fn span(&self) -> (usize, usize) {
        self.mem.span()
    }
}

/// Word `w` of a bitmap of `bits` bits with every valid bit set.
pub fn full_word(bits: usize, w: usize) -> u64 {
    let valid = bits.saturating_sub(w * 64).min(64);
    if valid == 64 {
        u64::MAX
    } else {
        (1u64 << valid) - 1
    }
}

/// Whether bit `i` of a plain bitmap is set.
#[inline]
pub fn is_set(words: &[u64], i: usize) -> bool {
    words.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
}

/// Set bit `i` of a plain bitmap (which must have room for it).
#[inline]
pub fn set(words: &mut [u64], i: usize) {
    words[i / 64] |= 1 << (i % 64);
}

pub fn clear(words: &mut [u64], i: usize) {
    words[i / 64] &= !(1 << (i % 64));
}

/// The first set bit at or after `from`.
pub fn next_set(words: &[u64], from: usize, bits: usize) -> Option<usize> {
    let mut w = from / 64;
    if w >= words.len() {
        return None;
    }
    let mut cur = words[w] & (u64::MAX << (from % 64));
    loop {
        if cur != 0 {
            let i = w * 64 + cur.trailing_zeros() as usize;
            return (i < bits).then_some(i);
        }
        w += 1;
        if w >= words.len() {
            return None;
        }
        cur = words[w];
    }
}

/// The first clear bit at or after `from`, or `bits` when there is none before it.
pub fn next_clear(words: &[u64], from: usize, bits: usize) -> usize {
    let mut w = from / 64;
    if w >= words.len() || from >= bits {
        return bits.max(from);
    }
    let mut cur = !words[w] & (u64::MAX << (from % 64));
    loop {
        if cur != 0 {
            return (w * 64 + cur.trailing_zeros() as usize).min(bits);
        }
        w += 1;
        if w >= words.len() {
            return bits;
        }
        cur = !words[w];
    }
}

/// The runs of consecutive set bits below `bits`, in ascending order.
pub fn runs(words: &[u64], bits: usize) -> Runs<'_> {
    Runs { words, bits, at: 0 }
}

/// [`runs`].
#[derive(Clone)]
pub struct Runs<'a> {
    words: &'a [u64],
    bits: usize,
    at: usize,
}

impl Iterator for Runs<'_> {
    type Item = std::ops::Range<usize>;

    fn next(&mut self) -> Option<Self::Item> {
        let lo = next_set(self.words, self.at, self.bits)?;
        let hi = next_clear(self.words, lo, self.bits);
        self.at = hi;
        Some(lo..hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_the_set_bits_grouped() {
        let mut w = vec![0u64; 3];
        for i in [0, 1, 2, 63, 64, 65, 100, 190, 191] {
            set(&mut w, i);
        }
        let got: Vec<_> = runs(&w, 192).collect();
        assert_eq!(got, vec![0..3, 63..66, 100..101, 190..192]);
        // Bits past `bits` are not runs, and a run stops there.
        assert_eq!(runs(&w, 191).last(), Some(190..191));
        assert_eq!(runs(&w, 190).last(), Some(100..101));
        assert_eq!(runs(&[], 0).count(), 0);
        assert_eq!(runs(&[u64::MAX], 64).collect::<Vec<_>>(), vec![0..64]);
    }

    #[test]
    fn a_range_is_taken_and_the_rest_left_and_copied() {
        let b = AtomicBitmap::new(200).unwrap();
        for i in [0, 5, 63, 64, 65, 127, 128, 150, 199] {
            b.set(i);
        }
        let mut out = vec![0u64; 4];
        bitmap_set(&mut out, 199); // kept: not the range's
        b.take_range(5, 129, &mut out);
        assert_eq!(set_bits(&out, 200), vec![5, 63, 64, 65, 127, 128, 199]);
        let mut left = Vec::new();
        b.copy_into(&mut left);
        assert_eq!(set_bits(&left, 200), vec![0, 150, 199]);
        b.copy_into(&mut left);
        assert_eq!(
            set_bits(&left, 200),
            vec![0, 150, 199],
            "copying takes nothing"
        );
        let mut none = Vec::new();
        b.take_range(1, 1, &mut none);
        assert_eq!(set_bits(&none, 200), Vec::<usize>::new());
        b.take_range(0, 200, &mut none);
        assert_eq!(set_bits(&none, 200), vec![0, 150, 199]);
        b.copy_into(&mut left);
        assert!(left.iter().all(|&w| w == 0));
    }

    fn bitmap_set(words: &mut [u64], i: usize) {
        set(words, i)
    }

    /// The set bits, in ascending order.
    fn set_bits(words: &[u64], bits: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut i = 0;
        while let Some(j) = next_set(words, i, bits) {
            out.push(j);
            i = j + 1;
        }
        out
    }

    #[test]
    fn next_set_finds_every_set_bit() {
        let bits: usize = 200;
        let set = [0, 1, 2, 63, 64, 65, 127, 128, 199];
        let mut words = vec![0u64; bits.div_ceil(64)];
        for i in set {
            words[i / 64] |= 1 << (i % 64);
        }
        assert_eq!(set_bits(&words, bits), set);
        // Bits past `bits` in the last word are not reported.
        words[3] |= 1 << 63;
        assert_eq!(set_bits(&words, bits), set);
    }

    #[test]
    fn take_clears_and_merge_restores() {
        let b = AtomicBitmap::new(100).unwrap();
        b.set(3);
        b.set(99);
        let mut out = Vec::new();
        b.take_into(&mut out);
        assert_eq!(b.count(), 0);
        assert_eq!(set_bits(&out, 100), [3, 99]);
        b.merge(&out);
        assert_eq!(b.count(), 2);
        b.set_all();
        assert_eq!(b.count(), 100);
    }
}
