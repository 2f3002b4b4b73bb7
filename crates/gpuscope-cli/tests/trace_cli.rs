//! `gpuscope trace` as a user runs it: on the real GPU traces of shared/data/traces (checked
//! against Holistic Trace Analysis' figures in hta_reference.json), on a directory of rank
//! traces, and on damaged input (tests/trace_corpus/, one small file per case): one
//! `error:` line and exit 2 when nothing can be used, the bad events counted when the rest
//! can, never a panic.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use common::{stderr_of, stdout_of};
use serde_json::Value;

use crate::common;

fn shared(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

fn traces_dir() -> PathBuf {
    shared("traces")
}

fn corpus(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/trace_corpus")
        .join(name)
}

/// Every shared trace (`*.json.gz`), by file name.
fn shared_traces() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(traces_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json.gz"))
        .collect();
    names.sort();
    assert!(names.len() >= 13, "shared traces missing: {names:?}");
    names
}

/// Runs `gpuscope trace ARGS...` in `dir` (when given) to completion.
fn trace_in<I, S>(dir: Option<&Path>, args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::cargo_bin("gpuscope").unwrap();
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    cmd.arg("trace").args(args).output().unwrap()
}

fn trace<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    trace_in(None, args)
}

fn assert_no_panic(out: &Output, what: &str) {
    let err = stderr_of(out);
    assert!(
        !err.contains("panicked")
            && !err.contains("RUST_BACKTRACE")
            && out.status.code() != Some(101),
        "{what}: panicked (exit {:?}):\n{err}",
        out.status.code()
    );
}

/// Exit 0, no panic; the stdout.
fn success(out: &Output, what: &str) -> String {
    assert_no_panic(out, what);
    assert!(
        out.status.success(),
        "{what}: exit {:?}\n{}",
        out.status.code(),
        stderr_of(out)
    );
    stdout_of(out)
}

/// Exit 0, no panic; the JSON document.
fn json_doc(out: &Output, what: &str) -> Value {
    let text = success(out, what);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}):\n{text}"))
}

/// The failure of a file that holds nothing usable: exit 2, nothing on stdout, exactly one
/// stderr line, `error: <path>: ...`, which says what is wrong with one of `hints`
/// (case-insensitive; the wording may change, the gist may not).
fn assert_fails_cleanly(out: &Output, file: &Path, hints: &[&str]) {
    let what = file.display().to_string();
    assert_no_panic(out, &what);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{what}: stderr:\n{}",
        stderr_of(out)
    );
    assert!(
        out.stdout.is_empty(),
        "{what}: stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = stderr_of(out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: not one line:\n{err}");
    let name = file.file_name().unwrap().to_string_lossy();
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(name.as_ref()),
        "{what}: {err}"
    );
    let line = lines[0].to_lowercase();
    assert!(
        hints.iter().any(|h| line.contains(&h.to_lowercase())),
        "{what}: none of {hints:?} in {err}"
    );
}

