//! `gpuscope monitor` as a user runs it: without a GPU source (`GPUSCOPE_NO_GPU` rules
//! NVML, or NVML and nvidia-smi, out, so these tests mean the same on a GPU machine); with
//! a stand-in `nvidia-smi` on PATH; with whatever this machine has; on saved nvidia-smi
//! outputs; its logs read back (JSONL, CSV, TensorBoard through `gpuscope tb`); and Ctrl-C.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use assert_cmd::Command;
use common::{one_error_line, text};

use crate::common;

fn shared(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/nvidia-smi")
        .join(rel)
}

const RTX2070: &str = "nvidia-htop__FAKE_STDIN_NEW_FORMAT__driver450_RTX2070.txt";
const EXPORTER_CSV: &str = "nvidia_gpu_exporter__query.csv.txt";

fn gpuscope() -> Command {
    Command::cargo_bin("gpuscope").unwrap()
}

/// `gpuscope monitor ARGS` with PATH reduced to `path` (no nvidia-smi unless put there)
/// and `GPUSCOPE_NO_GPU` as given (`None`: unset).
fn monitor_with_path(path: &Path, no_gpu: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = gpuscope();
    cmd.arg("monitor").args(args).env("PATH", path);
    match no_gpu {
        Some(value) => cmd.env("GPUSCOPE_NO_GPU", value),
        None => cmd.env_remove("GPUSCOPE_NO_GPU"),
    };
    cmd.output().unwrap()
}

#[test]
fn without_a_gpu_source_it_shows_the_host_and_exits_0() {
    let empty = tempfile::tempdir().unwrap();
    let out = monitor_with_path(empty.path(), Some("1"), &["--once"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "no NVIDIA GPU found: NVML and nvidia-smi not tried (GPUSCOPE_NO_GPU=1)\n"
    );
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("Host CPU "), "{stdout}");
    assert!(stdout.contains(" GB ("), "{stdout}");
    assert_eq!(stdout.lines().count(), 1);
}

