//! A store in an S3-compatible object store (`s3://bucket/prefix`), the lowest tier
//! (AI-Ckpt's pluggable backends). Objects are immutable and appear whole: a version is
//! written as a multipart upload, which the server shows under its name only once completed
//! (`commit`); an upload dropped uncommitted is aborted. Through `object_store` (Apache Arrow's
//! client, used by DataFusion and Delta Lake): endpoint, region and credentials come from the
//! usual AWS variables (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_REGION`, `AWS_ALLOW_HTTP` for a server on plain HTTP). Its calls are async; each runs
//! to the end on a one-worker runtime of this store's own, so callers stay synchronous.

use super::marker::{marker_identity, marker_text, MARKER, MARKER_MAX};
use super::{Store, StoreFile, StoreId, StoreWriter};
use ickpt_format::Piece;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{MultipartUpload, ObjectStore};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// S3's smallest part but the last.
const PART: usize = 5 << 20;

pub struct ObjectTier {
    url: String,
    prefix: String,
    client: Arc<dyn ObjectStore>,
    rt: Arc<tokio::runtime::Runtime>,
}

/// `s3://bucket/prefix` split, or why it is not one.
pub fn parse_object_url(url: &str) -> Result<(String, String), String> {
    let rest = url
        .strip_prefix("s3://")
        .ok_or("an s3://bucket/prefix URL")?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    // "a//b/" is "a/b", as a shell path would be.
    let parts: Vec<&str> = prefix.split('/').filter(|p| !p.is_empty()).collect();
    if bucket.is_empty()
        || !bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    {
        return Err(
            "an s3://bucket/prefix URL whose bucket name is lowercase letters, digits, '-' and '.'"
                .into(),
        );
    }
    if parts.iter().any(|&p| p == "." || p == "..") {
        return Err("an s3://bucket/prefix URL without '.' or '..' in its prefix".into());
    }
    Ok((bucket.to_string(), parts.join("/")))
}

fn io_error(e: object_store::Error) -> io::Error {
    match e {
        object_store::Error::NotFound { .. } => io::Error::new(io::ErrorKind::NotFound, e),
        e => io::Error::other(e),
    }
}

impl ObjectTier {
    /// The bucket and prefix of `url`, with the endpoint and credentials of the environment.
    /// Nothing is sent yet.
    pub fn open(url: &str) -> io::Result<ObjectTier> {
        let (bucket, prefix) = parse_object_url(url).map_err(|want| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{url}: expected {want}"),
            )
        })?;
        // A few quick retries, not object_store's three minutes: a failed round is tried
        // again at the next checkpoint anyway, and `wait_drained` should say so soon.
        let retry = object_store::RetryConfig {
            backoff: object_store::BackoffConfig::default(),
            max_retries: 3,
            retry_timeout: std::time::Duration::from_secs(15),
        };
        let client = AmazonS3Builder::from_env()
            .with_bucket_name(&bucket)
            .with_retry(retry)
            .build()
            .map_err(io_error)?;
        // One worker thread of its own: a part's upload, a task the upload spawns, goes on
        // while the drain reads and paces the next (on a current-thread runtime it would
        // stall between calls, and time out at a slow drain_bandwidth).
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ickpt-s3")
            .enable_all()
            .build()?;
        Ok(ObjectTier {
            url: format!("s3://{bucket}/{prefix}"),
            prefix,
            client: Arc::new(client),
            rt: Arc::new(rt),
        })
    }

    fn path(&self, name: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(name)
        } else {
            Path::from(format!("{}/{name}", self.prefix))
        }
    }

    fn run<T>(
        &self,
        f: impl std::future::Future<Output = object_store::Result<T>>,
    ) -> io::Result<T> {
        self.rt.block_on(f).map_err(io_error)
    }
}

impl Store for ObjectTier {
    fn describe(&self, name: &str) -> String {
        format!("{}/{name}", self.url.trim_end_matches('/'))
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let prefix = (!self.prefix.is_empty()).then(|| Path::from(self.prefix.as_str()));
        let listed = self.run(self.client.list_with_delimiter(prefix.as_ref()))?;
        Ok(listed
            .objects
            .into_iter()
            .filter_map(|o| o.location.filename().map(str::to_string))
            .filter(|n| n != MARKER)
            .collect())
    }

    fn open(&self, name: &str) -> io::Result<Box<dyn StoreFile>> {
        let path = self.path(name);
        let meta = self.run(self.client.head(&path))?;
        Ok(Box::new(ObjectFile {
            path,
            len: meta.size,
            client: self.client.clone(),
            rt: self.rt.clone(),
            sequential: AtomicBool::new(false),
            window: Mutex::default(),
        }))
    }

