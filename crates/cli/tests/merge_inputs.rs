//! `ickpt merge A B -o OUT` never replaces one of its inputs: OUT naming A or B (spelt
//! otherwise, or through a hard link) is refused with both named, and nothing is written.

use ickpt::format::{DeltaFile, RegionDelta};
use std::path::Path;

mod common;
use common::{ickpt, scratch, text};

fn delta(words: Vec<(u64, [u8; 4])>) -> Vec<u8> {
    DeltaFile {
        page_size: 4096,
        saves: 1,
        regions: vec![RegionDelta {
            id: 3,
            length: 100,
            words,
        }],
    }
    .encode()
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let dir = scratch("merge-inputs");
    std::fs::create_dir_all(&*dir).unwrap();
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::fs::write(&a, delta(vec![(0, [1; 4])])).unwrap();
    std::fs::write(&b, delta(vec![(8, [2; 4])])).unwrap();
    let hard = dir.join("hard");
    std::fs::hard_link(&b, &hard).unwrap();
    let before = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let p = |x: &Path| x.to_str().unwrap().to_string();
    let dotted = format!("{}/./a", dir.display());
    for (out, which) in [
        (p(&a), "first"),
        (dotted, "first"),
        (p(&b), "second"),
        (p(&hard), "second"),
    ] {
        let r = ickpt(&["merge", &p(&a), &p(&b), "-o", &out]);
        assert!(!r.status.success(), "-o {out}: merged");
        let t = text(&r);
        assert!(
            t.contains(&format!("the output is the {which} input")) && t.contains(&out),
            "-o {out}: {t}"
        );
    }
    assert_eq!(
        (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap()),
        before
    );
    assert_eq!(
        std::fs::read_dir(&*dir).unwrap().count(),
        3,
        "nothing written"
    );
}
