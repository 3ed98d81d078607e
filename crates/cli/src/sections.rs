//! `ickpt sections --dir D`: the section saves a store holds (CAPE's discontinuous
//! checkpoints, docs/sections.md), each read and checked as a restart's
//! `ickpt_section_start` would: section, order, name, saves, bytes, words, status. Exit 1
//! when one is damaged (a restart would refuse it).

use crate::{human, open_store, CmdResult, StoreArgs};
use ickpt::read::section_saves::{load, survey};
use serde_json::json;
use std::process::ExitCode;

pub fn run(s: &StoreArgs) -> CmdResult {
    crate::job::one_store_only(s)?;
    let store = open_store(s)?;
    let (sections, stale) = survey(&*store)?;
    let mut rows = Vec::new();
    let mut out = Vec::new();
    let mut damaged = 0;
    for f in sections.values().flatten() {
        let object = f.object();
        let bytes = store.open(&object).map(|h| h.len()).unwrap_or(0);
        let (words, regions, status) = match load(&*store, f) {
            Ok(d) => (
                Some(d.regions.iter().map(|r| r.words.len() as u64).sum::<u64>()),
                Some(d.regions.len()),
                "ok".to_string(),
            ),
            Err(e) => {
                damaged += 1;
                (None, None, e.to_string())
            }
        };
        rows.push(vec![
            f.section.to_string(),
            f.seq.to_string(),
            f.name.clone(),
            f.saves.to_string(),
            human::bytes(bytes),
            words.map_or("-".into(), |w| w.to_string()),
            status.clone(),
        ]);
        out.push(json!({
            "section": f.section, "seq": f.seq, "name": f.name, "saves": f.saves,
            "file": store.describe(&object), "bytes": bytes, "words": words,
            "regions": regions, "ok": status == "ok", "problem": (status != "ok").then_some(&status),
        }));
    }
    let stale: Vec<String> = stale.iter().map(|f| store.describe(&f.object())).collect();
    if s.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "dir": store.describe(""), "saves": out, "superseded": stale,
            }))?
        );
    } else if rows.is_empty() {
        println!("{}: no section saves", store.describe(""));
    } else {
        human::table(
            &[
                "SECTION", "SEQ", "NAME", "SAVES", "BYTES", "WORDS", "STATUS",
            ],
            &rows,
        );
        for f in &stale {
            println!("{f}: superseded by a later save of its name (a crash left it; the next run removes it)");
        }
    }
    Ok(if damaged > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
