use crate::{after_of, human, open_store, pick_version, CmdResult, StoreArgs};
use ickpt::read::catalog::Catalog;
use serde_json::json;
use std::process::ExitCode;

pub fn run(s: &StoreArgs, version: Option<u64>) -> CmdResult {
    crate::job::one_store_only(s)?;
    let store = open_store(s)?;
    let catalog = Catalog::new(&store)?;
    let v = pick_version(&catalog, version)?;
    let ov = catalog.open(v)?;
    let m = &ov.meta;
    let h = &m.header;
    let chain: Result<Vec<u64>, _> = catalog
        .chain(v)
        .map(|c| c.iter().map(|o| o.version).collect());
    let after = m.stats.and_then(|_| after_of(&catalog, v));
    let mut stored = vec![0u64; m.regions.len()];
    for r in &m.runs {
        stored[r.region_index as usize] += r.page_count as u64;
    }
    let frames = |c: ickpt::format::Codec| m.frames.iter().filter(|f| f.frame.codec == c).count();
    let codecs = [
        ickpt::format::Codec::Zstd,
        ickpt::format::Codec::Raw,
        ickpt::format::Codec::Zero,
    ];
    if s.json {
        let regions: Vec<_> = m
            .regions
            .iter()
            .zip(&stored)
            .map(|(r, n)| {
                json!({"id": r.id, "born": r.born, "length": r.length,
                       "page_offset": r.page_offset, "pages": r.page_count(h.page_size),
                       "pages_stored": n})
            })
            .collect();
        let out = json!({
            "version": v, "file": ickpt::store::Store::describe(&store, &ickpt::store::version_name(v)),
            "format_version": h.format_version, "kind": h.kind.as_str(), "parent": h.parent,
            "tag": h.tag,
            "chain_depth": h.chain_depth, "page_size": h.page_size,
            "created_unix_ns": h.created_unix_ns, "bytes": ov.bytes(),
            "pages": m.footer.page_count, "runs": m.footer.run_count,
            // Format 6: page bytes as the application had them and as the file stores them.
            "page_data": {
                "raw_bytes": m.data_bytes(), "stored_bytes": m.stored_bytes(),
                "zero_pages": m.zero_pages(),
                "frames": codecs.iter().map(|&c| (c.as_str().to_string(), json!(frames(c)))).collect::<serde_json::Map<_, _>>(),
            },
            "meta_crc": format!("{:08x}", m.footer.meta_crc),
            "store_id": h.store_id.map(|id| ickpt::store::StoreId(id).to_hex()),
            "parent_meta_crc": (h.format_version >= 3 && h.parent != 0)
                .then(|| format!("{:08x}", h.parent_meta_crc)),
            "regions": regions,
            "stats": m.stats.map(|st| {
                let mut j = crate::ls::stats_json(&st, after);
                j["after_previous"] = json!(st.after_previous);
                let p = &st.phases;
                // Recorded from format 4 on (attempts 0: not recorded).
                j["phases_ns"] = (p.attempts > 0).then(|| json!({
                    "collect": p.collect_ns, "copy": p.copy_ns, "crc": p.crc_ns,
                    "release": p.release_ns, "write": p.write_ns,
                }))
                .into();
                j["attempts"] = (p.attempts > 0).then_some(p.attempts).into();
                j
            }),
            "chain": chain.as_ref().ok(),
            "chain_error": chain.as_ref().err().map(|e| e.to_string()),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("version      {v}");
    println!(
        "file         {}",
        ickpt::store::Store::describe(&store, &ickpt::store::version_name(v))
    );
    println!("format       {}", h.format_version);
    println!("kind         {}", h.kind.as_str());
    println!(
        "parent       {}",
        if h.parent == 0 {
            "-".into()
        } else {
            h.parent.to_string()
        }
    );
    println!("chain depth  {}", h.chain_depth);
    println!("tag          {}", tag_text(h.tag, h.format_version));
    match h.store_id {
        Some(id) => println!("store        {}", ickpt::store::StoreId(id)),
        None => println!("store        - (format {} records none)", h.format_version),
    }
    println!("created      {}", human::utc(h.created_unix_ns));
    println!("page size    {}", h.page_size);
    println!(
        "size         {} ({} pages in {} runs)",
        human::bytes(ov.bytes()),
        m.footer.page_count,
        m.footer.run_count
    );
    println!(
        "page data    {} raw, {} stored{}",
        human::bytes(m.data_bytes()),
        human::bytes(m.stored_bytes()),
        if m.frames.is_empty() {
            " (no frames: every page as it is)".to_string()
        } else {
            format!(
                " ({:.1}%): {} zero pages without data; frames {}",
                100.0 * m.stored_bytes() as f64 / m.data_bytes().max(1) as f64,
                m.zero_pages(),
                codecs
                    .iter()
                    .map(|&c| format!("{} {}", frames(c), c.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    match &chain {
        Ok(c) => println!(
            "chain        {}",
            c.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(" <- ")
        ),
        Err(e) => println!("chain        BROKEN: {e}"),
    }
    println!();
    match &m.stats {
        None => println!(
            "commit       not recorded (format version {} predates commit stats)",
            h.format_version
        ),
        Some(st) => {
            println!(
                "commit       {}, flush order {}, backend {}",
                st.mode.as_str(),
                st.flush_order.as_str(),
                ickpt::format::backend_name(st.backend)
            );
            println!(
                "commit time  {} (request to last page stored)",
                human::nanos(st.commit_ns)
            );
            let p = &st.phases;
            if p.attempts == 0 {
                println!(
                    "phases       not recorded (format version {} predates them)",
                    h.format_version
                );
            } else {
                println!(
                    "phases       collect {}, copy {}, crc {}, release {}, write {} (then fsync and rename, not recorded in the file)",
                    human::nanos(p.collect_ns),
                    human::nanos(p.copy_ns),
                    human::nanos(p.crc_ns),
                    human::nanos(p.release_ns),
                    human::nanos(p.write_ns)
                );
                if p.attempts > 1 {
                    println!(
                        "attempts     {} (a write reached a page the commit had collected without a fence: taken again with fences)",
                        p.attempts
                    );
                }
            }
            println!(
                "wait time    {} (application threads blocked on this commit's pages)",
                human::nanos(st.wait_ns)
            );
            println!(
                "during       {} COW, {} WAIT, {} AVOIDED (first writes during the commit)",
                st.cow_pages, st.wait_pages, st.avoided_pages
            );
            println!(
                "peak CoW     {} of {}",
                human::bytes(st.peak_cow_bytes),
                human::bytes(st.cow_limit_bytes)
            );
            println!(
                "before       {} (first writes after the previous version committed, before this checkpoint was requested: the previous version's AFTER)",
                st.after_previous
            );
            match after {
                Some(a) => println!(
                    "after        {a} (first writes after this commit, before the next checkpoint was requested: this version's AFTER)"
                ),
                None => println!(
                    "after        - (no next version committed right after this one records it)"
                ),
            }
            println!(
                "precopy      {}",
                precopy_line(&st.precopy, h.format_version)
            );
        }
    }
    println!();
    let rows: Vec<Vec<String>> = m
        .regions
        .iter()
        .zip(&stored)
        .map(|(r, n)| {
            vec![
                r.id.to_string(),
                human::bytes(r.length),
                r.page_count(h.page_size).to_string(),
                n.to_string(),
                r.born.to_string(),
                r.page_offset.to_string(),
            ]
        })
        .collect();
    human::table(
        &["REGION", "LENGTH", "PAGES", "STORED", "BORN", "PAGE-OFFSET"],
        &rows,
    );
    Ok(ExitCode::SUCCESS)
}

/// A version's tag for people: the number, or why there is none (0 is what a checkpoint
/// without a tag records, and all a file older than format 5 can say).
pub fn tag_text(tag: u64, format_version: u16) -> String {
    match (tag, format_version) {
        (0, f) if f < 5 => format!("- (format {f} records none)"),
        (0, _) => "- (none given)".into(),
        (t, _) => t.to_string(),
    }
}

/// What pre-copy did for the version, in words (format 7 on).
fn precopy_line(p: &ickpt::format::StoredPrecopy, format_version: u16) -> String {
    if format_version < 7 {
        return format!("not recorded (format version {format_version} predates it)");
    }
    let name = ickpt::format::PRECOPY_NAMES
        .get(p.strategy as usize)
        .copied()
        .unwrap_or("unknown");
    if p.strategy == 0 {
        return "off".into();
    }
    let rate = if p.pages > 0 {
        format!(", {:.1}%", 100.0 * p.conflicts as f64 / p.pages as f64)
    } else {
        String::new()
    };
    format!(
        "{name}: {} pages written before the checkpoint call, {} of them written again (conflicts{rate}); {} page copies, {} written twice",
        p.pages,
        p.conflicts,
        p.copies,
        human::bytes(p.rewritten_bytes)
    )
}
