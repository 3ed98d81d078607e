//! Synchronous checkpoint: collect the epoch's dirty pages, write them as one version file.

use super::{CheckpointInfo, Engine, Phases, State};
use crate::error::{Error, Result};
use crate::policy::{self, Head};
use crate::store::{version_name, StoreWriter};
use crate::sys::{mem, page_size};
use crate::track::bitmap;
use ickpt_format::{Kind, RegionEntry, VersionLayout};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Size of the staging buffer between memory and the store: large enough that a store write
/// is one big sequential call, small enough to stay in cache-friendly territory.
const STAGING_BYTES: usize = 8 << 20;

/// The pages of one region this checkpoint writes.
struct Plan {
    id: u64,
    bits: Vec<u64>,
    /// Write every page (full version, or a region not yet stored whole).
    whole: bool,
}

impl Engine {
    /// Write a new version holding every page written since the previous one (or all pages,
    /// every `full_every`-th time). On error nothing committed is touched and the pages stay
    /// dirty for the next attempt.
    pub fn checkpoint(&self) -> Result<CheckpointInfo> {
        let started = Instant::now();
        let mut st = self.lock();
        if !self.tracker.handler_intact()? {
            return Err(Error::HandlerReplaced);
        }
        let version = st.next_version;
        let kind = policy::next_kind(st.head, self.cfg.full_every);
        let (parent, depth) = match (kind, st.head) {
            (Kind::Incremental, Some(h)) => (h.version, h.chain_depth + 1),
            _ => (0, 0),
        };

        let mut phases = Phases::default();
        let t = Instant::now();
        let mut plans = Vec::with_capacity(st.regions.len());
        for (id, slot) in &st.regions {
            let mut bits = Vec::new();
            if let Err(e) = self.tracker.collect(&slot.tr, &mut bits) {
                restore_dirty(&st, &plans);
                return Err(e.into());
            }
            let whole = kind == Kind::Full || slot.born.is_none();
            plans.push(Plan {
                id: *id,
                bits,
                whole,
            });
        }
        phases.collect = t.elapsed();

        match self.write_version(&mut st, version, kind, parent, depth, &plans, &mut phases) {
            Ok((pages, bytes)) => {
                for p in &plans {
                    st.regions
                        .get_mut(&p.id)
                        .expect("planned")
                        .born
                        .get_or_insert(version);
                }
                st.head = Some(Head {
                    version,
                    chain_depth: depth,
                });
                st.next_version = version + 1;
                if kind == Kind::Full {
                    // Under the engine lock, so no restore can move the head into a chain
                    // being deleted. Failing leaves extra old versions, never a broken one.
                    let t = Instant::now();
                    let _ = self.collect_garbage_locked();
                    phases.gc = t.elapsed();
                }
                let info = CheckpointInfo {
                    version,
                    kind,
                    parent,
                    pages,
                    bytes,
                    duration: started.elapsed(),
                    phases,
                };
                st.stats.record_checkpoint(&info);
                Ok(info)
            }
            Err(e) => {
                restore_dirty(&st, &plans);
                st.stats.failed_checkpoint();
                // Never reuse the number: a commit can fail after its rename (directory
                // fsync), leaving the version listed. Gaps in numbering are harmless.
                st.next_version = version + 1;
                Err(e)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write_version(
        &self,
        st: &mut State,
        version: u64,
        kind: Kind,
        parent: u64,
        depth: u32,
        plans: &[Plan],
        phases: &mut Phases,
    ) -> Result<(u64, u64)> {
        let ps = page_size();
        let name = version_name(version);
        let file = self.store.describe(&name);
        let entries = plans
            .iter()
            .map(|p| {
                let slot = &st.regions[&p.id];
                RegionEntry {
                    id: p.id,
                    born: slot.born.unwrap_or(version),
                    length: slot.tr.user_len as u64,
                    page_offset: slot.tr.page_offset() as u32,
                }
            })
            .collect();
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let mut layout =
            VersionLayout::new(kind, ps as u32, version, parent, depth, created, entries);
        let mut w = self
            .store
            .create(&name)
            .map_err(|e| Error::io(&file, "create", e))?;
        let io = |e| Error::io(&file, "write", e);
        let mut bytes = 0;
        flush(&mut *w, &layout.prefix(), &mut bytes, phases).map_err(io)?;

        let mut staging = std::mem::take(&mut st.staging);
        staging.resize(STAGING_BYTES.max(ps), 0);
        let mut fill = 0usize;
        let cap_pages = staging.len() / ps;
        let result = (|| {
            for (index, p) in plans.iter().enumerate() {
                let tr = &st.regions[&p.id].tr;
                let all;
                let bits = if p.whole {
                    all = bitmap::all_set(tr.npages);
                    &all
                } else {
                    &p.bits
                };
                for (first, count) in bitmap::runs(bits, tr.npages) {
                    let mut done = 0;
                    while done < count {
                        if fill == cap_pages * ps {
                            flush(&mut *w, &staging[..fill], &mut bytes, phases).map_err(io)?;
                            fill = 0;
                        }
                        let t = Instant::now();
                        let n = (count - done).min(cap_pages - fill / ps);
                        let page = first + done;
                        let dst = &mut staging[fill..fill + n * ps];
                        // SAFETY: the region's covering pages are mapped and readable while
                        // it is tracked (protect's contract), and we hold the engine lock so
                        // it cannot be unprotected meanwhile.
                        unsafe { mem::copy_out(dst, tr.page_addr(page)) };
                        for (i, data) in dst.chunks_exact(ps).enumerate() {
                            layout.push_page(
                                index as u32,
                                (page + i) as u64,
                                ickpt_format::crc(data),
                            );
                        }
                        fill += n * ps;
                        done += n;
                        phases.copy += t.elapsed();
                    }
                }
            }
            flush(&mut *w, &staging[..fill], &mut bytes, phases).map_err(io)?;
            let trailer = layout.trailer();
            flush(&mut *w, &trailer, &mut bytes, phases).map_err(io)?;
            Ok::<_, Error>(())
        })();
        st.staging = staging;
        result?;
        let t = Instant::now();
        w.commit().map_err(|e| Error::io(&file, "commit", e))?;
        phases.commit = t.elapsed();
        Ok((layout.page_count(), bytes))
    }
}

fn flush(
    w: &mut dyn StoreWriter,
    buf: &[u8],
    bytes: &mut u64,
    phases: &mut Phases,
) -> std::io::Result<()> {
    if !buf.is_empty() {
        let t = Instant::now();
        w.write_all(buf)?;
        phases.write += t.elapsed();
        *bytes += buf.len() as u64;
    }
    Ok(())
}

/// Put collected dirty bits back after a failed checkpoint.
fn restore_dirty(st: &State, plans: &[Plan]) {
    for p in plans {
        st.regions[&p.id].tr.dirty.merge(&p.bits);
    }
}

impl super::Stats {
    fn failed_checkpoint(&mut self) {
        self.failed_checkpoints += 1;
    }

    fn record_checkpoint(&mut self, info: &CheckpointInfo) {
        self.checkpoints += 1;
        match info.kind {
            Kind::Full => self.full_checkpoints += 1,
            Kind::Incremental => self.incremental_checkpoints += 1,
        }
        self.pages_written += info.pages;
        self.bytes_written += info.bytes;
        self.checkpoint_time += info.duration;
        self.last_checkpoint = Some(info.clone());
    }
}
