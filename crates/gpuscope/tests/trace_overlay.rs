//! A copy of a trace with events marked: marks land in `args` (made when missing or not
//! an object, replaced when already there), the other complete events lose their `args`
//! only when asked, every value keeps the text it was written with (times of 19 digits
//! included), the members around `traceEvents` are kept, a `.gz` target is gzip,
//! positions run on across a second `traceEvents`, added events go after the first
//! array's last (or alone in it), a source cut short is an error that leaves no file
//! behind, and the copy names its source first: a directory's listing leaves it out.

use std::io::Read;

use crate::common;

use gpuscope::formats::trace::overlay::{write_overlay, Overlay};
use gpuscope::model::trace::CounterSample;
use serde_json::value::RawValue;

const TRACE: &str = r#"{"schemaVersion": 1, "traceEvents": [
  {"ph": "X", "name": "a", "ts": 1712195495519689.047, "dur": 1.5, "args": {"x": 1e400, "Patterns": 0}},
  {"ph": "X", "name": "b", "ts": 2, "dur": 1},
  {"ph": "X", "name": "c", "ts": 3, "dur": 1, "args": "odd"},
  {"ph": "X", "name": "d\u00e9", "ts": 4, "dur": 1, "args": {"keep": [1, 2]}},
  {"ph": "i", "name": "[memory]", "ts": 5, "args": {"Bytes": 512}},
  17
], "deviceProperties": [{"id": 0}]}"#;

