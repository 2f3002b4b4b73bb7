//! `gpuscope run -- CMD` with real children: exit codes (a code, death by a signal),
//! signals passed on, the run directory the child is given, what lands in `gpu.jsonl`,
//! and a command that cannot be started.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use assert_cmd::Command;
use common::{one_error_line, text};

use crate::common;

/// `gpuscope run --logdir DIR -- sh -c SCRIPT`.
fn run_sh(dir: &Path, script: &str) -> Output {
    Command::cargo_bin("gpuscope")
        .unwrap()
        .args(["run", "--interval", "0.2", "--logdir"])
        .arg(dir)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap()
}

fn samples(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("gpu.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_childs_exit_code_is_returned() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_sh(dir.path(), "exit 7");
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    // The command as a shell line that can be copied: the script stays one word.
    assert!(
        text(&out.stderr).contains("`sh -c 'exit 7'` exited with code 7"),
        "{}",
        text(&out.stderr)
    );
    let out = run_sh(dir.path(), "true");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn death_by_a_signal_is_128_plus_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_sh(dir.path(), "kill -TERM $$");
    assert_eq!(out.status.code(), Some(128 + 15), "{}", text(&out.stderr));
    let out = run_sh(dir.path(), "kill -KILL $$");
    assert_eq!(out.status.code(), Some(128 + 9));
}

#[test]
fn sigterm_and_sigint_are_passed_on_to_the_command() {
    for (signal, name) in [
        (nix::sys::signal::Signal::SIGTERM, "TERM"),
        (nix::sys::signal::Signal::SIGINT, "INT"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let script = format!(
            "trap 'echo {name} > \"$GPUSCOPE_RUN_DIR/caught\"; exit 5' {name}; \
             touch \"$GPUSCOPE_RUN_DIR/ready\"; sleep 3 & wait"
        );
        let bin = assert_cmd::cargo::cargo_bin("gpuscope");
        let child = std::process::Command::new(bin)
            .args(["run", "--interval", "0.2", "--logdir"])
            .arg(dir.path())
            .args(["--", "sh", "-c", &script])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        for _ in 0..100 {
            if dir.path().join("ready").exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, signal).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
        let caught = std::fs::read_to_string(dir.path().join("caught")).unwrap();
        assert_eq!(caught.trim(), name);
    }
}

#[test]
fn the_child_sees_the_run_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_sh(
        dir.path(),
        "printf %s \"$GPUSCOPE_RUN_DIR\" > \"$GPUSCOPE_RUN_DIR/seen\"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let seen = std::fs::read_to_string(dir.path().join("seen")).unwrap();
    assert_eq!(Path::new(&seen), dir.path());
}

#[test]
fn without_logdir_the_run_directory_is_the_callers_or_a_new_one() {
    let cwd = tempfile::tempdir().unwrap();
    let given = cwd.path().join("given");
    let out = Command::cargo_bin("gpuscope")
        .unwrap()
        .current_dir(cwd.path())
        .env("GPUSCOPE_RUN_DIR", &given)
        .args(["run", "--", "true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(given.join("gpu.jsonl").is_file());

    let out = Command::cargo_bin("gpuscope")
        .unwrap()
        .current_dir(cwd.path())
        .env_remove("GPUSCOPE_RUN_DIR")
        .args(["run", "--", "true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let runs: Vec<_> = std::fs::read_dir(cwd.path().join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(runs.len(), 1);
    // runs/<YYYYmmdd_HHMMSS>
    let name = &runs[0];
    assert_eq!(name.len(), 15, "{name}");
    assert_eq!(&name[8..9], "_");
    assert!(name.replace('_', "").bytes().all(|b| b.is_ascii_digit()));
}

#[test]
fn gpu_jsonl_holds_the_process_trees_memory() {
    let dir = tempfile::tempdir().unwrap();
    // A child that starts a grandchild holding 64 MiB: the tree's RSS must include it.
    let script = "python3 -c 'import time; b = bytearray(64 << 20); time.sleep(1.2)'";
    let out = run_sh(dir.path(), script);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let samples = samples(dir.path());
    assert!(samples.len() >= 3, "{} samples", samples.len());
    let first = &samples[0];
    assert_eq!(first["schema"], "gpuscope.gpu_sample/1");
    let peak_rss = samples
        .iter()
        .filter_map(|s| s["tree"]["rss_bytes"].as_u64())
        .max()
        .unwrap();
    assert!(peak_rss >= 64 << 20, "{peak_rss}");
    let most_pids = samples
        .iter()
        .map(|s| s["tree"]["pids"].as_array().map_or(0, Vec::len))
        .max()
        .unwrap();
    assert!(most_pids >= 2, "sh and its python child");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("Command: peak RSS "), "{stderr}");
    assert!(dir.path().join("tensorboard").is_dir());
}

#[test]
fn gpuscope_no_gpu_records_host_figures_only() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("gpuscope")
        .unwrap()
        .env("GPUSCOPE_NO_GPU", "1")
        .args(["run", "--interval", "0.2", "--logdir"])
        .arg(dir.path())
        .args(["--", "sleep", "0.5"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "gpuscope run: no NVIDIA GPU found: NVML and nvidia-smi not tried \
             (GPUSCOPE_NO_GPU=1); recording host figures only\n"
        ),
        "{stderr}"
    );
    let samples = samples(dir.path());
    assert!(samples.len() >= 2, "{} samples", samples.len());
    for sample in &samples {
        assert_eq!(sample["source"], "none");
        assert!(sample["gpus"].as_array().unwrap().is_empty());
        assert!(sample["host"]["ram_total_bytes"].as_u64().unwrap() > 0);
    }
}

#[test]
fn a_command_that_cannot_start_exits_2_with_one_line() {
    let cwd = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("gpuscope")
        .unwrap()
        .current_dir(cwd.path())
        .env_remove("GPUSCOPE_RUN_DIR")
        .args(["run", "--", "no-such-command-gpuscope-test", "--flag"])
        .output()
        .unwrap();
    let err = one_error_line(&out);
    assert!(
        err.starts_with("error: no-such-command-gpuscope-test: cannot start the command"),
        "{err}"
    );
    // The run directory made for it is taken away again.
    let left: Vec<_> = std::fs::read_dir(cwd.path().join("runs"))
        .unwrap()
        .collect();
    assert!(left.is_empty());
}

#[test]
fn a_run_without_a_command_is_a_usage_error() {
    let out = Command::cargo_bin("gpuscope")
        .unwrap()
        .args(["run"])
        .output()
        .unwrap();
    one_error_line(&out);
}

#[test]
fn a_second_run_into_the_same_directory_continues_its_log_and_steps() {
    let dir = tempfile::tempdir().unwrap();
    let first = run_sh(dir.path(), "sleep 0.5");
    assert!(first.status.success(), "{}", text(&first.stderr));
    let earlier = samples(dir.path()).len();
    assert!(earlier >= 2, "{earlier} samples");
    // A run killed while writing a sample leaves its last line cut off.
    let log = dir.path().join("gpu.jsonl");
    let mut cut = std::fs::read(&log).unwrap();
    cut.extend_from_slice(b"{\"schema\": \"gpuscope.gpu_sam");
    std::fs::write(&log, cut).unwrap();

    let second = run_sh(dir.path(), "sleep 0.5");
    assert!(second.status.success(), "{}", text(&second.stderr));
    let stderr = text(&second.stderr);
    let said = format!(
        "already holds {} samples of an earlier run; this run's are appended, TensorBoard \
         steps continuing from {}",
        earlier + 1,
        earlier + 1
    );
    assert!(stderr.contains(&said), "{stderr}");
    // The cut-off line stays as it was, alone on its line; every later line is whole.
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[earlier], "{\"schema\": \"gpuscope.gpu_sam");
    assert!(lines.len() > earlier + 2, "{} lines", lines.len());
    for line in &lines[earlier + 1..] {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }

    // TensorBoard: the second event file's steps start after the first run's samples.
    let out = Command::cargo_bin("gpuscope")
        .unwrap()
        .arg("tb")
        .arg(dir.path().join("tensorboard"))
        .args(["--tag", "Host/ram_used_MB", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps: Vec<i64> = json["tags"]["Host/ram_used_MB"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["step"].as_i64().unwrap())
        .collect();
    let mut sorted = steps.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), steps.len(), "a step written twice: {steps:?}");
    assert!(
        steps.contains(&0) && steps.contains(&(earlier as i64 + 1)),
        "{steps:?}"
    );
}
