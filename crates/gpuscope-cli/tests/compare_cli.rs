//! `gpuscope compare BASE NEW --fail-on ...` as a CI job runs it, on the real H200 runs of
//! `../shared/data/gpu-h200/`: `lm_clean`, and `lm_leak_nan`, the same training with
//! activations kept across iterations and a loss that turns NaN at iteration 70.
//!
//! The expected directions are read from the runs' own files here (the allocator peaks of
//! `profiles/memory.jsonl`, the presence of `profiles/nonfinite.jsonl` and of an OOM
//! report), not from gpuscope's output.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use common::{one_error_line, stderr_of, stdout_of};

fn shared(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/gpu-h200")
        .join(rel)
}

fn gpuscope() -> Command {
    Command::cargo_bin("gpuscope").unwrap()
}

/// `gpuscope compare ARGS BASE NEW`.
fn compare(args: &[&str], base: &Path, new: &Path) -> Output {
    gpuscope()
        .arg("compare")
        .args(args)
        .arg(base)
        .arg(new)
        .output()
        .unwrap()
}

/// The highest allocated and reserved of a run's records, as the allocator counted them
/// (its peak counters, or the current figure where higher).
fn record_peaks(run: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(run.join("profiles/memory.jsonl")).unwrap();
    let mut peaks = (0, 0);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        let a = &record["allocator"];
        let figure = |key: &str| a[key].as_u64().unwrap();
        peaks.0 = peaks
            .0
            .max(figure("peak_allocated_bytes"))
            .max(figure("allocated_bytes"));
        peaks.1 = peaks
            .1
            .max(figure("peak_reserved_bytes"))
            .max(figure("reserved_bytes"));
    }
    peaks
}

fn regressions(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("regression: "))
        .collect()
}

#[test]
fn the_leaking_nan_run_fails_on_peak_memory_and_nonfinite() {
    let (clean, leaky) = (shared("lm_clean"), shared("lm_leak_nan"));
    // The data: the leaking run's peaks are far above 10 % more; only it went non-finite.
    let (base, new) = (record_peaks(&clean), record_peaks(&leaky));
    assert!(new.0 as f64 > base.0 as f64 * 1.1 && new.1 as f64 > base.1 as f64 * 1.1);
    assert!(leaky.join("profiles/nonfinite.jsonl").is_file());
    assert!(!clean.join("profiles/nonfinite.jsonl").exists());

    let out = compare(&["--fail-on", "peak-memory=10%,nonfinite"], &clean, &leaky);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let lines = regressions(&err);
    assert_eq!(lines.len(), 3, "{err}");
    let mb = |b: u64| format!("{:.1} MB", b as f64 / (1u64 << 20) as f64);
    let change = |b: u64, n: u64| format!("{:+.1}%", (n as f64 - b as f64) * 100.0 / b as f64);
    assert_eq!(
        lines[0],
        format!(
            "peak-memory=10%: rank 0 peak allocated: {} → {} ({})",
            mb(base.0),
            mb(new.0),
            change(base.0, new.0)
        )
    );
    assert_eq!(
        lines[1],
        format!(
            "peak-memory=10%: rank 0 peak reserved: {} → {} ({})",
            mb(base.1),
            mb(new.1),
            change(base.1, new.1)
        )
    );
    assert!(
        lines[2].starts_with("nonfinite: non-finite values in NEW (rank 0: iterations 70–"),
        "{}",
        lines[2]
    );
    assert!(lines[2].ends_with("none in BASE"), "{}", lines[2]);
    // The report on stdout ends with the same verdict.
    let text = stdout_of(&out);
    assert!(
        text.contains("Gate: FAILED, 3 regressions (--fail-on peak-memory=10%,nonfinite)"),
        "{text}"
    );
}

#[test]
fn the_json_document_carries_the_figures_of_the_records() {
    let (clean, leaky) = (shared("lm_clean"), shared("lm_leak_nan"));
    let rules = ["--format", "json", "--fail-on", "leak,step-time=5%"];
    let out = compare(&rules, &clean, &leaky);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout_of(&out)).unwrap();
    assert_eq!(doc["schema"], "gpuscope.compare/1");
    assert_eq!(doc["passed"], false);
    // Only lm_clean has a profiler trace: both runs time sections, so those are used.
    assert_eq!(doc["step_source"], "sections");
    let rank = &doc["ranks"][0];
    let (base, new) = (record_peaks(&clean), record_peaks(&leaky));
    assert_eq!(rank["peak_allocated_bytes"]["base"], base.0);
    assert_eq!(rank["peak_allocated_bytes"]["new"], new.0);
    assert_eq!(rank["peak_reserved_bytes"]["new"], new.1);
    // lm_leak_nan ran without the trace and snapshot lm_clean took, and ran faster.
    let step = &rank["step_time_us"];
    assert!(step["new"].as_f64() < step["base"].as_f64(), "{step}");
    let activations = &rank["steady_categories_bytes"]["activations"];
    assert!(activations["change_percent"].as_f64().unwrap() > 100.0);
    let failed: Vec<&str> = doc["regressions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rule"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["leak"], "a faster NEW does not fail step-time");
    assert_eq!(doc["regressions"][0]["figure"], "leak");
    // The sites at the snapshot peak: lm_clean's alone (lm_leak_nan took no snapshot).
    let sites = &doc["peak_sites"];
    assert!(sites["peak_bytes"]["base"].as_u64().unwrap() > 0);
    assert!(sites["peak_bytes"]["new"].is_null());
}

