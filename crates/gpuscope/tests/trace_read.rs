//! The streaming trace reader against a whole-document parse (serde_json's DOM) of every
//! real trace in `shared/data/traces`: the same events of each kind, the same rank, the
//! same metadata (where the rank came from, the time base, Kineto's log lines).

use crate::common;

use std::collections::BTreeMap;

use gpuscope::formats::trace::read_trace;
use gpuscope::model::trace::{Kind, RankFrom, Trace};

use common::TRACES;

fn dom(name: &str) -> serde_json::Value {
    serde_json::from_str(&common::trace_text(name)).unwrap()
}

/// Each shared trace: its name, as the reader reads it, and as the DOM has it.
fn read_with_dom() -> impl Iterator<Item = (&'static str, Trace, serde_json::Value)> {
    TRACES.iter().map(|&name| {
        let path = common::shared_data(&format!("traces/{name}"));
        let trace = read_trace(&path, &mut |_, _| {}).unwrap_or_else(|e| panic!("{name}: {e}"));
        (name, trace, dom(name))
    })
}

/// Events per kind as the DOM has them: complete events by category, `[memory]` instants.
fn dom_counts(doc: &serde_json::Value) -> BTreeMap<Kind, usize> {
    let mut counts = BTreeMap::new();
    for e in doc["traceEvents"].as_array().unwrap() {
        let kind = match e["ph"].as_str() {
            Some("X") => Kind::of_category(e["cat"].as_str().unwrap_or("")),
            Some("i") if e["name"] == "[memory]" => Kind::Memory,
            _ => continue,
        };
        *counts.entry(kind).or_default() += 1;
    }
    counts
}

#[test]
fn every_shared_trace_reads_like_its_whole_document() {
    for (name, trace, doc) in read_with_dom() {
        let mut counts = BTreeMap::new();
        for k in &trace.events.kind {
            *counts.entry(*k).or_default() += 1;
        }
        assert_eq!(counts, dom_counts(&doc), "{name}");
        assert!(trace.dropped.is_empty(), "{name}: {:?}", trace.dropped);
        let rank = doc["distributedInfo"]["rank"].as_u64().unwrap_or(0) as u32;
        assert_eq!(trace.rank, rank, "{name}");
    }
}

#[test]
fn kernel_times_are_nanoseconds_of_the_microsecond_fields() {
    let name = "v100_rank0_ns_resolution.json.gz";
    let trace = read_trace(
        &common::shared_data(&format!("traces/{name}")),
        &mut |_, _| {},
    )
    .unwrap();
    let doc = dom(name);
    let first = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["cat"] == "kernel")
        .unwrap();
    let i = trace
        .events
        .kind
        .iter()
        .position(|k| *k == Kind::Kernel)
        .unwrap();
    let want_dur = (first["dur"].as_f64().unwrap() * 1000.0).round() as i64;
    assert_eq!(trace.events.dur[i], want_dur);
    assert_eq!(
        trace.events.stream[i],
        first["args"]["stream"].as_i64().unwrap()
    );
    assert_eq!(
        trace.names.get(trace.events.name[i]),
        first["name"].as_str().unwrap()
    );
}

/// A JSON decimal of microseconds as nanoseconds, by integer arithmetic on all its digits
/// (rounded half up): the oracle for the reader's conversion.
fn decimal_ns(text: &str) -> i128 {
    let (negative, digits) = text
        .strip_prefix('-')
        .map_or((false, text), |rest| (true, rest));
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    assert!(!text.contains(['e', 'E']), "{text}: an exponent");
    let all: i128 = format!("{whole}{fraction}").parse().unwrap();
    let places = fraction.len() as u32;
    let ns = if places <= 3 {
        all * 10i128.pow(3 - places)
    } else {
        let unit = 10i128.pow(places - 3);
        (all + unit / 2) / unit
    };
    if negative {
        -ns
    } else {
        ns
    }
}

