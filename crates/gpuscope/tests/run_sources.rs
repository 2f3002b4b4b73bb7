//! What a run directory holds, source by source, on the real H200 runs: the sources each
//! one is known to have (docs/run-dir.md's files, as `ls` shows them in
//! ../shared/data/gpu-h200), and the ones it lacks, said with what would have written them.

use std::path::Path;

use gpuscope::formats::runlog::sources::run_sources;
use gpuscope::model::sources::{Source, Sources};

use crate::common;

fn sources_of(run: &str) -> Sources {
    run_sources(&common::shared_data(&format!("gpu-h200/{run}"))).unwrap()
}

/// The file names of `source`.
fn names(s: &Sources, source: Source) -> Vec<String> {
    s.files(source)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

fn absent(s: &Sources) -> Vec<Source> {
    s.absent.iter().map(|a| a.source).collect()
}

#[test]
fn lm_clean_has_memory_a_trace_a_snapshot_with_its_oom_report_and_samples() {
    let s = sources_of("lm_clean");
    assert_eq!(names(&s, Source::Memory), ["memory.jsonl"]);
    assert_eq!(names(&s, Source::Trace), ["1795675943334.pt.trace.json.gz"]);
    assert_eq!(
        names(&s, Source::Snapshot),
        ["iter30.pickle", "oom.20261126_065229.txt"]
    );
    assert_eq!(names(&s, Source::Gpu), ["gpu.jsonl"]);
    assert_eq!(absent(&s), [Source::Nonfinite, Source::Nsys]);
}

#[test]
fn lm_leak_nan_has_its_nonfinite_events_and_report() {
    let s = sources_of("lm_leak_nan");
    assert_eq!(
        names(&s, Source::Nonfinite),
        ["nonfinite.iter70.txt", "nonfinite.jsonl"]
    );
    assert_eq!(
        absent(&s),
        [Source::Trace, Source::Snapshot, Source::Gpu, Source::Nsys]
    );
}

/// A TensorBoard directory given itself (`gpuscope report RUN/tensorboard`): its event
/// files are the memory records, as the report reads them, not absent.
#[test]
fn a_tensorboard_directory_is_its_own_memory_source() {
    let s = sources_of("lm_leak_nan/tensorboard");
    assert_eq!(names(&s, Source::Memory), ["tensorboard"]);
    assert!(!absent(&s).contains(&Source::Memory), "{:?}", absent(&s));
}

#[test]
fn a_run_with_records_only_says_what_would_have_written_the_rest() {
    let s = sources_of("hf");
    assert_eq!(names(&s, Source::Memory), ["memory.jsonl"]);
    assert_eq!(s.found.len(), 1);
    let gpu = s.absent.iter().find(|a| a.source == Source::Gpu).unwrap();
    assert!(
        gpu.written_by.contains("gpuscope run"),
        "{}",
        gpu.written_by
    );
    let trace = s.absent.iter().find(|a| a.source == Source::Trace).unwrap();
    assert!(
        trace.written_by.contains("gpuscope.profile"),
        "{}",
        trace.written_by
    );
}

#[test]
fn memory_from_tensorboard_alone_is_the_tensorboard_directory() {
    let dir = tempfile::tempdir().unwrap();
    let events = common::shared_data("tfevents");
    let tb = dir.path().join("tensorboard");
    std::fs::create_dir(&tb).unwrap();
    for entry in std::fs::read_dir(events).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().contains("tfevents") {
            std::fs::copy(&path, tb.join(path.file_name().unwrap())).unwrap();
            break;
        }
    }
    let s = run_sources(dir.path()).unwrap();
    assert_eq!(s.files(Source::Memory), [tb.as_path()]);
}

#[test]
fn an_empty_directory_has_every_source_absent_and_a_file_is_not_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let s = run_sources(dir.path()).unwrap();
    assert!(s.found.is_empty());
    assert_eq!(absent(&s), Source::ALL);
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "").unwrap();
    let e = run_sources(&file).unwrap_err().to_string();
    assert!(e.contains("not a run directory"), "{e}");
    assert!(run_sources(Path::new("/nonexistent/run")).is_err());
}

#[test]
fn sources_serialise_by_their_words() {
    let s = sources_of("lm_leak_nan");
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["found"][0]["source"], "memory");
    assert_eq!(json["absent"][0]["source"], "trace");
}