fn num(v: &Value, what: &str) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("{what} is not a number: {v}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

// ---------------------------------------------------------------------------------------
// Damaged input
// ---------------------------------------------------------------------------------------

/// Words that say a file ends too soon.
const CUT: &[&str] = &["truncated", "ends", "end of"];
/// Words that say a file is not JSON.
const NOT_JSON: &[&str] = &["not a valid", "invalid", "expected", "not json", "binary"];

/// Files with nothing usable in them, and words of which the error line must have one.
const UNUSABLE_FILES: [(&str, &[&str]); 6] = [
    ("truncated.json", CUT),
    ("invalid.json", NOT_JSON),
    ("no_trace_events.json", &["traceEvents"]),
    ("trace_events_not_array.json", &["array", "traceEvents"]),
    ("empty.json", &["empty", "truncated", "ends", "end of"]),
    ("binary.json", NOT_JSON),
];

#[test]
fn files_with_nothing_usable_are_one_error_line_and_exit_2() {
    for (name, hints) in UNUSABLE_FILES {
        let file = corpus(name);
        assert!(file.is_file(), "{}", file.display());
        for format in ["text", "json"] {
            let out = trace([file.as_os_str(), "--format".as_ref(), format.as_ref()]);
            assert_fails_cleanly(&out, &file, hints);
        }
        let out = trace([file.as_os_str(), "--hta-compat".as_ref()]);
        assert_fails_cleanly(&out, &file, hints);
    }
}

#[test]
fn a_truncated_gzip_is_one_error_line_and_exit_2() {
    let whole = std::fs::read(traces_dir().join("sampled_rank0.json.gz")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Inside the gzip header, inside the deflate stream, and inside the 8-byte trailer
    // (the JSON is complete there, the checksum and length are not).
    let n = whole.len();
    for cut in [2, 10, 20, 1000, n / 2, n - 8, n - 4, n - 1] {
        let file = dir
            .path()
            .join(format!("sampled_rank0_cut_at_{cut}.json.gz"));
        std::fs::write(&file, &whole[..cut]).unwrap();
        for format in ["text", "json"] {
            let out = trace([file.as_os_str(), "--format".as_ref(), format.as_ref()]);
            assert_fails_cleanly(&out, &file, CUT);
        }
    }
}

/// Files with unusable events among usable ones: the count and a word of the reason.
const FILES_WITH_BAD_EVENTS: [(&str, u64, &str); 5] = [
    ("missing_ts.json", 2, "ts"),
    ("missing_dur.json", 1, "dur"),
    ("missing_ph.json", 1, "ph"),
    ("negative_duration.json", 2, "negative"),
    ("unknown_phase.json", 2, "phase"),
];

/// What the three good events of every corpus file add up to: kernels at 100–110 and
/// 130–140 µs, a copy at 150–155 µs.
fn assert_good_events_analysed(rank: &Value, what: &str) {
    let t = &rank["temporal"];
    let figures = [
        ("kernel_time_us", 55.0),
        ("idle_time_us", 30.0),
        ("compute_time_us", 20.0),
        ("non_compute_time_us", 5.0),
    ];
    for (key, want) in figures {
        assert_eq!(num(&t[key], key), want, "{what}: {key} in {t}");
    }
    assert_eq!(rank["gpu_activity"], true, "{what}");
}

#[test]
fn unusable_events_are_counted_and_the_rest_is_analysed() {
    for (name, count, word) in FILES_WITH_BAD_EVENTS {
        let file = corpus(name);
        // Text: one "N events skipped: <why>" line.
        let text = success(&trace([&file]), name);
        let skipped: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("events skipped:"))
            .collect();
        assert_eq!(skipped.len(), 1, "{name}:\n{text}");
        let line = skipped[0].trim();
        assert!(
            line.starts_with(&format!("{count} events skipped: ")) && line.contains(word),
            "{name}: {line:?}"
        );
        assert!(text.contains("GPU time"), "{name}:\n{text}");
        // JSON: `dropped` is [[why, count]], the good events are all there.
        let doc = json_doc(
            &trace([file.as_os_str(), "--format".as_ref(), "json".as_ref()]),
            name,
        );
        let rank = &doc["ranks"][0];
        let dropped = rank["dropped"].as_array().unwrap();
        assert_eq!(dropped.len(), 1, "{name}: {dropped:?}");
        let why = dropped[0][0].as_str().unwrap();
        assert!(why.contains(word), "{name}: {why}");
        assert!(line.ends_with(why), "{name}: text {line:?}, JSON {why:?}");
        assert_eq!(dropped[0][1].as_u64(), Some(count), "{name}");
        assert_eq!(rank["events"], 3, "{name}");
        assert_good_events_analysed(rank, name);
    }
}

#[test]
fn integers_beyond_64_bits_in_args_and_ids_are_not_fatal() {
    // A CPU op and a kernel whose pid, tid, stream, device, correlation, External id and
    // Bytes are 123456789012345678901234567890, 1e30, -1.2e29 or 2^64: nothing the
    // breakdown needs is lost, the kernel overlaps a good one.
    let file = corpus("huge_integers_in_args.json");
    for format in ["text", "json"] {
        let out = trace([file.as_os_str(), "--format".as_ref(), format.as_ref()]);
        success(&out, "huge_integers_in_args.json");
    }
    let doc = json_doc(
        &trace([file.as_os_str(), "--format".as_ref(), "json".as_ref()]),
        "huge args",
    );
    let rank = &doc["ranks"][0];
    assert_eq!(rank["events"], 5);
    assert_eq!(rank["dropped"], serde_json::json!([]));
    assert_good_events_analysed(rank, "huge_integers_in_args.json");
}

// ---------------------------------------------------------------------------------------
// The JSON contract and the figures, on the real traces
// ---------------------------------------------------------------------------------------

#[test]
fn json_follows_the_contract() {
    let file = traces_dir().join("sampled_rank0.json.gz");
    let doc = json_doc(
        &trace([file.as_os_str(), "--format".as_ref(), "json".as_ref()]),
        "sampled_rank0",
    );
    assert_eq!(doc["schema"], "gpuscope.trace/1");
    assert_eq!(doc["clock"], "exact");
    let ranks = doc["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 1);
    let r = &ranks[0];
    assert_eq!(r["rank"], 0);
    assert_eq!(r["gpu_activity"], true);
    assert!(r["dropped"].is_array());
    for key in [
        "kernel_time_us",
        "idle_time_us",
        "compute_time_us",
        "non_compute_time_us",
    ] {
        assert!(num(&r["temporal"][key], key) >= 0.0, "{key}");
    }
    let types = r["kernel_types"].as_array().unwrap();
    assert!(!types.is_empty());
    for k in types {
        assert!(k["kernel_type"].is_string(), "{k}");
        assert!(num(&k["sum_us"], "sum_us") > 0.0, "{k}");
        assert!(num(&k["percentage"], "percentage") > 0.0, "{k}");
    }
    let top = r["top_kernels"].as_array().unwrap();
    assert_eq!(top.len(), 11, "10 by name, then others");
    for k in top {
        assert!(k["name"].is_string(), "{k}");
        assert!(k["count"].as_u64().unwrap() >= 1, "{k}");
        for key in ["sum_us", "mean_us", "min_us", "max_us", "stddev_us"] {
            num(&k[key], key);
        }
    }
    assert_eq!(top[10]["name"], "others");
    // The full kernel name, templates and parameters included, is in the JSON.
    assert!(top.iter().any(|k| k["name"]
        .as_str()
        .unwrap()
        .starts_with("void split_embedding_backward_codegen")));
}

/// Our figure agrees with HTA's: within 0.5 % of HTA's or 1 µs.
fn agrees(ours: f64, hta: f64) -> bool {
    (ours - hta).abs() <= (0.005 * hta.abs()).max(1.0)
}

#[test]
fn hta_compat_agrees_with_hta_on_every_trace_it_analysed() {
    let text = std::fs::read_to_string(traces_dir().join("hta_reference.json")).unwrap();
    let reference: Value = serde_json::from_str(&text).unwrap();
    let mut compared = 0;
    for (name, entry) in reference.as_object().unwrap() {
        let Some(temporal) = entry["temporal"].as_array() else {
            continue;
        };
        if name == "triton_example.json.gz" {
            // HTA counts its launcher, a CPU op with a stream argument, as GPU work;
            // gpuscope does not (`a_cpu_op_with_a_stream_argument_is_not_gpu_work`).
            continue;
        }
        let file = traces_dir().join(name);
        let doc = json_doc(
            &trace([
                file.as_os_str(),
                "--format".as_ref(),
                "json".as_ref(),
                "--hta-compat".as_ref(),
            ]),
            name,
        );
        assert_eq!(doc["clock"], "hta-rounded", "{name}");
        let ranks = doc["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), temporal.len(), "{name}");
        for (ours, hta) in ranks.iter().zip(temporal) {
            assert_eq!(ours["rank"], hta["rank"], "{name}");
            for (key, hta_key) in [
                ("kernel_time_us", "kernel_time(us)"),
                ("idle_time_us", "idle_time(us)"),
                ("compute_time_us", "compute_time(us)"),
                ("non_compute_time_us", "non_compute_time(us)"),
            ] {
                let (a, b) = (
                    num(&ours["temporal"][key], key),
                    num(&hta[hta_key], hta_key),
                );
                assert!(
                    agrees(a, b),
                    "{name} rank {}: {key} {a} vs HTA {b}",
                    hta["rank"]
                );
            }
        }
        // The kernel-type breakdown too: every type HTA lists (a 0 µs row may be absent
        // from ours), and none that HTA does not.
        let ours: Vec<(String, f64)> = ranks[0]["kernel_types"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| {
                (
                    k["kernel_type"].as_str().unwrap().to_owned(),
                    num(&k["sum_us"], "sum_us"),
                )
            })
            .collect();
        let hta_types = entry["kernel_types"].as_array().unwrap();
        for k in hta_types {
            let label = k["kernel_type"].as_str().unwrap();
            let hta_sum = num(&k["sum"], "sum");
            let our_sum = ours
                .iter()
                .find(|(l, _)| l == label)
                .map_or(0.0, |(_, s)| *s);
            assert!(
                agrees(our_sum, hta_sum),
                "{name}: {label} {our_sum} vs HTA {hta_sum}"
            );
        }
        for (label, _) in &ours {
            assert!(
                hta_types.iter().any(|k| k["kernel_type"] == label.as_str()),
                "{name}: {label} not in HTA's breakdown"
            );
        }
        compared += 1;
    }
    // Eleven traces with HTA figures, the Triton one left out above.
    assert!(compared >= 10, "only {compared} traces had HTA figures");
}

#[test]
fn breakdowns_and_top_kernels_are_consistent_on_every_trace() {
    for name in shared_traces() {
        let file = traces_dir().join(&name);
        for clock in [None, Some("--hta-compat")] {
            let mut args: Vec<&OsStr> = vec![
                file.as_os_str(),
                "--format".as_ref(),
                "json".as_ref(),
                "--top".as_ref(),
                "3".as_ref(),
            ];
            args.extend(clock.map(OsStr::new));
            let doc = json_doc(&trace(&args), &name);
            let what = format!("{name} {clock:?}");
            for r in doc["ranks"].as_array().unwrap() {
                // The temporal figures partition the span.
                if let Some(t) = r["temporal"].as_object() {
                    let part = ["idle_time_us", "compute_time_us", "non_compute_time_us"]
                        .iter()
                        .map(|k| num(&t[*k], k))
                        .sum::<f64>();
                    let span = num(&t["kernel_time_us"], "kernel_time_us");
                    assert!(close(part, span), "{what}: {part} vs span {span}");
                    for k in ["idle_time_us", "compute_time_us", "non_compute_time_us"] {
                        assert!(num(&t[k], k) >= 0.0, "{what}: {k} {}", t[k]);
                    }
                }
                // Kernel-type shares add up to 100 %.
                let types = r["kernel_types"].as_array().unwrap();
                if !types.is_empty() {
                    let total: f64 = types.iter().map(|k| num(&k["percentage"], "%")).sum();
                    assert!((total - 100.0).abs() <= 0.1, "{what}: {total}");
                }
                // Top kernels: at most 3 by name and "others", largest first.
                let top = r["top_kernels"].as_array().unwrap();
                assert!(top.len() <= 4, "{what}: {} rows", top.len());
                assert_eq!(top.is_empty(), r["temporal"].is_null(), "{what}");
                for (i, k) in top.iter().enumerate() {
                    let others = k["name"] == "others";
                    assert!(!others || i == top.len() - 1, "{what}: others at {i}");
                    assert!(others || i < 3, "{what}: row {i} is {}", k["name"]);
                    if i > 0 && !others {
                        let (prev, sum) =
                            (num(&top[i - 1]["sum_us"], "sum"), num(&k["sum_us"], "sum"));
                        assert!(sum <= prev, "{what}: row {i} {sum} after {prev}");
                    }
                    let count = k["count"].as_u64().unwrap() as f64;
                    let (sum, mean) = (num(&k["sum_us"], "sum_us"), num(&k["mean_us"], "mean_us"));
                    let (min, max) = (num(&k["min_us"], "min_us"), num(&k["max_us"], "max_us"));
                    assert!(close(count * mean, sum), "{what}: {count} × {mean} ≠ {sum}");
                    assert!(min <= mean + 1e-9 && mean <= max + 1e-9, "{what}: {k}");
                    assert!(num(&k["stddev_us"], "stddev_us") >= 0.0, "{what}: {k}");
                }
            }
        }
    }
}

#[test]
fn successive_traces_of_one_rank_are_not_compared_as_ranks() {
    // What gpuscope.profile leaves in a one-process run's profiler_traces/: several
    // traces, all rank 0.
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "1795347918418.pt.trace.json.gz",
        "1795347918443.pt.trace.json.gz",
    ] {
        std::fs::copy(
            traces_dir().join("sampled_rank0.json.gz"),
            dir.path().join(name),
        )
        .unwrap();
    }
    let doc = json_doc(
        &trace([dir.path().as_os_str(), "--format".as_ref(), "json".as_ref()]),
        "one rank twice",
    );
    assert_eq!(doc["ranks"].as_array().map(Vec::len), Some(2));
    assert!(doc.get("rank_comparison").is_none(), "{doc}");
    // Two different ranks are compared.
    let dir = tempfile::tempdir().unwrap();
    for name in ["sampled_rank0.json.gz", "sampled_rank1.json.gz"] {
        std::fs::copy(traces_dir().join(name), dir.path().join(name)).unwrap();
    }
    let doc = json_doc(
        &trace([dir.path().as_os_str(), "--format".as_ref(), "json".as_ref()]),
        "two ranks",
    );
    assert!(doc.get("rank_comparison").is_some(), "two ranks, compared");
}

#[test]
fn copies_gpuscope_wrote_into_a_directory_are_left_out_and_named() {
    use gpuscope::formats::trace::overlay::{write_overlay, Overlay};
    // What TraceAnalysis.generate_trace_with_counters leaves beside a rank's trace.
    let dir = tempfile::tempdir().unwrap();
    for name in ["sampled_rank0.json.gz", "sampled_rank1.json.gz"] {
        std::fs::copy(traces_dir().join(name), dir.path().join(name)).unwrap();
    }
    let copy = dir.path().join("sampled_rank1_with_counters.json.gz");
    write_overlay(
        &dir.path().join("sampled_rank1.json.gz"),
        &copy,
        &Overlay::default(),
    )
    .unwrap();
    let said = format!(
        "left out {}: a copy of sampled_rank1.json.gz that gpuscope wrote",
        copy.display()
    );
    // Streamed rank by rank, and read whole (an export).
    let out = trace([dir.path().as_os_str(), "--format".as_ref(), "json".as_ref()]);
    let doc = json_doc(&out, "a directory with a copy");
    let ranks: Vec<&Value> = doc["ranks"].as_array().unwrap().iter().collect();
    assert_eq!(ranks.len(), 2, "{doc}");
    assert!(stderr_of(&out).contains(&said), "{}", stderr_of(&out));
    let tables = tempfile::tempdir().unwrap();
    let out = trace([
        dir.path().as_os_str(),
        "--export".as_ref(),
        "csv".as_ref(),
        "-o".as_ref(),
        tables.path().as_os_str(),
    ]);
    success(&out, "an export of a directory with a copy");
    assert!(stderr_of(&out).contains(&said), "{}", stderr_of(&out));
    // The tables are those of the two traces alone.
    let without = tempfile::tempdir().unwrap();
    for name in ["sampled_rank0.json.gz", "sampled_rank1.json.gz"] {
        std::os::unix::fs::symlink(dir.path().join(name), without.path().join(name)).unwrap();
    }
    let plain = tempfile::tempdir().unwrap();
    success(
        &trace([
            without.path().as_os_str(),
            "--export".as_ref(),
            "csv".as_ref(),
            "-o".as_ref(),
            plain.path().as_os_str(),
        ]),
        "an export of the traces alone",
    );
    for table in ["kernels.csv", "operators.csv"] {
        let (a, b) = (tables.path().join(table), plain.path().join(table));
        assert_eq!(
            std::fs::read(&a).unwrap(),
            std::fs::read(&b).unwrap(),
            "{table}"
        );
    }
    // Named on its own, the copy is a trace of rank 1.
    let doc = json_doc(
        &trace([copy.as_os_str(), "--format".as_ref(), "json".as_ref()]),
        "the copy itself",
    );
    assert_eq!(doc["ranks"][0]["rank"], 1, "{doc}");
}

#[test]
fn a_directory_is_every_rank_in_rank_order() {
    let dir = tempfile::tempdir().unwrap();
    // File names sort opposite to the ranks (which the traces' distributedInfo gives).
    std::fs::copy(
        traces_dir().join("sampled_rank1.json.gz"),
        dir.path().join("a_worker.pt.trace.json.gz"),
    )
    .unwrap();
    std::fs::copy(
        traces_dir().join("sampled_rank0.json.gz"),
        dir.path().join("b_worker.pt.trace.json.gz"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"model": "dlrm", "batch_size": 512}"#,
    )
    .unwrap();
    let out = trace([dir.path().as_os_str(), "--format".as_ref(), "json".as_ref()]);
    let doc = json_doc(&out, "directory");
    let ranks = doc["ranks"].as_array().unwrap();
    let order: Vec<&Value> = ranks.iter().map(|r| &r["rank"]).collect();
    assert_eq!(order, [0, 1]);
    assert!(ranks[0]["path"]
        .as_str()
        .unwrap()
        .ends_with("b_worker.pt.trace.json.gz"));
    let err = stderr_of(&out);
    let skipped: Vec<&str> = err.lines().filter(|l| l.contains("config.json")).collect();
    assert_eq!(skipped.len(), 1, "{err}");
    assert!(skipped[0].contains("skipped"), "{err}");
    // Each rank as it is on its own.
    for (r, name) in ranks
        .iter()
        .zip(["sampled_rank0.json.gz", "sampled_rank1.json.gz"])
    {
        let file = traces_dir().join(name);
        let alone = json_doc(
            &trace([file.as_os_str(), "--format".as_ref(), "json".as_ref()]),
            name,
        );
        assert_eq!(r["temporal"], alone["ranks"][0]["temporal"], "{name}");
        assert_eq!(r["top_kernels"], alone["ranks"][0]["top_kernels"], "{name}");
    }
    // Text: both ranks, in order.
    let text = success(&trace([dir.path()]), "directory, text");
    let heads: Vec<&str> = text.lines().filter(|l| l.starts_with("rank ")).collect();
    assert_eq!(heads.len(), 2, "{text}");
    assert!(
        heads[0].starts_with("rank 0 ") && heads[1].starts_with("rank 1 "),
        "{heads:?}"
    );
}

#[test]
fn a_cpu_only_trace_says_there_is_no_gpu_activity() {
    let file = traces_dir().join("cpu_only_rank34.json.gz");
    let text = success(&trace([&file]), "cpu_only text");
    assert!(text.contains("No GPU activity"), "{text}");
    let doc = json_doc(
        &trace([file.as_os_str(), "--format".as_ref(), "json".as_ref()]),
        "cpu_only json",
    );
    let ranks = doc["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 1);
    assert_eq!(ranks[0]["rank"], 34);
    assert!(ranks[0]["temporal"].is_null(), "{}", ranks[0]);
    assert_eq!(ranks[0]["gpu_activity"], false);
    assert_eq!(ranks[0]["top_kernels"], serde_json::json!([]));
}

#[test]
fn a_cupti_range_profiler_trace_has_gpu_time_and_says_what_its_times_are() {
    // HTA finds no GPU work here (it raised IndexError); its kernels have no stream.
    let file = traces_dir().join("cupti_profiler_counters.json.gz");
    let doc = json_doc(
        &trace([file.as_os_str(), "--format".as_ref(), "json".as_ref()]),
        "cupti json",
    );
    let r = &doc["ranks"][0];
    assert!(!r["temporal"].is_null(), "{r}");
    assert!(num(&r["temporal"]["kernel_time_us"], "kernel_time_us") > 0.0);
    assert!(r["counter_ranges"].as_u64().unwrap() > 0, "{r}");
    let text = success(&trace([&file]), "cupti text");
    assert!(text.contains("range profiler"), "{text}");
}

#[test]
fn text_of_every_trace_fits_80_columns() {
    // Run where the traces are, with relative names, as a user in that directory would:
    // the header line holds the path as given.
    let dir = traces_dir();
    for name in shared_traces() {
        let text = success(&trace_in(Some(&dir), [&name]), &name);
        // The trace health first, then the rank's header.
        let (health, rest) = text.split_once("\n\n").unwrap();
        assert!(health.starts_with("Trace health"), "{name}: {text}");
        assert!(rest.starts_with("rank "), "{name}: {text}");
        for line in text.lines() {
            let columns = line.chars().count();
            assert!(columns <= 80, "{name}: {columns} columns: {line:?}");
        }
    }
}

/// Traces linked into a directory are read like copies (the usual way to gather the ranks
/// of a job without copying them).
#[cfg(unix)]
#[test]
fn a_directory_of_symlinks_is_read() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["sampled_rank0.json.gz", "sampled_rank1.json.gz"] {
        std::os::unix::fs::symlink(traces_dir().join(name), dir.path().join(name)).unwrap();
    }
    let doc = json_doc(
        &trace([dir.path().as_os_str(), "--format".as_ref(), "json".as_ref()]),
        "links",
    );
    let order: Vec<&Value> = doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["rank"])
        .collect();
    assert_eq!(order, [0, 1]);
}

// ---------------------------------------------------------------------------------------
// Bugs these tests found (each failed before its fix).
// ---------------------------------------------------------------------------------------

mod found_bugs {
    use super::*;

    /// Was: a `ts` or `dur` beyond what fits in i64 nanoseconds (1e30, a 30-digit integer;
    /// anything from about 9.2e15 µs) panics the debug build ("attempt to multiply with
    /// overflow", trace/read.rs `ns`) and wraps silently in release (a 1e30 µs duration
    /// becomes -1 µs). Such an event should be counted as unusable, the rest analysed.
    #[test]
    fn timestamps_and_durations_beyond_64_bits_are_counted_not_fatal() {
        for (name, word) in [("huge_ts.json", "ts"), ("huge_dur.json", "dur")] {
            let file = corpus(name);
            let text = success(&trace([&file]), name);
            assert!(text.contains("2 events skipped"), "{name}:\n{text}");
            let doc = json_doc(
                &trace([file.as_os_str(), "--format".as_ref(), "json".as_ref()]),
                name,
            );
            let rank = &doc["ranks"][0];
            let dropped = rank["dropped"].as_array().unwrap();
            let total: u64 = dropped.iter().map(|d| d[1].as_u64().unwrap()).sum();
            assert_eq!(total, 2, "{name}: {dropped:?}");
            assert!(
                dropped
                    .iter()
                    .all(|d| d[0].as_str().unwrap().contains(word)),
                "{name}"
            );
            assert_good_events_analysed(rank, name);
        }
    }

    /// Was: ts + dur that overflows i64 ns (9e15 µs each) panics in debug
    /// (analysis/trace/scope.rs `interval`, "attempt to add with overflow") and gives a
    /// negative kernel time in release.
    #[test]
    fn an_event_ending_beyond_64_bits_is_counted_not_fatal() {
        let file = corpus("ts_plus_dur_overflow.json");
        let doc = json_doc(
            &trace([file.as_os_str(), "--format".as_ref(), "json".as_ref()]),
            "overflow",
        );
        let rank = &doc["ranks"][0];
        assert_eq!(rank["dropped"].as_array().unwrap().len(), 1, "{rank}");
        assert_good_events_analysed(rank, "ts_plus_dur_overflow.json");
    }

    /// Was: a file in which every event is unusable exits 0 and says "No GPU activity in
    /// this trace (0 events, all on the CPU)", which is not what it holds.
    #[test]
    fn a_file_of_unusable_events_only_is_an_error() {
        let file = corpus("all_events_unusable.json");
        assert_fails_cleanly(&trace([&file]), &file, &["events"]);
    }

    /// Was: an event whose `ph` is not a string (null, a number), or an element of
    /// traceEvents that is not an object, fails the whole file ("not a valid trace:
    /// invalid type: null, expected a phase letter") instead of being counted like an
    /// unknown phase.
    #[test]
    fn events_of_the_wrong_json_type_are_counted_not_fatal() {
        for name in ["phase_not_a_string.json", "event_not_an_object.json"] {
            let file = corpus(name);
            let doc = json_doc(
                &trace([file.as_os_str(), "--format".as_ref(), "json".as_ref()]),
                name,
            );
            let rank = &doc["ranks"][0];
            let dropped = rank["dropped"].as_array().unwrap();
            let total: u64 = dropped.iter().map(|d| d[1].as_u64().unwrap()).sum();
            assert!(total >= 2, "{name}: {dropped:?}");
            assert_good_events_analysed(rank, name);
        }
    }

    /// A Kineto trace of `rank` whose GPU work is `(category, name, stream, start in ns
    /// after 100 µs, duration in µs as written)`, and one cudaLaunchKernel call for the
    /// work of correlation 1. Times are printed to the nanosecond from a real trace's
    /// clock origin.
    fn short_work_trace(dir: &Path, rank: u32, work: &[(&str, &str, i64, i64, &str)]) {
        let ts = |ns: i64| {
            let at = 4_818_916_991_000_000 + ns;
            format!("{}.{:03}", at / 1000, at % 1000)
        };
        let mut events: Vec<String> = work
            .iter()
            .enumerate()
            .map(|(i, (cat, name, stream, start, dur))| {
                format!(
                    r#"{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": 0,
                        "tid": {stream}, "ts": {}, "dur": {dur},
                        "args": {{"stream": {stream}, "correlation": {}}}}}"#,
                    ts(*start),
                    i + 1
                )
            })
            .collect();
        events.push(format!(
            r#"{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                "tid": 1, "ts": {}, "dur": 0.6, "args": {{"correlation": 3}}}}"#,
            ts(105_100)
        ));
        let doc = format!(
            r#"{{"distributedInfo": {{"rank": {rank}}}, "traceEvents": [{}]}}"#,
            events.join(", ")
        );
        std::fs::write(dir.join(format!("worker{rank}.pt.trace.json")), doc).unwrap();
    }

    /// Two ranks of sub-microsecond kernels and memsets, as a torch.compile run on an H200
    /// has them. Rank 0, stream 7 (µs from 100; HTA's rounding after the arrow): gemm
    /// 0–5, memset 5.2–5.9 → 6–5, fill 6.3–6.97 → 7–6 (launched at 5.1–5.7 → 6–5),
    /// memset 7.1–7.84 → 8–7, gemm 8–12; stream 20: all-reduce 1–4, all-reduce 4.2–4.9
    /// → 5–4. Rank 1: memset 0–5, fill 5.3–5.98 → 6–5 (launched as on rank 0), memset
    /// 6.2–9.2 → 7–9; no communication.
    fn two_ranks_of_short_work(dir: &Path) {
        const ALL_REDUCE: &str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)";
        short_work_trace(
            dir,
            0,
            &[
                ("kernel", "gemm", 7, 100_000, "5.0"),
                ("gpu_memset", "Memset (Device)", 7, 105_200, "0.7"),
                ("kernel", "fill", 7, 106_300, "0.67"),
                ("gpu_memset", "Memset (Device)", 7, 107_100, "0.74"),
                ("kernel", "gemm", 7, 108_000, "4.0"),
                ("kernel", ALL_REDUCE, 20, 101_000, "3.0"),
                ("kernel", ALL_REDUCE, 20, 104_200, "0.7"),
            ],
        );
        short_work_trace(
            dir,
            1,
            &[
                ("gpu_memset", "Memset (Device)", 7, 100_000, "5.0"),
                ("gpu_memset", "Memset (Device)", 7, 106_200, "3.0"),
                ("kernel", "fill", 7, 105_300, "0.68"),
            ],
        );
    }

    /// Numbers in `text` (whitespace apart) that are negative or −0.
    fn negative_numbers(text: &str) -> Vec<&str> {
        text.split_whitespace()
            .map(|w| w.trim_end_matches([',', '%']))
            .filter(|w| w.parse::<f64>().is_ok_and(|x| x.is_sign_negative()))
            .collect()
    }

    /// Every number in `v` that is negative or −0, with where it is.
    fn negative_figures(v: &Value, at: &str, found: &mut Vec<String>) {
        match v {
            Value::Number(n) if n.as_f64().is_some_and(f64::is_sign_negative) => {
                found.push(format!("{at} = {n}"))
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    negative_figures(item, &format!("{at}[{i}]"), found);
                }
            }
            Value::Object(fields) => {
                for (k, item) in fields {
                    negative_figures(item, &format!("{at}.{k}"), found);
                }
            }
            _ => {}
        }
    }

    fn assert_figures(t: &Value, want: [f64; 7], what: &str) {
        let keys = [
            "kernel_time_us",
            "idle_time_us",
            "compute_time_us",
            "non_compute_time_us",
            "idle_time_percent",
            "compute_time_percent",
            "non_compute_time_percent",
        ];
        for (key, want) in keys.iter().zip(want) {
            let got = num(&t[*key], key);
            assert!(
                (got - want).abs() < 1e-9,
                "{what} {key}: {got}, by hand {want}"
            );
        }
    }

    /// Was: HTA's rounding gives a sub-microsecond memset a negative duration, which
    /// `--hta-compat` printed as a non-compute time of −3 µs and −0.006 % on an H200
    /// torch.compile trace (HTA itself fails an assertion there); and a rank without
    /// communication summed no kernel types to −0.0, printed "-0.0" in the ranks side by
    /// side. Now no figure is negative, the rank's notes say what was clamped, and the
    /// exact clock is right to the nanosecond.
    #[test]
    fn sub_microsecond_work_prints_no_negative_figure() {
        let dir = tempfile::tempdir().unwrap();
        two_ranks_of_short_work(dir.path());
        let json = |extra: &[&str]| {
            let mut args = vec![dir.path().as_os_str(), "--format".as_ref(), "json".as_ref()];
            args.extend(extra.iter().map(OsStr::new));
            json_doc(&trace(&args), &format!("json {extra:?}"))
        };
        for extra in [&[][..], &["--hta-compat"]] {
            let doc = json(extra);
            let mut found = Vec::new();
            negative_figures(&doc, "", &mut found);
            assert!(found.is_empty(), "{extra:?}: {found:?}");
            let mut args = vec![dir.path().as_os_str()];
            args.extend(extra.iter().map(OsStr::new));
            let text = success(&trace(&args), &format!("text {extra:?}"));
            assert!(negative_numbers(&text).is_empty(), "{extra:?}:\n{text}");
            let side_by_side = text.split("Ranks side by side").nth(1).unwrap();
            let rank1 = side_by_side
                .lines()
                .find(|l| l.trim().starts_with("1 "))
                .unwrap();
            assert!(
                rank1.contains(" 0.0 "),
                "{extra:?}: no communication: {rank1}"
            );
            let comm = &doc["rank_comparison"]["ranks"][1]["communication_us"];
            let zero = comm
                .as_f64()
                .is_some_and(|c| c == 0.0 && c.is_sign_positive());
            assert!(zero, "{comm}");
        }

        // HTA's figures, clamped: rank 0 spans 12 µs, busy 5 − 1 − 1 + 4 = 7 (the
        // second memset starts with the last gemm, which absorbs it; the short
        // all-reduces are inside the first gemm), compute 5 − 1 + 4 = 8, non-compute −1.
        // Rank 1 spans 9, busy 5 − 1 + 2 = 6, compute −1, non-compute 7.
        let doc = json(&["--hta-compat"]);
        let ranks = doc["ranks"].as_array().unwrap();
        let (r0, r1) = (&ranks[0], &ranks[1]);
        assert_figures(
            &r0["temporal"],
            [12.0, 5.0, 8.0, 0.0, 500.0 / 12.0, 800.0 / 12.0, 0.0],
            "hta rank 0",
        );
        assert_figures(
            &r1["temporal"],
            [9.0, 3.0, 0.0, 7.0, 300.0 / 9.0, 0.0, 700.0 / 9.0],
            "hta rank 1",
        );
        // Communication 3 − 1 = 2 µs, under computation 3: 150 %, at most 100.
        assert_eq!(num(&r0["comm_comp_overlap_percent"], "overlap"), 100.0);
        // The launch call and its work both round to −1 µs: 0; the wait 7 − 5 = 2.
        let launch = &r0["launches"];
        assert_eq!(num(&launch["cpu_duration"]["max_us"], "cpu"), 0.0);
        assert_eq!(num(&launch["gpu_duration"]["max_us"], "gpu"), 0.0);
        assert_eq!(num(&launch["launch_delay"]["max_us"], "delay"), 2.0);
        // Rank 0: two memsets, fill, an all-reduce and the launch call end before they
        // start; rank 1: fill and its launch call.
        for (r, n) in [(r0, "5 events"), (r1, "2 events")] {
            let notes = r["notes"].as_array().unwrap();
            assert_eq!(notes.len(), 1, "{notes:?}");
            let note = notes[0].as_str().unwrap();
            assert!(
                note.starts_with(&format!("{n} shorter than 1 µs")),
                "{note}"
            );
        }
        let text = success(
            &trace([dir.path().as_os_str(), "--hta-compat".as_ref()]),
            "hta text",
        );
        assert_eq!(text.matches("shorter than 1 µs").count(), 2, "{text}");
        assert!(text.contains("clamped at 0"), "{text}");
        let page = success(
            &trace([
                dir.path().as_os_str(),
                "--hta-compat".as_ref(),
                "--format".as_ref(),
                "html".as_ref(),
            ]),
            "hta html",
        );
        assert_eq!(page.matches("shorter than 1 µs").count(), 2, "{page}");

        // The exact clock, by hand. Rank 0: busy 5 + 0.7 + 0.67 + 0.74 + 4 = 11.11 of 12
        // (the all-reduces inside the first gemm), compute 5 + 0.67 + 4 = 9.67, the
        // memsets 1.44. Rank 1: busy 5 + 0.68 + 3 = 8.68 of 9.2, compute 0.68.
        let doc = json(&[]);
        let ranks = doc["ranks"].as_array().unwrap();
        let (r0, r1) = (&ranks[0], &ranks[1]);
        assert_figures(
            &r0["temporal"],
            [
                12.0,
                0.89,
                9.67,
                1.44,
                0.89 / 0.12,
                9.67 / 0.12,
                1.44 / 0.12,
            ],
            "exact rank 0",
        );
        assert_figures(
            &r1["temporal"],
            [
                9.2,
                0.52,
                0.68,
                8.0,
                0.52 / 0.092,
                0.68 / 0.092,
                8.0 / 0.092,
            ],
            "exact rank 1",
        );
        // All 3.7 µs of communication under the first gemm.
        assert!((num(&r0["comm_comp_overlap_percent"], "overlap") - 100.0).abs() < 1e-9);
        let types: Vec<(&str, f64)> = r0["kernel_types"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| (k["kernel_type"].as_str().unwrap(), num(&k["sum_us"], "sum")))
            .collect();
        let want = [
            ("COMPUTATION", 1.3 + 0.67 + 4.0),
            ("COMPUTATION overlapping COMMUNICATION", 3.7),
            ("MEMORY", 1.44),
        ];
        assert_eq!(types.len(), want.len(), "{types:?}");
        for ((label, got), (want_label, want)) in types.iter().zip(want) {
            assert!(
                *label == want_label && (got - want).abs() < 1e-9,
                "{types:?}"
            );
        }
        // Stream 7's gaps, 0.2 + 0.4 + 0.13 + 0.16, are kernel waits (fill's launch came
        // before the memset ahead of it ended); stream 20's is 0.2.
        let idle: Vec<(i64, f64, f64)> = r0["idle_by_stream"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["stream"].as_i64().unwrap(),
                    num(&s["host_wait_us"], "host"),
                    num(&s["kernel_wait_us"], "kernel"),
                )
            })
            .collect();
        assert_eq!(idle.len(), 2, "{idle:?}");
        for ((stream, host, kernel), want) in idle.iter().zip([(7, 0.89), (20, 0.2)]) {
            assert!(
                (*stream, *host) == (want.0, 0.0) && (kernel - want.1).abs() < 1e-9,
                "{idle:?}"
            );
        }
        for (key, want) in [
            ("cpu_duration", 0.6),
            ("gpu_duration", 0.67),
            ("launch_delay", 0.6),
        ] {
            let got = num(&r0["launches"][key]["mean_us"], key);
            assert!((got - want).abs() < 1e-9, "{key}: {got}");
        }
        assert!(r0["notes"].as_array().unwrap().is_empty(), "{r0}");
        assert!(r1["notes"].as_array().unwrap().is_empty(), "{r1}");
    }
}

