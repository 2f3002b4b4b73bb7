//! Flag values and combinations that cannot be honoured are refused with one line and exit
//! 2, not quietly read as something else (`--count 0` as one sample, `--once --count 3`
//! as one, `--frames 0` as one, `--watch --format json` as JSON).

use std::path::PathBuf;

use assert_cmd::Command;
use common::{one_error_line, stderr_of};

use crate::common;

fn shared(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

#[test]
fn impossible_flags_are_refused() {
    let saved = shared("nvidia-smi/nvidia_gpu_exporter__query.csv.txt");
    let snapshot = shared("snapshots/finetune_no_timestamps.pickle");
    let cases: [(&[&str], &PathBuf, &str); 5] = [
        (&["monitor", "--count", "0", "--from"], &saved, "--count"),
        (
            &["monitor", "--once", "--count", "3", "--from"],
            &saved,
            "--once",
        ),
        (
            &["monitor", "--watch", "--format", "json", "--from"],
            &saved,
            "--watch",
        ),
        (&["snapshot", "--frames", "0"], &snapshot, "--frames"),
        (&["snapshot", "--top", "0"], &snapshot, "--top"),
    ];
    for (args, path, flag) in cases {
        let out = Command::cargo_bin("gpuscope")
            .unwrap()
            .args(args)
            .arg(path)
            .output()
            .unwrap();
        let line = one_error_line(&out);
        assert!(line.contains(flag), "{args:?}: {line}");
    }
}

/// `trace --diff` has no HTML page: asked for one, the comparison used to be written as
/// JSON into the `.html` file with exit 0. Now it is refused before anything is read or
/// written.
#[test]
fn a_trace_diff_is_not_written_as_html() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("trace_diff.html");
    let out = Command::cargo_bin("gpuscope")
        .unwrap()
        .arg("trace")
        .arg(shared("traces/resnet50_v100_memory_workers0.json.gz"))
        .arg("--diff")
        .arg(shared("traces/resnet50_v100_memory_workers4.json.gz"))
        .args(["--format", "html", "-o"])
        .arg(&page)
        .output()
        .unwrap();
    let line = one_error_line(&out);
    assert!(line.contains("--diff") && line.contains("HTML"), "{line}");
    assert!(!page.exists(), "{} was written", page.display());
}

/// `snapshot --diff --format html` is a page of its own: both files named, every call site
/// whose bytes changed (the JSON's `changed`, all of them, escaped), nothing fetched.
#[test]
fn a_snapshot_diff_in_html_lists_every_changed_site() {
    let dir = tempfile::tempdir().unwrap();
    let a = shared("snapshots/finetune_no_timestamps.pickle");
    let b = shared("snapshots/lm_fullstep_ctx128.pickle");
    let run = |format: &str, to: &std::path::Path| {
        let out = Command::cargo_bin("gpuscope")
            .unwrap()
            .arg("snapshot")
            .arg(&a)
            .arg("--diff")
            .arg(&b)
            .args(["--format", format, "-o"])
            .arg(to)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        std::fs::read_to_string(to).unwrap()
    };
    let json: serde_json::Value =
        serde_json::from_str(&run("json", &dir.path().join("d.json"))).unwrap();
    let page = run("html", &dir.path().join("d.html"));
    assert!(page.starts_with("<!doctype html>") && page.trim_end().ends_with("</html>"));
    assert!(!page.contains("http://") && !page.contains("https://") && !page.contains("<script"));
    for path in [&a, &b] {
        assert!(
            page.contains(&*path.to_string_lossy()),
            "{} not named",
            path.display()
        );
    }
    let changed = json["changed"].as_array().unwrap();
    assert!(changed.len() >= 10, "{} changed sites", changed.len());
    // One row per changed site, after the sums' header and three rows and the sites' header.
    assert_eq!(page.matches("<tr>").count(), 1 + 3 + 1 + changed.len());
    for c in changed {
        let site = html_escape::encode_text(c["site"].as_str().unwrap()).into_owned();
        assert!(
            page.contains(&format!("<td class=\"name\">{site}</td>")),
            "{site}"
        );
    }
}