/// lm_clean caught an out-of-memory error whose report says 9136 MB were allocated: its
/// peaks must still be the records' (1627 MB), or it would look like a regression against
/// lm_leak_nan's 6716 MB. The OOM itself fails `oom` with lm_clean as NEW.
#[test]
fn an_oom_fails_oom_but_its_report_is_not_a_peak() {
    let (clean, leaky) = (shared("lm_clean"), shared("lm_leak_nan"));
    let report = std::fs::read_dir(clean.join("snapshots"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".txt"))
        .expect("lm_clean's OOM report");
    let forensics = std::fs::read_to_string(report).unwrap();
    assert!(forensics.contains("allocated: 9136.0 MB"), "{forensics}");

    let out = compare(&["--fail-on", "peak-memory=10%,oom"], &leaky, &clean);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let lines = regressions(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("oom: out of memory in NEW (rank 0: 1 out-of-memory error"));
    assert!(lines[0].contains("iteration 159"), "{}", lines[0]);
}

#[test]
fn a_run_compared_with_itself_passes_every_rule() {
    let clean = shared("lm_clean");
    let every = "peak-memory=0%,step-time=0%,throughput=0%,nonfinite,leak,oom,fragmentation";
    let out = compare(&["--fail-on", every], &clean, &clean);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(regressions(&err).is_empty(), "{err}");
    let text = stdout_of(&out);
    assert!(text.contains("Gate: passed"), "{text}");
    // Both sides have the trace: the step time is the profiler's.
    assert!(text.contains("step time (trace)"), "{text}");
    // Fits 80 columns.
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "{line}");
    }
}

#[test]
fn without_fail_on_the_comparison_is_shown_and_exits_0() {
    let out = compare(&[], &shared("lm_clean"), &shared("lm_leak_nan"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(stdout_of(&out).contains("no --fail-on rules"));
}

#[test]
fn bad_rules_and_paths_are_one_error_line() {
    let clean = shared("lm_clean");
    for (rule, says) in [
        ("peak-memory=10", "not a percentage"),
        ("peak-memory=-3%", "not a percentage"),
        ("step-time", "needs a percentage"),
        ("speed=5%", "unknown --fail-on item"),
        ("leak=5%", "takes no value"),
    ] {
        let out = compare(&["--fail-on", rule], &clean, &clean);
        let line = one_error_line(&out);
        assert!(line.contains(says), "{rule}: {line}");
    }
    let missing = clean.join("no such run");
    let out = compare(&[], &clean, &missing);
    let line = one_error_line(&out);
    assert!(line.contains("no such run"), "{line}");
    let empty = tempfile::tempdir().unwrap();
    let out = compare(&[], empty.path(), &clean);
    let line = one_error_line(&out);
    assert!(line.contains("is this a run directory?"), "{line}");
}

/// The page is one file with nothing fetched, and the run's path (here with markup in its
/// name, through a symbolic link to lm_clean) is escaped.
#[test]
fn the_html_page_is_self_contained_and_escapes_the_paths() {
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("run <b>&\"x");
    std::os::unix::fs::symlink(shared("lm_clean"), &odd).unwrap();
    let page = dir.path().join("compare.html");
    let page_arg = page.to_str().unwrap();
    let out = compare(
        &["--format", "html", "-o", page_arg],
        &odd,
        &shared("lm_leak_nan"),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!doctype html>"));
    assert!(!html.contains("<script") && !html.contains("http://") && !html.contains("src="));
    assert!(html.contains("run &lt;b&gt;&amp;\"x"), "path not escaped");
    assert!(!html.contains("<b>&"));
    assert!(
        html.contains("train_lm.py:49 forward"),
        "the snapshot's sites"
    );
}

/// Output that cannot be written is exit 1 with one line naming it, as for every command.
#[test]
fn output_that_cannot_be_written_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("no such directory").join("compare.json");
    let clean = shared("lm_clean");
    let out = compare(
        &["--format", "json", "-o", nowhere.to_str().unwrap()],
        &clean,
        &clean,
    );
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: ") && err.contains(": cannot write: "),
        "{err}"
    );
}

/// The H200 HF run has too few records after warm-up for the leak rule: `--fail-on leak`
/// says the verdict was not checked, and why, instead of reading it as "no leak".
#[test]
fn a_leak_gate_on_runs_too_short_for_the_rule_is_not_checked() {
    let hf = shared("hf");
    let out = compare(&["--fail-on", "leak", "--format", "json"], &hf, &hf);
    let doc: serde_json::Value = serde_json::from_str(&stdout_of(&out)).unwrap();
    let text = doc.to_string();
    assert!(
        text.contains("the leak rule needs 6 memory records after warm-up"),
        "{text}"
    );
    let leak = doc["ranks"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "leak")
        .unwrap();
    assert_eq!(
        (&leak["base"], &leak["new"]),
        (&serde_json::Value::Null, &serde_json::Value::Null)
    );
}
