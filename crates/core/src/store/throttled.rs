//! Bandwidth emulation for experiments (AI-Ckpt §4): a store wrapper that lets bytes through
//! at a set rate, so a commit takes as long as it would on a parallel file system or a slow
//! disk, and an asynchronous commit overlaps several iterations as in the paper.

use super::{Store, StoreWriter};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes go out in slices of this size, so a large write is paced smoothly.
const SLICE: usize = 1 << 20;

/// A token bucket: `rate` bytes per second, up to `burst` bytes banked while idle. Time is
/// passed in, so the arithmetic is tested without a clock.
#[derive(Debug)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    pub fn new(rate: u64, burst: u64, now: Instant) -> Self {
        TokenBucket {
            rate: rate.max(1) as f64,
            burst: burst as f64,
            tokens: burst as f64,
            last: now,
        }
    }

    /// Spend `n` bytes at `now`; returns how long the caller must wait before sending them.
    /// Tokens may go negative (a debt), so a write larger than the burst waits in proportion.
    pub fn take(&mut self, n: u64, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.tokens -= n as f64;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }
}

/// Parse a size or a bandwidth (bytes, or bytes per second) with an optional K, M or G
/// suffix (powers of 1024). 0 is a valid size; as a bandwidth it means unlimited.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

pub struct ThrottledStore<S> {
    inner: S,
    bucket: Arc<Mutex<TokenBucket>>,
}

impl<S: Store> ThrottledStore<S> {
    /// Let `rate` bytes per second through, with a burst of 1/10 s worth.
    pub fn new(inner: S, rate: u64) -> Self {
        ThrottledStore {
            inner,
            bucket: Arc::new(Mutex::new(TokenBucket::new(
                rate,
                rate / 10,
                Instant::now(),
            ))),
        }
    }
}

impl<S: Store> Store for ThrottledStore<S> {
    pass_through_to!(inner);

    fn create(&self, name: &str) -> io::Result<Box<dyn StoreWriter>> {
        Ok(Box::new(ThrottledWriter {
            inner: self.inner.create(name)?,
            bucket: self.bucket.clone(),
        }))
    }
}

struct ThrottledWriter {
    inner: Box<dyn StoreWriter>,
    bucket: Arc<Mutex<TokenBucket>>,
}

impl ThrottledWriter {
    /// Wait until the bucket lets `bytes` through. Emulating a slower device is the point
    /// here: the wait is the bandwidth.
    fn pace(&self, bytes: usize) {
        let wait = self
            .bucket
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take(bytes as u64, Instant::now());
        std::thread::sleep(wait);
    }
}

impl StoreWriter for ThrottledWriter {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        for slice in buf.chunks(SLICE) {
            self.pace(slice.len());
            self.inner.write_all(slice)?;
        }
        Ok(())
    }

    /// Throttled like a write: the device writes the bytes again.
    fn overwrite_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.pace(buf.len());
        self.inner.overwrite_at(offset, buf)
    }

    fn can_overwrite(&self) -> bool {
        self.inner.can_overwrite()
    }

    fn commit(self: Box<Self>) -> io::Result<()> {
        self.inner.commit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_paces_bytes_at_the_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1000, 100, t0);
        assert_eq!(b.take(100, t0), Duration::ZERO, "the burst goes at once");
        assert_eq!(b.take(500, t0), Duration::from_millis(500), "then 1000 B/s");
        // After waiting, the debt is paid; 0.5 s later the bucket is empty again.
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!(b.take(0, t1), Duration::ZERO);
        // Idle time banks at most the burst.
        let t2 = t1 + Duration::from_secs(10);
        assert_eq!(b.take(100, t2), Duration::ZERO);
        assert_eq!(b.take(1, t2), Duration::from_millis(1));
        // Time never runs backwards for the bucket.
        assert_eq!(b.take(0, t0), Duration::from_millis(1));
    }

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("1000"), Some(1000));
        assert_eq!(parse_size("64M"), Some(64 << 20));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("8K"), Some(8192));
        assert_eq!(parse_size("0"), Some(0));
        for bad in ["", "M", "-1", "1.5M", "12X", "99999999999G"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
    }
}
