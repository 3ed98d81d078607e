use crate::{human, open_store, CmdResult, StoreArgs};
use ickpt::catalog;
use ickpt::format::{backend_name, CommitStats};
use serde_json::{json, Value};
use std::process::ExitCode;

/// The `stats` object of `ls --json` and `inspect --json`. `after` is this version's AFTER
/// count, which only the next version records (as its `after_previous`).
pub fn stats_json(s: &CommitStats, after: Option<u64>) -> Value {
    json!({
        "mode": s.mode.as_str(), "flush_order": s.flush_order.as_str(),
        "backend": backend_name(s.backend), "commit_ns": s.commit_ns, "wait_ns": s.wait_ns,
        "peak_cow_bytes": s.peak_cow_bytes, "cow_limit_bytes": s.cow_limit_bytes,
        "cow": s.cow_pages, "wait": s.wait_pages, "avoided": s.avoided_pages, "after": after,
    })
}

pub fn run(s: &StoreArgs) -> CmdResult {
    let store = open_store(s)?;
    let mut rows = Vec::new();
    let mut items = Vec::new();
    // (version, its stats) of every readable version, to fill in `after` once the next is read.
    let mut stats = Vec::new();
    for v in catalog::versions(&store)? {
        match catalog::open(&store, v) {
            Ok(ov) => {
                let h = &ov.meta.header;
                let bytes = ov.file.len();
                let st = ov.meta.stats;
                stats.push((v, items.len(), st));
                items.push(json!({
                    "version": v, "kind": h.kind.as_str(), "parent": h.parent,
                    "chain_depth": h.chain_depth, "regions": h.region_count,
                    "pages": ov.meta.footer.page_count, "bytes": bytes,
                    "created_unix_ns": h.created_unix_ns,
                    "stats": st.map(|s| stats_json(&s, None)), "ok": true,
                }));
                let dash = || "-".to_string();
                rows.push(vec![
                    v.to_string(),
                    h.kind.as_str().into(),
                    if h.parent == 0 {
                        "-".into()
                    } else {
                        h.parent.to_string()
                    },
                    h.region_count.to_string(),
                    ov.meta.footer.page_count.to_string(),
                    human::bytes(bytes),
                    st.map_or_else(dash, |s| s.mode.as_str().into()),
                    st.map_or_else(dash, |s| s.wait_pages.to_string()),
                    st.map_or_else(dash, |s| human::nanos(s.commit_ns)),
                    human::utc(h.created_unix_ns),
                ]);
            }
            Err(e) => {
                items.push(json!({"version": v, "ok": false, "error": e.to_string()}));
                rows.push(vec![v.to_string(), "DAMAGED".into(), e.to_string()]);
            }
        }
    }
    for w in stats.windows(2) {
        if let [(v, item, Some(_)), (next, _, Some(n))] = w {
            if *next == v + 1 {
                items[*item]["stats"]["after"] = json!(n.after_previous);
            }
        }
    }
    if s.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "dir": s.dir, "versions": items }))?
        );
    } else if rows.is_empty() {
        println!("no versions in {}", s.dir.display());
    } else {
        human::table(
            &[
                "VERSION", "KIND", "PARENT", "REGIONS", "PAGES", "BYTES", "MODE", "WAITS",
                "COMMIT", "CREATED",
            ],
            &rows,
        );
    }
    Ok(ExitCode::SUCCESS)
}
