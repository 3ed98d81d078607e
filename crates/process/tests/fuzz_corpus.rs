//! Every input of the `process_record` fuzz target's corpus (`fuzz/corpus/process_record/`),
//! replayed through its body on the stable toolchain, as `make test` does for the core's
//! targets. `ICKPT_BLESS_CORPUS=1` writes the seed (the sample record) again.

mod common;

use std::path::Path;

fn corpus() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/process_record")
}

#[test]
fn the_corpus_decodes_or_fails_cleanly() {
    let dir = corpus();
    if std::env::var_os("ICKPT_BLESS_CORPUS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        let seed = ickpt_process::encode(&common::sample()).unwrap();
        std::fs::write(dir.join("sample"), seed).unwrap();
    }
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("the corpus is checked in") {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        ickpt_process::fuzz_target(&bytes);
        n += 1;
    }
    assert!(n > 0, "no input in {}", dir.display());
}
