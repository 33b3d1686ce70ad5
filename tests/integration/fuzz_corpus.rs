//! Replays the committed fuzz corpus (fuzz/corpus/<target>/*, seeds and every input the
//! fuzzers kept or crashed on) through the same checks the `cargo fuzz` targets run
//! (src/fuzzing.rs), so a regression shows up in a plain `cargo test`.

use crate::common;

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut n = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let data = std::fs::read(&path).unwrap();
        let result = std::panic::catch_unwind(|| check(&data));
        assert!(result.is_ok(), "{} fails its fuzz check", path.display());
        n += 1;
    }
    n
}

#[test]
fn query_corpus_replays_cleanly() {
    let _module = common::module(module_path!());
    let n = replay("query", clusterset_dns::fuzzing::query);
    assert!(n >= 300, "only {n} query inputs");
}

#[test]
fn objects_corpus_replays_cleanly() {
    let _module = common::module(module_path!());
    let n = replay("objects", clusterset_dns::fuzzing::objects);
    assert!(n >= 3, "only {n} object inputs");
}

#[test]
fn frame_corpus_replays_cleanly() {
    let _module = common::module(module_path!());
    let n = replay("frame", clusterset_dns::fuzzing::frame);
    assert!(n >= 8, "only {n} frame inputs");
}
