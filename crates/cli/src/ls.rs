use crate::{human, open_store, CmdResult, StoreArgs};
use ickpt::catalog;
use serde_json::json;
use std::process::ExitCode;

pub fn run(s: &StoreArgs) -> CmdResult {
    let store = open_store(s)?;
    let mut rows = Vec::new();
    let mut items = Vec::new();
    for v in catalog::versions(&store)? {
        match catalog::open(&store, v) {
            Ok(ov) => {
                let h = &ov.meta.header;
                let bytes = ov.file.len();
                items.push(json!({
                    "version": v, "kind": h.kind.as_str(), "parent": h.parent,
                    "chain_depth": h.chain_depth, "regions": h.region_count,
                    "pages": ov.meta.footer.page_count, "bytes": bytes,
                    "created_unix_ns": h.created_unix_ns, "ok": true,
                }));
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
                    human::utc(h.created_unix_ns),
                ]);
            }
            Err(e) => {
                items.push(json!({"version": v, "ok": false, "error": e.to_string()}));
                rows.push(vec![v.to_string(), "DAMAGED".into(), e.to_string()]);
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
                "VERSION", "KIND", "PARENT", "REGIONS", "PAGES", "BYTES", "CREATED",
            ],
            &rows,
        );
    }
    Ok(ExitCode::SUCCESS)
}