    fn create(&self, name: &str) -> io::Result<Box<dyn StoreWriter>> {
        let path = self.path(name);
        let upload = self.run(self.client.put_multipart(&path))?;
        Ok(Box::new(ObjectWriter {
            upload: Some(upload),
            part: Vec::with_capacity(PART),
            in_flight: VecDeque::new(),
            rt: self.rt.clone(),
        }))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        self.run(self.client.delete(&self.path(name)))
    }

    /// As `DirStore`'s: the marker's first `MARKER_MAX` bytes only, whatever its size.
    fn identity(&self) -> io::Result<Option<StoreId>> {
        let file = match Store::open(self, MARKER) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut text = vec![0u8; file.len().min(MARKER_MAX) as usize];
        file.read_exact_at(&mut text, 0)?;
        Ok(marker_identity(&text))
    }

    fn set_identity(&self, id: StoreId) -> io::Result<()> {
        let body = marker_text(Some(id));
        self.run(
            self.client
                .put(&self.path(MARKER), body.into_bytes().into()),
        )
        .map(drop)
    }
}

/// Bytes one GET fetches when a read of a file being read through (`advise_sequential`: a
/// restore's scan) asks for less: the scan reads a version in the stretches between the pages
/// newer versions supplied, often a few KiB each, and each request costs milliseconds (a
/// 128 MiB chain took 77 s to restore from Garage with a GET per stretch, docs/benchmarks.md).
/// Other reads (a version's header and index, which every drain round and catalog survey
/// reads) fetch [`META_WINDOW`].
const READ_WINDOW: u64 = 4 << 20;
/// Bytes one GET fetches for a smaller read outside a scan: reading a version's metadata takes
/// six reads or more (header twice, footer, region table, index, CRC table), each a request
/// of its own when fetched exactly, and requests, not bytes, cost the time: Garage here
/// answered each small GET in about 45 ms, and a restore from it spent 8 of its 8.4 s in 266
/// of them. The first and the last 256 KiB of a file hold all of an increment's metadata.
const META_WINDOW: u64 = 256 << 10;
/// Windows an object file keeps: one per reader thread of the scan.
const WINDOWS_KEPT: usize = 2;

struct ObjectFile {
    path: Path,
    len: u64,
    client: Arc<dyn ObjectStore>,
    rt: Arc<tokio::runtime::Runtime>,
    /// Set by `advise_sequential`: reads go through `window`.
    sequential: AtomicBool,
    /// The windows fetched last, oldest first: offset and bytes.
    window: Mutex<std::collections::VecDeque<(u64, Vec<u8>)>>,
}

impl ObjectFile {
    /// Bytes `range` of the object, exactly.
    fn get(&self, range: std::ops::Range<u64>) -> io::Result<Vec<u8>> {
        let want = (range.end - range.start) as usize;
        let bytes = self
            .rt
            .block_on(self.client.get_range(&self.path, range))
            .map_err(io_error)?;
        if bytes.len() != want {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(bytes.to_vec())
    }
}

impl ickpt_format::ReadAt for ObjectFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        if buf.is_empty() {
            return Ok(());
        }
        let sequential = self.sequential.load(Ordering::Relaxed);
        let window = if sequential { READ_WINDOW } else { META_WINDOW };
        if buf.len() as u64 >= window {
            buf.copy_from_slice(&self.get(offset..end)?);
            return Ok(());
        }
        let copied = |w: &(u64, Vec<u8>), buf: &mut [u8]| {
            let (at, b) = w;
            let inside = offset >= *at && end <= at + b.len() as u64;
            if inside {
                let from = (offset - at) as usize;
                buf.copy_from_slice(&b[from..from + buf.len()]);
            }
            inside
        };
        // Fetched with the lock held: the scan's second reader thread usually wants the same
        // window, and fetching it twice at once doubled a restore's time (7.9 s against 4.0 s,
        // docs/benchmarks.md); the two reader threads' windows both stay.
        let mut windows = self.window.lock().unwrap_or_else(|e| e.into_inner());
        if windows.iter().any(|w| copied(w, buf)) {
            return Ok(());
        }
        // A scan's from the read on: it reads front to back. Any other read's ending at the
        // file's end when near it: a version's metadata is its first and its last bytes.
        // (Windows aligned to 4 MiB made every read crossing a boundary fetch 8 MiB, half of
        // it again: 364 MiB fetched for 244 MiB of files, twice the time.)
        let at = if sequential {
            offset
        } else {
            offset.min(self.len.saturating_sub(window))
        };
        let stop = at.saturating_add(window).max(end).min(self.len);
        let fetched = (at, self.get(at..stop)?);
        copied(&fetched, buf);
        if windows.len() == WINDOWS_KEPT {
            windows.pop_front();
        }
        windows.push_back(fetched);
        Ok(())
    }

    /// The whole stretch in one read, skipped bytes included (one GET, or none when the
    /// window holds it): a request costs far more than the bytes of the short gaps the
    /// reader leaves (`Piece::Skip`).
    fn read_pieces_at(&self, pieces: &mut [Piece<'_>], offset: u64) -> io::Result<()> {
        let span: u64 = pieces.iter().map(|p| p.len() as u64).sum();
        let mut whole = vec![0u8; span as usize];
        self.read_exact_at(&mut whole, offset)?;
        let mut at = 0;
        for p in pieces {
            if let Piece::Keep(b) = p {
                b.copy_from_slice(&whole[at..at + b.len()]);
            }
            at += p.len();
        }
        Ok(())
    }
}

