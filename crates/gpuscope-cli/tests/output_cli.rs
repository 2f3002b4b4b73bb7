//! What every command's output has in common: `-o FILE` naming one of the command's
//! inputs is refused before anything is written, so the input survives (the report would
//! have replaced it); output that cannot be written is exit 1 with one line naming where;
//! text reports have no blanks at the ends of their lines.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use common::{one_error_line, stdout_of};

use crate::common;

fn shared(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

/// A writable copy of a shared file in `dir`.
fn copy(rel: &str, dir: &Path) -> PathBuf {
    let to = dir.join(Path::new(rel).file_name().unwrap());
    std::fs::copy(shared(rel), &to).unwrap();
    let mut permissions = std::fs::metadata(&to).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    permissions.set_readonly(false);
    std::fs::set_permissions(&to, permissions).unwrap();
    to
}

/// Runs `gpuscope ARGS` where `input` is one of the inputs and the output is `output`
/// (the same file, spelled another way): exit 2, one line, and the input unchanged.
fn refused(args: &[&str], input: &Path, output: &Path) {
    let before = std::fs::read(input).unwrap();
    let out = Command::cargo_bin("gpuscope")
        .unwrap()
        .args(args)
        .arg("-o")
        .arg(output)
        .output()
        .unwrap();
    let line = one_error_line(&out);
    assert!(line.contains("the output file is an input"), "{line}");
    assert_eq!(std::fs::read(input).unwrap(), before, "{args:?}");
}

#[test]
fn an_input_is_never_written_over() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let again = |p: &Path| d.join(".").join(p.file_name().unwrap());
    let arg = |p: &Path| p.to_str().unwrap().to_owned();

    let trace = copy("traces/alexnet_single_gpu.json.gz", d);
    refused(&["trace", &arg(&trace)], &trace, &again(&trace));
    let other = copy("traces/sampled_rank0.json.gz", d);
    refused(
        &["trace", &arg(&trace), "--diff", &arg(&other)],
        &other,
        &other,
    );

    let snapshot = copy("snapshots/finetune_no_timestamps.pickle", d);
    refused(&["snapshot", &arg(&snapshot)], &snapshot, &again(&snapshot));

    let log = copy("logs/tensor_profile_20260128_140205.log", d);
    refused(
        &["report", &arg(&log), "--format", "html"],
        &log,
        &again(&log),
    );

    let events = copy(
        "tfevents/pytorch_unet__events.out.tfevents.1738277380.wn44.22511.0",
        d,
    );
    refused(&["tb", &arg(&events)], &events, &events);
}

#[test]
fn monitor_never_logs_over_the_file_it_replays() {
    let dir = tempfile::tempdir().unwrap();
    let saved = copy("nvidia-smi/nvidia_gpu_exporter__query.csv.txt", dir.path());
    let before = std::fs::read(&saved).unwrap();
    let out = Command::cargo_bin("gpuscope")
        .unwrap()
        .args(["monitor", "--once", "--from"])
        .arg(&saved)
        .arg("--log")
        .arg(&saved)
        .output()
        .unwrap();
    let line = one_error_line(&out);
    assert!(line.contains("the output file is an input"), "{line}");
    assert_eq!(std::fs::read(&saved).unwrap(), before);
}

/// comfy-table pads the last cell of every row; a report copied into an issue or a diff
/// then shows trailing blanks on every table line.
#[test]
fn text_reports_end_no_line_with_a_blank() {
    let snapshot = shared("snapshots/lm_fullstep_ctx128.pickle");
    let trace = shared("traces/resnet50_v100_memory_workers0.json.gz");
    let table = shared("nvidia-smi/nvidia-htop__FAKE_STDIN__driver390_8xGTX1080Ti.txt");
    let export = shared("nsys/cuda_add_rtx4060ti_nsys2026.sqlite");
    let tfevents = shared("tfevents");
    let runs: [Vec<&std::ffi::OsStr>; 7] = [
        vec!["snapshot".as_ref(), snapshot.as_ref()],
        vec![
            "snapshot".as_ref(),
            snapshot.as_ref(),
            "--diff".as_ref(),
            snapshot.as_ref(),
        ],
        vec!["trace".as_ref(), trace.as_ref()],
        vec!["tb".as_ref(), tfevents.as_ref()],
        vec!["tb".as_ref(), tfevents.as_ref(), "--tags".as_ref()],
        vec!["nsys".as_ref(), "stats".as_ref(), export.as_ref()],
        vec![
            "monitor".as_ref(),
            "--once".as_ref(),
            "--watch".as_ref(),
            "--from".as_ref(),
            table.as_ref(),
        ],
    ];
    for args in runs {
        let out = Command::cargo_bin("gpuscope")
            .unwrap()
            .args(&args)
            .env("COLUMNS", "80")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        let text = stdout_of(&out);
        assert!(text.lines().count() > 5, "{args:?}: {text}");
        for line in text.lines() {
            assert_eq!(line, line.trim_end(), "{args:?}");
        }
    }
}

/// Wrapped sentences break at spaces only. The snapshot's largest allocation is at
/// `/home/c-kaitwang/assignment1/cs336_basics/training.py:21`; the wrap used to break it
/// after `c-` (textwrap's default splits words at hyphens), so the path could not be
/// copied from the report.
#[test]
fn wrapped_text_never_breaks_a_path_at_a_hyphen() {
    let out = Command::cargo_bin("gpuscope")
        .unwrap()
        .arg("snapshot")
        .arg(shared("snapshots/lm_fullstep_ctx128.pickle"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr_of(&out));
    let text = stdout_of(&out);
    let line = text
        .lines()
        .find(|l| l.contains("cs336_basics/training.py:21 cross_entropy_loss"))
        .unwrap_or_else(|| panic!("no line names the largest allocation's site:\n{text}"));
    assert!(
        line.contains("/home/c-kaitwang/assignment1/cs336_basics/training.py:21"),
        "{line}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
}

/// Where nothing can be written (a directory that does not exist): exit 1, not the exit 2
/// of bad input, and one line that names the output.
#[test]
fn output_that_cannot_be_written_is_exit_1_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("no such directory");
    let cases: [(&[&str], PathBuf); 3] = [
        (&["report", "gpu-h200/lm_clean"], nowhere.join("report.txt")),
        (
            &[
                "snapshot",
                "snapshots/finetune_no_timestamps.pickle",
                "--format",
                "html",
            ],
            nowhere.join("snapshot.html"),
        ),
        (
            &[
                "trace",
                "traces/alexnet_single_gpu.json.gz",
                "--export",
                "csv",
            ],
            dir.path().join("a file").join("tables"),
        ),
    ];
    std::fs::write(dir.path().join("a file"), "").unwrap();
    for (args, output) in cases {
        let out = Command::cargo_bin("gpuscope")
            .unwrap()
            .arg(args[0])
            .arg(shared(args[1]))
            .args(&args[2..])
            .arg("-o")
            .arg(&output)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("error: "), "{err}");
        assert!(err.contains(": cannot write: "), "{err}");
        assert!(err.contains(&*dir.path().to_string_lossy()), "{err}");
    }
}
