//! Flag values and combinations that cannot be honoured are refused with one line and exit
//! 2, not quietly read as something else (`--count 0` as one sample, `--once --count 3`
//! as one, `--frames 0` as one, `--watch --format json` as JSON).

use std::path::PathBuf;

use assert_cmd::Command;
use common::one_error_line;

mod common;

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

/// `--diff` has no HTML page: asked for one, the comparison used to be written as JSON into
/// the `.html` file with exit 0. Now it is refused before anything is read or written.
#[test]
fn a_diff_is_not_written_as_html() {
    let dir = tempfile::tempdir().unwrap();
    let snapshots = [
        shared("snapshots/finetune_no_timestamps.pickle"),
        shared("snapshots/lm_fullstep_ctx128.pickle"),
    ];
    let traces = [
        shared("traces/resnet50_v100_memory_workers0.json.gz"),
        shared("traces/resnet50_v100_memory_workers4.json.gz"),
    ];
    for (command, [a, b]) in [("snapshot", &snapshots), ("trace", &traces)] {
        let page = dir.path().join(format!("{command}_diff.html"));
        let out = Command::cargo_bin("gpuscope")
            .unwrap()
            .arg(command)
            .arg(a)
            .arg("--diff")
            .arg(b)
            .args(["--format", "html", "-o"])
            .arg(&page)
            .output()
            .unwrap();
        let line = one_error_line(&out);
        assert!(line.contains("--diff") && line.contains("HTML"), "{line}");
        assert!(!page.exists(), "{command}: {} was written", page.display());
    }
}