impl StoreFile for ObjectFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn advise_sequential(&self) {
        self.sequential.store(true, Ordering::Relaxed);
    }
}

/// An upload in parts of `PART` bytes, at most `IN_FLIGHT` sent at once. The upload stays
/// here until it completes: whatever fails before (a part, the last one included, or the
/// completion), `Drop` aborts it, so no unfinished upload is left on the server (except
/// when the server itself dies: a bucket lifecycle rule for incomplete uploads covers that).
struct ObjectWriter {
    upload: Option<Box<dyn MultipartUpload>>,
    /// The part being filled.
    part: Vec<u8>,
    in_flight: VecDeque<tokio::task::JoinHandle<object_store::Result<()>>>,
    rt: Arc<tokio::runtime::Runtime>,
}

/// Parts sent and not yet acknowledged, at most: memory stays bounded whatever the size.
const IN_FLIGHT: usize = 2;

impl ObjectWriter {
    /// Send the part filled so far.
    fn send_part(&mut self) -> io::Result<()> {
        while self.in_flight.len() >= IN_FLIGHT {
            self.wait_oldest()?;
        }
        let upload = self.upload.as_mut().expect("present until commit or drop");
        let part = std::mem::replace(&mut self.part, Vec::with_capacity(PART));
        let sent = upload.put_part(part.into());
        self.in_flight.push_back(self.rt.spawn(sent));
        Ok(())
    }

    fn wait_oldest(&mut self) -> io::Result<()> {
        if let Some(part) = self.in_flight.pop_front() {
            self.rt
                .block_on(part)
                .map_err(io::Error::other)?
                .map_err(io_error)?;
        }
        Ok(())
    }
}

impl StoreWriter for ObjectWriter {
    fn write_all(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = (PART - self.part.len()).min(buf.len());
            self.part.extend_from_slice(&buf[..n]);
            buf = &buf[n..];
            if self.part.len() == PART {
                self.send_part()?;
            }
        }
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> io::Result<()> {
        // The last part (S3 takes a short one last), then every part acknowledged, then the
        // completion; the upload is ours until it succeeded.
        if !self.part.is_empty() || self.in_flight.is_empty() {
            self.send_part()?;
        }
        while !self.in_flight.is_empty() {
            self.wait_oldest()?;
        }
        let upload = self.upload.as_mut().expect("present until commit or drop");
        self.rt.block_on(upload.complete()).map_err(io_error)?;
        self.upload = None;
        Ok(())
    }
}

impl Drop for ObjectWriter {
    fn drop(&mut self) {
        // Uncommitted: the parts sent so far are dropped, the object never appears.
        for part in self.in_flight.drain(..) {
            part.abort();
        }
        if let Some(mut upload) = self.upload.take() {
            let _ = self.rt.block_on(upload.abort());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_object_url;

    #[test]
    fn object_urls_split_into_bucket_and_prefix() {
        let ok = |u: &str| parse_object_url(u).unwrap();
        assert_eq!(ok("s3://ckpt"), ("ckpt".into(), "".into()));
        assert_eq!(ok("s3://ckpt/"), ("ckpt".into(), "".into()));
        assert_eq!(
            ok("s3://ckpt/job-1/rank-00000"),
            ("ckpt".into(), "job-1/rank-00000".into())
        );
        assert_eq!(ok("s3://ckpt/job//x/"), ("ckpt".into(), "job/x".into()));
        for bad in [
            "",
            "ckpt",
            "http://x/y",
            "s3://",
            "s3:///p",
            "s3://Upper/p",
            "s3://b/../p",
            "s3://b/./p",
        ] {
            assert!(parse_object_url(bad).is_err(), "{bad}");
        }
    }
}
