//! `gpuscope report` on a real `tensor_profile_<ts>.log` text log: the summary its analyzer
//! prints, with the figures its regexes read (shared/data/logs/reference.json).

use std::path::PathBuf;

use assert_cmd::Command;

fn shared(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

fn reference() -> serde_json::Value {
    let text = std::fs::read_to_string(shared("logs/reference.json")).unwrap();
    serde_json::from_str::<serde_json::Value>(&text).unwrap()["tensor_profile_20260128_140205.log"]
        .clone()
}

const LOG: &str = "logs/tensor_profile_20260128_140205.log";

fn gpuscope() -> Command {
    Command::cargo_bin("gpuscope").unwrap()
}

#[test]
fn text_summary_has_the_text_log_analyzers_facts() {
    let out = gpuscope().arg("report").arg(shared(LOG)).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let r = reference();
    let (first, last) = (&r["first"], &r["last"]);
    assert!(text.contains(&format!(
        "Iteration Range: {} - {}",
        first["iteration"], last["iteration"]
    )));
    assert!(text.contains(&format!("Total Snapshots: {}", r["records"])));
    let mb = |v: &serde_json::Value| format!("{:.1}", v.as_f64().unwrap());
    assert!(text.contains(&format!(
        "Start: {} MB  →  End: {} MB",
        mb(&first["allocated_mb"]),
        mb(&last["allocated_mb"])
    )));
    assert!(text.contains(&format!(
        "Start: {}%  →  End: {}%",
        mb(&first["fragmentation_percent"]),
        mb(&last["fragmentation_percent"])
    )));
    assert!(text.contains(&format!(
        "Total Tensors:            Start: {}  →  End: {}",
        first["tensor_count"], last["tensor_count"]
    )));
    assert!(text.contains(&format!(
        "  parameters     : {:>8} MB",
        mb(&last["parameters_mb"])
    )));
}

#[test]
fn json_has_bytes() {
    let out = gpuscope()
        .args(["report", "--format", "json"])
        .arg(shared(LOG))
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "gpuscope.report/1");
    let run = &doc["runs"][0];
    let r = reference();
    assert_eq!(run["records"], r["records"]);
    // A text log's GPU run: the unallocated share graded by its level, but no verdict
    // without the allocator's counters; float32 holds 98.4 % of the tensors, yet the log
    // does not say whether the forward ran under autocast, so no mixed-precision advice;
    // no leak (it densifies, then stays flat).
    assert_eq!(run["fragmentation"]["level"], "normal");
    assert_eq!(run["fragmentation"]["verdict"], "none");
    assert!(run["fragmentation"]["reason"]
        .as_str()
        .unwrap()
        .contains("cannot be told apart"));
    assert_eq!(run["advice"], serde_json::json!([]));
    assert_eq!(run["leak"]["suspected"], false);
    let bytes = run["end"]["allocated_bytes"].as_u64().unwrap() as f64;
    let mb = r["last"]["allocated_mb"].as_f64().unwrap();
    assert!((bytes / (1u64 << 20) as f64 - mb).abs() < 0.005);
}

#[test]
fn a_log_cut_inside_its_last_block_ends_at_the_block_before() {
    // Training killed while the last block was written: cut inside its categories.
    let text = std::fs::read_to_string(shared(LOG)).unwrap();
    let last = text.rfind("Iteration ").unwrap();
    let cut = text[last..].find("parameters").unwrap() + last + 30;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tensor_profile_cut.log");
    std::fs::write(&path, &text[..cut]).unwrap();
    let out = gpuscope()
        .args(["report", "--format", "json"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &doc["runs"][0];
    let r = reference();
    assert_eq!(
        run["records"].as_u64(),
        r["records"].as_u64().map(|n| n - 1)
    );
    let skipped = run["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(skipped[0].as_str().unwrap().contains("cut short"));
}

#[test]
fn a_file_of_the_wrong_kind_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("memory.jsonl");
    std::fs::write(&junk, "hello\nworld\n").unwrap();
    let out = gpuscope().arg("report").arg(&junk).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no usable memory records")
            && err.contains("memory.jsonl:1: not a memory record"),
        "{err}"
    );
}

#[test]
fn a_directory_of_runs_is_not_read_as_one_run() {
    let dir = tempfile::tempdir().unwrap();
    for run in ["a", "b"] {
        let profiles = dir.path().join(run).join("profiles");
        std::fs::create_dir_all(&profiles).unwrap();
        std::fs::copy(shared(LOG), profiles.join("tensor_profile_1.log")).unwrap();
    }
    let out = gpuscope().arg("report").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("holds 2 runs, not one"), "{err}");
    let a = dir.path().join("a");
    assert!(
        err.contains(&format!("gpuscope report {}", a.display())),
        "{err}"
    );
    // Each of them reads as a run of its own.
    let out = gpuscope()
        .arg("report")
        .arg(&a)
        .arg(dir.path().join("b"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn latest_with_an_empty_gpuscope_runs_looks_in_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let profiles = dir.path().join("run1").join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::copy(shared(LOG), profiles.join("tensor_profile_1.log")).unwrap();
    let out = gpuscope()
        .args(["report", "latest"])
        .env("GPUSCOPE_RUNS", "")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("latest run: ./run1"), "{err}");
}

/// The H200 Hugging Face run has 3 records after warm-up, fewer than the leak rule needs:
/// the text says the rule was not applied rather than "none", and the JSON says so too.
#[test]
fn too_few_records_read_as_not_judged() {
    let run = shared("gpu-h200/hf");
    let out = gpuscope().arg("report").arg(&run).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.lines().find(|l| l.starts_with("Leak: ")).unwrap();
    assert!(line.starts_with("Leak: not judged — "), "{line}");
    let out = gpuscope()
        .args(["report", "--format", "json"])
        .arg(&run)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let leak = &doc["runs"][0]["leak"];
    assert_eq!(
        (&leak["judged"], &leak["suspected"]),
        (&false.into(), &false.into())
    );
}

/// Two H200 runs compared: the comparison's table and its lines keep to 80 columns even
/// with the runs' long paths as labels (they used to run to 105).
#[test]
fn the_comparison_of_two_runs_fits_80_columns() {
    let out = gpuscope()
        .arg("report")
        .arg(shared("gpu-h200/lm_clean"))
        .arg(shared("gpu-h200/lm_leak_nan"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let comparison = &text[text.find("COMPARISON (against").unwrap()..];
    let wide: Vec<&str> = comparison
        .lines()
        .filter(|l| l.chars().count() > 80)
        .collect();
    assert!(wide.is_empty(), "{wide:?}");
    // The leaking run's activations differ (its leak): a line of its own, wrapped.
    let words = comparison.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("lm_leak_nan (rank 0): activations"),
        "{comparison}"
    );
}