fn overlay(target_name: &str, drop_other_args: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("rank0.json");
    std::fs::write(&source, TRACE).unwrap();
    let patterns: Box<RawValue> = RawValue::from_string(r#"{"a|k": 2}"#.into()).unwrap();
    let overlay = Overlay {
        args: [0u32, 1, 2]
            .into_iter()
            .map(|p| (p, ("Patterns", &*patterns)))
            .collect(),
        drop_other_args,
        ..Overlay::default()
    };
    let target = dir.path().join(target_name);
    write_overlay(&source, &target, &overlay).unwrap();
    let bytes = std::fs::read(&target).unwrap();
    if target_name.ends_with(".gz") {
        let mut text = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .unwrap();
        text
    } else {
        String::from_utf8(bytes).unwrap()
    }
}

#[test]
fn marks_land_in_args_and_values_keep_their_text() {
    let text = overlay("overlaid_rank0.json", false);
    assert!(text.starts_with(r#"{"gpuscopeCopyOf":"rank0.json","schemaVersion":1,"traceEvents":["#));
    assert!(text.ends_with(r#"],"deviceProperties":[{"id": 0}]}"#));
    let events = &text[text.find('[').unwrap()..];
    assert!(events.contains(
        r#"{"ph":"X","name":"a","ts":1712195495519689.047,"dur":1.5,"args":{"x":1e400,"Patterns":{"a|k": 2}}}"#
    ));
    assert!(events.contains(r#""name":"b","ts":2,"dur":1,"args":{"Patterns":{"a|k": 2}}}"#));
    assert!(events.contains(r#""name":"c","ts":3,"dur":1,"args":{"Patterns":{"a|k": 2}}}"#));
    // Unmarked events and elements that are not events are copied as they were.
    assert!(events.contains(
        r#"{"ph": "X", "name": "d\u00e9", "ts": 4, "dur": 1, "args": {"keep": [1, 2]}}"#
    ));
    assert!(events.contains(r#"{"ph": "i", "name": "[memory]", "ts": 5, "args": {"Bytes": 512}}"#));
    assert!(events.contains(",17]"));
}

#[test]
fn other_complete_events_lose_their_args_when_asked() {
    let text = overlay("overlaid_rank0.json.gz", true);
    assert!(text.contains(r#"{"ph":"X","name":"d\u00e9","ts":4,"dur":1}"#));
    // Not complete: kept whole.
    assert!(text.contains(r#""args": {"Bytes": 512}"#));
    assert_eq!(text.matches("Patterns").count(), 3);
}

#[test]
fn positions_run_on_across_a_second_event_array() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("rank0.json");
    std::fs::write(
        &source,
        r#"{"traceEvents": [{"ph": "X", "name": "a"}], "traceEvents": [{"ph": "X", "name": "b"}]}"#,
    )
    .unwrap();
    let mark: Box<RawValue> = RawValue::from_string("1".into()).unwrap();
    let overlay = Overlay {
        args: [(1u32, ("Patterns", &*mark))].into_iter().collect(),
        drop_other_args: false,
        ..Overlay::default()
    };
    let target = dir.path().join("out.json");
    write_overlay(&source, &target, &overlay).unwrap();
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        r#"{"gpuscopeCopyOf":"rank0.json","traceEvents":[{"ph": "X", "name": "a"}],"traceEvents":[{"ph":"X","name":"b","args":{"Patterns":1}}]}"#
    );
}

#[test]
fn a_source_cut_short_is_an_error_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("rank0.json");
    std::fs::write(&source, &TRACE[..TRACE.len() / 2]).unwrap();
    let overlay = Overlay {
        args: Default::default(),
        drop_other_args: true,
        ..Overlay::default()
    };
    let target = dir.path().join("overlaid_rank0.json");
    let err = write_overlay(&source, &target, &overlay).unwrap_err();
    assert!(err.to_string().contains("truncated"), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "only the source is left");
}

#[test]
fn added_events_go_after_the_first_array_s_last() {
    let dir = tempfile::tempdir().unwrap();
    let append = [CounterSample {
        track: "Queue Length".into(),
        pid: 0,
        id: Some(7),
        at: 1_500,
        counter: "Queue Length",
        value: 2.0,
    }];
    let counter =
        r#"{"ph":"C","name":"Queue Length","pid":0,"ts":1.500,"id":7,"args":{"Queue Length":2}}"#;
    for (events, copied) in [
        (r#"[{"ph": "X"}]"#, format!(r#"[{{"ph": "X"}},{counter}]"#)),
        ("[ ]", format!("[{counter}]")),
    ] {
        let source = dir.path().join("rank0.json");
        let text = format!(r#"{{"traceEvents": {events}, "traceEvents": [1]}}"#);
        std::fs::write(&source, text).unwrap();
        let overlay = Overlay {
            append: &append,
            ..Overlay::default()
        };
        let target = dir.path().join("out.json");
        write_overlay(&source, &target, &overlay).unwrap();
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            format!(
                r#"{{"gpuscopeCopyOf":"rank0.json","traceEvents":{copied},"traceEvents":[1]}}"#
            )
        );
    }
}

#[test]
fn dropped_events_leave_no_gap_and_flows_take_their_tracks_as_written() {
    use gpuscope::model::trace::{FlowArrow, FlowEnd};
    const TRACKS: &str = r#"{"traceEvents": [
  {"ph": "X", "name": "a", "pid": 1, "tid": 2, "ts": 1, "dur": 1},
  {"ph": "X", "name": "b", "pid": 0, "tid": "stream 7", "ts": 2, "dur": 1},
  {"ph": "X", "name": "c", "pid": 1, "tid": 2, "ts": 3, "dur": 1, "args": {"x": 1}},
  {"ph": "X", "name": "no track", "ts": 4, "dur": 1}
]}"#;
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("rank0.json");
    std::fs::write(&source, TRACKS).unwrap();
    let arrow = |from: u32, to: u32| FlowArrow {
        name: "critical_path",
        cat: "critical_path_kernel_launch_delay",
        from: FlowEnd {
            event: from,
            at: 1_712_195_495_519_689_047,
        },
        to: FlowEnd {
            event: to,
            at: -1_500,
        },
        weight: 12_345,
        critical: true,
    };
    // The second arrow ends at an event without a track: left out.
    let flows = [arrow(0, 1), arrow(0, 3)];
    let one: Box<RawValue> = RawValue::from_string("1".into()).unwrap();
    let overlay = Overlay {
        args: [(2u32, ("critical", &*one))].into_iter().collect(),
        flows: &flows,
        drop: [0u32, 1].into_iter().collect(),
        ..Overlay::default()
    };
    let target = dir.path().join("out.json");
    write_overlay(&source, &target, &overlay).unwrap();
    let text = std::fs::read_to_string(&target).unwrap();
    let start = r#"{"ph":"s","id":0,"pid":1,"tid":2,"ts":1712195495519689.047,"cat":"critical_path_kernel_launch_delay","name":"critical_path","args":{"weight":12.345,"critical":true}}"#;
    let end = r#"{"ph":"f","id":0,"pid":0,"tid":"stream 7","ts":-1.500,"bp":"e","cat":"critical_path_kernel_launch_delay","name":"critical_path","args":{"weight":12.345,"critical":true}}"#;
    let expected = format!(
        r#"{{"gpuscopeCopyOf":"rank0.json","traceEvents":[{{"ph":"X","name":"c","pid":1,"tid":2,"ts":3,"dur":1,"args":{{"x":1,"critical":1}}}},{{"ph": "X", "name": "no track", "ts": 4, "dur": 1}},{start},{end}]}}"#
    );
    assert_eq!(text, expected);
    serde_json::from_str::<serde_json::Value>(&text).unwrap();
}

#[test]
fn every_event_dropped_leaves_an_array_of_the_added_ones() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("rank0.json");
    std::fs::write(&source, TRACE).unwrap();
    let overlay = Overlay {
        drop: (0u32..6).collect(),
        ..Overlay::default()
    };
    let target = dir.path().join("out.json");
    write_overlay(&source, &target, &overlay).unwrap();
    let text = std::fs::read_to_string(&target).unwrap();
    assert_eq!(
        text,
        r#"{"gpuscopeCopyOf":"rank0.json","schemaVersion":1,"traceEvents":[],"deviceProperties":[{"id": 0}]}"#
    );
}

#[test]
fn a_copy_names_its_source_and_a_directory_leaves_it_out() {
    use gpuscope::formats::trace::load::trace_files;
    use gpuscope::formats::trace::{load_traces, read_trace};

    let dir = tempfile::tempdir().unwrap();
    let real = common::shared_data("traces/sampled_rank1.json.gz");
    let source = dir.path().join("rank1.json.gz");
    std::fs::copy(&real, &source).unwrap();
    let copy = dir.path().join("rank1_with_counters.json.gz");
    write_overlay(&source, &copy, &Overlay::default()).unwrap();
    // A copy of the copy names the copy, once.
    let again = dir.path().join("overlaid_rank1_with_counters.json");
    write_overlay(&copy, &again, &Overlay::default()).unwrap();
    let text = std::fs::read_to_string(&again).unwrap();
    assert!(text.starts_with(r#"{"gpuscopeCopyOf":"rank1_with_counters.json.gz","#));
    assert_eq!(text.matches("gpuscopeCopyOf").count(), 1);

    let listing = trace_files(dir.path()).unwrap();
    let files: Vec<_> = listing.files.iter().map(|(p, _)| p.clone()).collect();
    assert_eq!(files, std::slice::from_ref(&source));
    assert_eq!(listing.copies.len(), 2, "{:?}", listing.copies);
    assert!(listing.copies.iter().any(|c| c.starts_with(&format!(
        "{}: a copy of rank1.json.gz that gpuscope wrote",
        copy.display()
    ))));
    let loaded = load_traces(dir.path(), &mut |_, _| {}).unwrap();
    assert_eq!(loaded.traces.len(), 1);
    assert_eq!(loaded.copies, listing.copies);
    assert!(loaded.skipped.is_empty());

    // Read by its own path, the copy is the trace it was copied from.
    let (a, b) = (
        read_trace(&source, &mut |_, _| {}).unwrap(),
        read_trace(&copy, &mut |_, _| {}).unwrap(),
    );
    assert_eq!((a.rank, a.events.len()), (b.rank, b.events.len()));
    assert_eq!(a.rank, 1);

    // Without its trace, the copy is the rank's trace; the copy of it is still left out.
    std::fs::remove_file(&source).unwrap();
    let listing = trace_files(dir.path()).unwrap();
    let files: Vec<_> = listing.files.iter().map(|(p, _)| p.clone()).collect();
    assert_eq!(files, std::slice::from_ref(&copy));
    assert_eq!(listing.copies.len(), 1, "{:?}", listing.copies);
    assert!(listing.copies[0].starts_with(&again.display().to_string()));

    // A copy that names itself (renamed to its trace's name) is a trace; two copies that
    // name each other leave nothing to read.
    let alone = tempfile::tempdir().unwrap();
    let renamed = alone.path().join("rank1_with_counters.json.gz");
    std::fs::copy(&copy, &renamed).unwrap();
    std::fs::rename(&renamed, alone.path().join("rank1.json.gz")).unwrap();
    let listing = trace_files(alone.path()).unwrap();
    assert_eq!((listing.files.len(), listing.copies.len()), (1, 0));
    let (a, b) = (alone.path().join("a.json"), alone.path().join("b.json"));
    std::fs::write(&a, r#"{"gpuscopeCopyOf": "b.json", "traceEvents": []}"#).unwrap();
    std::fs::write(&b, r#"{"gpuscopeCopyOf": "a.json", "traceEvents": []}"#).unwrap();
    std::fs::remove_file(alone.path().join("rank1.json.gz")).unwrap();
    let err = trace_files(alone.path()).unwrap_err().to_string();
    assert!(
        err.contains("only copies gpuscope wrote of one another"),
        "{err}"
    );
}