#[test]
fn gpuscope_no_gpu_does_not_start_nvidia_smi() {
    let dir = tempfile::tempdir().unwrap();
    let asked = dir.path().join("asked");
    fake_nvidia_smi(
        dir.path(),
        &format!(
            ": > '{}'; /bin/cat '{}'",
            asked.display(),
            shared(EXPORTER_CSV).display()
        ),
    );
    let out = monitor_with_path(dir.path(), Some("yes"), &["--once", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let sample: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sample["source"], "none");
    assert!(sample["gpus"].as_array().unwrap().is_empty());
    assert!(!asked.exists(), "nvidia-smi was started");
}

#[test]
fn without_nvml_and_nvidia_smi_the_line_names_both() {
    let empty = tempfile::tempdir().unwrap();
    let out = monitor_with_path(empty.path(), Some("nvml"), &["--once"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "no NVIDIA GPU found: NVML not tried (GPUSCOPE_NO_GPU=nvml), nvidia-smi not on PATH\n"
    );
}

/// Whatever this machine has: NVML when it loads (a GPU machine), else the line that says
/// it did not load. Either way the sample's `source` and the line agree.
#[test]
fn detection_on_this_machine_uses_nvml_when_it_loads() {
    let empty = tempfile::tempdir().unwrap();
    for off in [None, Some("0"), Some("off")] {
        let out = monitor_with_path(empty.path(), off, &["--once", "--format", "json"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let sample: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let gpus = sample["gpus"].as_array().unwrap();
        if sample["source"] == "nvml" {
            assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
            assert!(!gpus.is_empty());
            assert!(gpus[0]["memory_total_bytes"].as_u64().unwrap() > 0);
        } else {
            assert_eq!(sample["source"], "none");
            assert!(gpus.is_empty());
            let stderr = text(&out.stderr);
            assert!(
                stderr.starts_with("no NVIDIA GPU found: NVML ") && !stderr.contains("not tried"),
                "{stderr}"
            );
        }
    }
}

#[test]
fn require_gpu_makes_no_gpu_exit_2_with_one_line() {
    let empty = tempfile::tempdir().unwrap();
    let out = monitor_with_path(empty.path(), Some("1"), &["--once", "--require-gpu"]);
    let err = one_error_line(&out);
    assert_eq!(
        err,
        "error: no NVIDIA GPU found: NVML and nvidia-smi not tried (GPUSCOPE_NO_GPU=1) \
         (--require-gpu was given)\n"
    );
}

/// A stand-in for the driver's nvidia-smi (not for the code under test): `--query-gpu`
/// prints a real exporter's CSV (its own columns, a header although asked for none),
/// `--query-compute-apps` one process whose memory the driver does not report.
fn fake_nvidia_smi(dir: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("nvidia-smi");
    std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn nvidia_smi_on_path_is_the_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let csv = shared(EXPORTER_CSV);
    fake_nvidia_smi(
        dir.path(),
        &format!(
            "case \"$1\" in\n\
             --query-gpu=*) /bin/cat '{}' ;;\n\
             --query-compute-apps=*) echo 'GPU-04757e3e-3077-4e2e-b988-7e2d647b52e9, 4242, python, [N/A]' ;;\n\
             *) exit 9 ;;\nesac",
            csv.display()
        ),
    );
    let out = monitor_with_path(dir.path(), Some("nvml"), &["--once", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    let sample: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sample["schema"], "gpuscope.gpu_sample/1");
    assert_eq!(sample["source"], "nvidia-smi");
    let gpus = sample["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[0]["name"], "NVIDIA GeForce RTX 2080 SUPER");
    assert_eq!(gpus[0]["memory_used_bytes"], 575u64 << 20);
    assert_eq!(gpus[0]["memory_total_bytes"], serde_json::Value::Null);
    assert!(gpus[0]["processes"].as_array().unwrap().is_empty());
    let process = &gpus[1]["processes"][0];
    assert_eq!(process["pid"], 4242);
    assert_eq!(process["used_memory_bytes"], serde_json::Value::Null);
    assert!(sample["host"]["ram_total_bytes"].as_u64().unwrap() > 0);
}

#[test]
fn a_failing_nvidia_smi_is_named_in_the_no_gpu_line() {
    let dir = tempfile::tempdir().unwrap();
    fake_nvidia_smi(
        dir.path(),
        "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"\nexit 9",
    );
    let out = monitor_with_path(dir.path(), Some("nvml"), &["--once"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stderr),
        "no NVIDIA GPU found: NVML not tried (GPUSCOPE_NO_GPU=nvml), nvidia-smi failed: \
         NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    );
}

#[test]
fn a_saved_table_read_once() {
    let out = gpuscope()
        .args(["monitor", "--once", "--from"])
        .arg(shared(RTX2070))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with(
        "GPU0 Memory: 0.7 GB / 7.8 GB (9%), 2% util, 50°C, 27 W\n\
         GPU1 Memory: 0.9 GB / 2.0 GB (44%), 0% util, 30°C, 1 W\nHost CPU "
    ));
}

#[test]
fn the_watch_table_fits_80_columns_and_lists_processes() {
    let out = gpuscope()
        .args(["monitor", "--once", "--watch", "--from"])
        .arg(shared(RTX2070))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let screen = text(&out.stdout);
    for line in screen.lines() {
        assert!(line.chars().count() <= 80, "too wide: {line:?}");
    }
    assert!(screen.contains("GeForce RTX 2070"));
    assert!(screen.contains("749M/7.8G"), "{screen}");
    assert!(screen.contains("python 1032 745M"), "{screen}");
    assert!(screen.contains("MATLAB 4755 3M"), "{screen}");
}

#[test]
fn a_file_that_is_no_nvidia_smi_output_exits_2_saying_what_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    // Prose, a CSV of other columns without a header, a CSV whose rows miss fields.
    for (name, text, said) in [
        (
            "notes.txt",
            "my training notes\nloss went down\n",
            "not an nvidia-smi output: no XML, no table, no CSV",
        ),
        (
            "other.csv",
            "0, a, GPU-a\n",
            "CSV row 1 has 3 fields, but without a header gpuscope reads the 9 fields of \
             --query-gpu=index,name,uuid,",
        ),
        (
            "short.csv",
            "name, memory.used [MiB]\nTesla T4, 100 MiB\nTesla T4\n",
            "CSV row 3 has 1 fields, but its header names 2",
        ),
    ] {
        let bad = dir.path().join(name);
        std::fs::write(&bad, text).unwrap();
        let out = gpuscope()
            .args(["monitor", "--once", "--from"])
            .arg(&bad)
            .output()
            .unwrap();
        let err = one_error_line(&out);
        assert!(err.contains(name) && err.contains(said), "{err}");
    }
}

#[test]
fn an_empty_saved_output_exits_2_even_without_require_gpu() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [("empty.txt", ""), ("blank.txt", "\n  \n")] {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = gpuscope()
            .args(["monitor", "--once", "--from"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(one_error_line(&out).contains("the file is empty"), "{name}");
    }
}

#[test]
fn log_jsonl_and_csv_hold_every_sample() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("gpu.jsonl");
    let csv = dir.path().join("gpu.csv");
    // The CSV twice: a restarted monitor appends, and writes the header only once.
    for log in [&jsonl, &csv, &csv] {
        let out = gpuscope()
            .args(["monitor", "--count", "2", "--interval", "0.1", "--from"])
            .arg(shared(RTX2070))
            .arg("--log")
            .arg(log)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains("Peaks over 2 samples"));
    }
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[1]["time"].as_f64().unwrap() > lines[0]["time"].as_f64().unwrap());
    assert_eq!(
        lines[0]["gpus"][1]["processes"].as_array().unwrap().len(),
        5
    );
    assert_eq!(lines[0]["gpus"][0]["power_limit_w"], 175.0);

    let table = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(
        rows.len(),
        1 + 2 * 2 * 2,
        "a header, then a row per GPU per sample"
    );
    assert_eq!(rows.iter().filter(|r| r.starts_with("time,")).count(), 1);
    assert!(rows[0].starts_with("time,source,gpu_index,gpu_name,gpu_uuid,memory_used_bytes,"));
    let first: Vec<&str> = rows[1].split(',').collect();
    assert_eq!(
        &first[2..7],
        ["0", "GeForce RTX 2070", "", "785383424", "8368685056"]
    );
    let second_gpu: Vec<&str> = rows[2].split(',').collect();
    assert_eq!(second_gpu[12], "5", "its process count");
}

#[test]
fn tensorboard_scalars_read_back_with_gpuscope_tb() {
    let dir = tempfile::tempdir().unwrap();
    let tb = dir.path().join("tb");
    let out = gpuscope()
        .args(["monitor", "--count", "2", "--interval", "0.1", "--from"])
        .arg(shared(RTX2070))
        .arg("--tensorboard")
        .arg(&tb)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = gpuscope()
        .args(["tb", "--format", "json"])
        .arg(&tb)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let points = |tag: &str| doc["tags"][tag]["points"].as_array().unwrap().clone();
    let used = points("GPU/0/memory_used_MB");
    assert_eq!(used.len(), 2);
    assert_eq!(used[0]["step"], 0);
    assert_eq!(used[1]["step"], 1);
    assert_eq!(used[0]["value"], 749.0);
    assert_eq!(points("GPU/1/power_W")[0]["value"], 1.0);
    assert_eq!(points("GPU/1/temperature_C")[0]["value"], 30.0);
    assert!(points("Host/ram_used_MB")[0]["value"].as_f64().unwrap() > 0.0);
    assert!(doc["tags"].get("System/rss_MB").is_none());
}

#[test]
fn ctrl_c_ends_it_with_the_peaks() {
    let bin = assert_cmd::cargo::cargo_bin("gpuscope");
    let child = std::process::Command::new(bin)
        .args(["monitor", "--interval", "0.2", "--from"])
        .arg(shared(RTX2070))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(900));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("Peaks over "), "{stdout}");
    assert!(
        stdout.contains("GPU 0 GeForce RTX 2070: peak memory 749 MiB / 7.79 GiB (9%)"),
        "{stdout}"
    );
    assert!(stdout.contains("GPU 1 GeForce GTX 750 Ti: peak memory 871 MiB"));
}