#[test]
fn nanosecond_timestamps_are_kept_to_the_nanosecond() {
    // Its kernels start at 1.7e15 µs with three decimals: an f64 holds only quarters of a µs.
    let name = "v100_rank0_ns_resolution.json.gz";
    let trace = read_trace(
        &common::shared_data(&format!("traces/{name}")),
        &mut |_, _| {},
    )
    .unwrap();
    let text = common::trace_text(name);
    type Raw = Box<serde_json::value::RawValue>;
    let doc: BTreeMap<String, Raw> = serde_json::from_str(&text).unwrap();
    let events: Vec<BTreeMap<String, Raw>> =
        serde_json::from_str(doc["traceEvents"].get()).unwrap();
    let want: Vec<(i128, i128)> = events
        .iter()
        .filter(|e| e.get("ph").map(|p| p.get()) == Some(r#""X""#))
        .filter(|e| e.get("cat").map(|c| c.get()) == Some(r#""kernel""#))
        .map(|e| (decimal_ns(e["ts"].get()), decimal_ns(e["dur"].get())))
        .collect();
    let got: Vec<(i128, i128)> = (0..trace.events.kind.len())
        .filter(|&i| trace.events.kind[i] == Kind::Kernel)
        .map(|i| (trace.events.ts[i].into(), trace.events.dur[i].into()))
        .collect();
    assert!(want.len() > 1000, "{} kernels", want.len());
    let sub_quarter = want.iter().filter(|(ts, _)| ts % 250 != 0).count();
    assert!(
        sub_quarter > want.len() / 2,
        "{sub_quarter} of {}",
        want.len()
    );
    assert_eq!(got, want);
}

#[test]
fn metadata_is_kept_as_the_document_has_it() {
    let mut with_log = 0;
    for (name, trace, doc) in read_with_dom() {
        let from_metadata = doc["distributedInfo"]["rank"].is_u64();
        // `sampled_rank0` has its rank in both; `resnet50_*`, `triton_example`, ... in neither.
        let want = if from_metadata {
            RankFrom::Metadata
        } else if name.contains("rank") {
            RankFrom::FileName
        } else {
            RankFrom::Default
        };
        assert_eq!(trace.rank_from, want, "{name}");
        assert_eq!(
            trace.base_time_ns,
            doc["baseTimeNanoseconds"].as_i64().unwrap_or(0),
            "{name}"
        );
        let lines = |key: &str| -> Vec<String> {
            doc[key].as_array().map_or_else(Vec::new, |a| {
                a.iter().map(|l| l.as_str().unwrap().to_owned()).collect()
            })
        };
        let mut log = lines("WARNING");
        log.extend(lines("ERROR"));
        log.extend(
            lines("INFO")
                .into_iter()
                .filter(|l| l.contains("Record counts:")),
        );
        log.sort();
        let mut got = trace.kineto_log.clone();
        got.sort();
        assert_eq!(got, log, "{name}");
        with_log += usize::from(!got.is_empty());
    }
    // Five traces keep Kineto's INFO log; each has one line of record counts.
    assert_eq!(with_log, 5);
    let v100 = read_trace(
        &common::shared_data("traces/v100_rank0_ns_resolution.json.gz"),
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(v100.kineto_log.len(), 1);
    assert!(v100.kineto_log[0].contains("Out-of-range = 3829, Blocklisted runtime = 56517"));
}

#[test]
fn a_rank_comes_from_the_file_name_only_without_distributed_info() {
    let dir = tempfile::tempdir().unwrap();
    // The ResNet-50 trace has no distributedInfo; sampled_rank1 says rank 1 in both.
    for (link, target) in [
        (
            "trainer_rank-3.json.gz",
            "resnet50_v100_memory_workers0.json.gz",
        ),
        ("plain.json.gz", "resnet50_v100_memory_workers0.json.gz"),
        ("rank7.json.gz", "sampled_rank1.json.gz"),
    ] {
        std::os::unix::fs::symlink(
            common::shared_data(&format!("traces/{target}")),
            dir.path().join(link),
        )
        .unwrap();
    }
    let read = |name: &str| read_trace(&dir.path().join(name), &mut |_, _| {}).unwrap();
    let t = read("trainer_rank-3.json.gz");
    assert_eq!((t.rank, t.rank_from), (3, RankFrom::FileName));
    let t = read("plain.json.gz");
    assert_eq!((t.rank, t.rank_from), (0, RankFrom::Default));
    let t = read("rank7.json.gz");
    assert_eq!((t.rank, t.rank_from), (1, RankFrom::Metadata));
}

#[test]
fn a_directory_read_stops_when_its_consumer_does() {
    use gpuscope::formats::trace::load::{map_traces, trace_files};
    use std::ops::ControlFlow;
    use std::sync::atomic::{AtomicUsize, Ordering};

    // Many ranks of one real trace, so that a read that went on would read far more
    // than the window of files read ahead (twice the threads).
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let dir = tempfile::tempdir().unwrap();
    let trace = common::shared_data("traces/amd_mi250_rocm.json.gz");
    for rank in 0..8 * threads {
        std::os::unix::fs::symlink(&trace, dir.path().join(format!("rank{rank}.json.gz"))).unwrap();
    }
    let files = trace_files(dir.path()).unwrap().files;
    let (read, mut handed) = (AtomicUsize::new(0), Vec::new());
    let map = |t: gpuscope::Result<gpuscope::model::trace::TraceFile>| {
        read.fetch_add(1, Ordering::Relaxed);
        t.unwrap().path
    };
    map_traces(&files, &map, &mut |_, path| {
        handed.push(path);
        ControlFlow::Break(())
    });
    assert_eq!(handed, [files[0].0.clone()]);
    let read = read.into_inner();
    assert!(read <= 2 * threads, "{read} files read of {}", files.len());

    // Going on to the end hands every file, in order.
    let mut all = Vec::new();
    map_traces(&files, &|t| t.unwrap().path, &mut |_, path| {
        all.push(path);
        ControlFlow::Continue(())
    });
    let want: Vec<_> = files.iter().map(|(p, _)| p.clone()).collect();
    assert_eq!(all, want);
}

#[test]
fn range_profiler_counters_are_kept_as_the_document_has_them() {
    let name = "cupti_profiler_counters.json.gz";
    let doc = dom(name);
    let expected: Vec<BTreeMap<String, f64>> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "cuda_profiler_range")
        .map(|e| {
            let args = e["args"].as_object().unwrap();
            args.iter()
                .map(|(k, v)| (k.clone(), v.as_f64().unwrap()))
                .collect()
        })
        .collect();
    let trace = read_trace(
        &common::shared_data(&format!("traces/{name}")),
        &mut |_, _| {},
    )
    .unwrap();
    let got: Vec<BTreeMap<String, f64>> = trace
        .counters
        .iter()
        .map(|(_, counters)| {
            counters
                .iter()
                .map(|&(n, v)| (trace.names.get(n).to_owned(), v))
                .collect()
        })
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(got, expected);
    assert_eq!(trace.counter_ranges, expected.len() as u64);
}

#[test]
fn event_waits_are_read_as_the_dom_has_them() {
    let mut seen = 0;
    for (name, trace, doc) in read_with_dom() {
        let expected: Vec<(i64, i64)> = doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == "cuda_sync")
            .map(|e| &e["args"])
            .filter(|a| a["wait_on_stream"].as_i64().is_some_and(|s| s >= 0))
            .map(|a| {
                let corr = a["wait_on_cuda_event_record_corr_id"].as_i64().unwrap();
                (a["wait_on_stream"].as_i64().unwrap(), corr)
            })
            .collect();
        let read: Vec<(i64, i64)> = trace
            .event_waits
            .iter()
            .map(|(i, w)| {
                assert_eq!(trace.events.kind[*i], Kind::Sync);
                (w.on_stream, w.record_correlation)
            })
            .collect();
        assert_eq!(read, expected, "{name}");
        seen += read.len();
    }
    // AlexNet has 20, event_sync_multi_stream 3.
    assert_eq!(seen, 23);
}