#[test]
fn gpu_work_without_a_stream_is_stream_none() {
    // CUPTI's range profiler records kernels without a stream.
    let out = trace([traces_dir().join("cupti_profiler_counters.json.gz")]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = stdout_of(&out);
    assert!(!text.contains(&i64::MIN.to_string()), "{text}");
    let idle = text.split("Idle time by stream").nth(1).unwrap();
    assert!(
        idle.lines().any(|l| l.trim_start().starts_with("none ")),
        "{idle}"
    );
}

#[test]
fn a_handful_of_launches_makes_no_launch_bound_verdict() {
    let rank = |name: &str| -> Value {
        let out = trace([traces_dir().join(name), "--format".into(), "json".into()]);
        assert!(out.status.success(), "{}", stderr_of(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        doc["ranks"][0].clone()
    };
    // One compiled kernel launched once: shorter than its launch, but no pattern.
    let triton = rank("triton_example.json.gz");
    assert_eq!(triton["launches"]["count"], 1);
    assert_eq!(triton["launch_bound"], false);
    // 2516 launches, most shorter than their launch call, short queues.
    let nccl = rank("rank0_nccl_data.json.gz");
    assert_eq!(nccl["launch_bound"], true);
    // The triton step is 13 s with nothing recorded on the CPU: said so, not blamed on
    // host-side work of 0 %.
    let advice = triton["steps"]["verdicts"][0]["advice"].as_str().unwrap();
    assert!(advice.contains("saw nothing run on the CPU"), "{advice}");
}

/// The y tick labels (`text-anchor="end"`) of the page's chart titled `title`.
fn y_ticks(page: &str, title: &str) -> Vec<String> {
    let svg = page
        .split("<svg")
        .find(|s| s.contains(&format!("<title>{title}</title>")))
        .unwrap_or_else(|| panic!("no chart titled {title}"));
    svg.split(r#"text-anchor="end" class="tick">"#)
        .skip(1)
        .map(|t| t[..t.find('<').unwrap()].to_owned())
        .collect()
}

/// The steps chart of the HTML page plots milliseconds (its rows are the step table's ms),
/// but its y axis was ticked as a bare count (`0 50 100 150`): the unit was only in the
/// SVG's hover title. Every tick now says ms.
#[test]
fn the_steps_chart_axis_is_in_ms() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("trace.html");
    let out = trace([
        shared("traces/resnet50_v100_memory_workers0.json.gz").as_os_str(),
        OsStr::new("--format"),
        OsStr::new("html"),
        OsStr::new("-o"),
        page.as_os_str(),
    ]);
    success(&out, "resnet50 html");
    let page = std::fs::read_to_string(&page).unwrap();
    let ticks = y_ticks(&page, "Step time by category (ms)");
    // Steps of 164–181 ms (data: ProfilerStep#5–#10): ticks up to at least 150.
    assert!(ticks.len() >= 3, "{ticks:?}");
    assert!(ticks.iter().all(|t| t.ends_with(" ms")), "{ticks:?}");
    let top: f64 = ticks
        .last()
        .unwrap()
        .trim_end_matches(" ms")
        .parse()
        .unwrap();
    assert!((150.0..=200.0).contains(&top), "{ticks:?}");
}

/// What the CPU was doing in each large GPU gap is a list of names, some with spaces
/// (`## forward ##`, record_function labels): each stays whole on one line of the text,
/// where it used to be wrapped mid-name.
#[test]
fn names_with_spaces_are_not_wrapped_mid_name() {
    let mut checked = 0;
    for name in ["rank0_nccl_data.json.gz", "sampled_rank0.json.gz"] {
        let file = traces_dir().join(name);
        let doc = json_doc(
            &trace([&file, Path::new("--format"), Path::new("json")]),
            name,
        );
        let text = success(&trace([&file]), name);
        let section: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("Largest GPU gaps"))
            .take_while(|l| !l.is_empty())
            .collect();
        let mut listed: Vec<String> = vec![];
        for rank in doc["ranks"].as_array().unwrap() {
            for gap in rank["largest_gaps"].as_array().unwrap() {
                for cpu in gap["cpu"].as_array().unwrap() {
                    listed.push(cpu["name"].as_str().unwrap().to_owned());
                }
            }
        }
        for n in listed.iter().filter(|n| n.contains(' ') && n.len() < 60) {
            let want = listed.iter().filter(|m| *m == n).count();
            let whole: usize = section.iter().map(|l| l.matches(n.as_str()).count()).sum();
            assert_eq!(
                whole,
                want,
                "{name}: {n:?} wrapped:\n{}",
                section.join("\n")
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 10,
        "the traces list names with spaces in their gaps"
    );
}

/// `rank0_nccl_negative_queue` copies 60 small buffers from or to pageable memory beside
/// 203 MB of pinned input: the pageable share of the host–device bytes (worked out here
/// from the trace's JSON) is far below the 10 % that makes pinning worth advising.
#[test]
fn a_few_small_pageable_copies_get_no_pinning_advice() {
    let name = "rank0_nccl_negative_queue.json.gz";
    let doc: Value = serde_json::from_str(&common::gunzip(&traces_dir().join(name))).unwrap();
    let (mut pageable, mut host) = (0.0, 0.0);
    for e in doc["traceEvents"].as_array().unwrap() {
        let name = e["name"].as_str().unwrap_or("");
        if e["cat"] != "gpu_memcpy" || !(name.contains("HtoD") || name.contains("DtoH")) {
            continue;
        }
        let bytes = e["args"]["bytes"].as_f64().unwrap_or(0.0);
        host += bytes;
        if name.contains("Pageable") {
            pageable += bytes;
        }
    }
    let share = pageable * 100.0 / host;
    assert!(share > 0.0 && share < 10.0, "{share}");
    let out = stdout_of(&trace([traces_dir().join(name)]));
    let text = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        text.contains(&format!(
            "{share:.1} % of the bytes copied between host and device) use pageable host \
             memory: too little to be worth pinning."
        )),
        "{text}"
    );
    assert!(!text.contains("pin_memory=True"), "{text}");
}

/// torch's memory timeline export, given by its full path: the header wraps to 80
/// columns like every other line (it ran to 94).
#[test]
fn the_memory_timeline_text_fits_80_columns() {
    let path = traces_dir().join("memory_timeline.raw.gz");
    let text = stdout_of(&trace([&path]));
    assert!(
        text.starts_with(&format!("{}", path.display())[..20]),
        "{text}"
    );
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "{line:?}");
    }
}
