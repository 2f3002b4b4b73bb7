//! `gpuscope nsys` as a user runs it. `stats` on the real Nsight Systems 2026.1 export of
//! shared/data/nsys (figures checked against reference.json), as text, JSON and HTML, and
//! on files that are not exports. `profile`, `launch`, `attach` and `stats REPORT.nsys-rep`
//! without nsys (PATH without it: one line, exit 2), and with a stand-in `nsys` script that
//! records its arguments: no machine here has a GPU or Nsight Systems, so these check the
//! command lines gpuscope runs and how it passes exit codes on, not nsys itself.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use common::{stderr_of, stdout_of};
use serde_json::Value;

use crate::common;

fn shared(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

fn export_path() -> PathBuf {
    shared("nsys/cuda_add_rtx4060ti_nsys2026.sqlite")
}

/// `gpuscope nsys ARGS...` with PATH set to `path` (the test's own PATH when `None`).
fn nsys_with_path<I, S>(path: Option<&OsStr>, args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::cargo_bin("gpuscope").unwrap();
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    cmd.env_remove("GPUSCOPE_RUN_DIR");
    cmd.arg("nsys").args(args).output().unwrap()
}

fn nsys<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    nsys_with_path(None, args)
}

/// `gpuscope nsys stats EXPORT --format html` written into `dir`: the page.
fn stats_html(export: &Path, dir: &Path) -> String {
    let page = dir.join("nsys.html");
    let out = nsys([
        OsStr::new("stats"),
        export.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("html"),
        OsStr::new("-o"),
        page.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    std::fs::read_to_string(&page).unwrap()
}

/// Exit 2 with exactly one `error:` line that contains `what`.
fn assert_one_error_line(out: &Output, what: &str) {
    let err = stderr_of(out);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one line expected: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains(what), "{what:?} not in {err}");
}

#[test]
fn stats_text_reads_in_80_columns() {
    let out = nsys([OsStr::new("stats"), export_path().as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let text = stdout_of(&out);
    for heading in [
        "CUDA GPU Kernel Summary (cuda_gpu_kern_sum), times in µs",
        "GPU MemOps Summary by Time (cuda_gpu_mem_time_sum), times in ms",
        "CUDA API Summary (cuda_api_sum), times in ms",
        "NVTX Range Summary (nvtx_sum)",
        "GPU Memory Usage (--cuda-memory-usage true)",
    ] {
        assert!(text.contains(heading), "{heading} missing:\n{text}");
    }
    assert!(text.contains("add_parallel(const float *, const float *, float *, int)"));
    assert!(text.contains("536.542"), "total kernel time in µs:\n{text}");
    assert!(text.contains("[CUDA memcpy Host-to-Device]"));
    assert!(
        text.contains("800.000"),
        "800 MB copied to the device:\n{text}"
    );
    assert!(
        text.contains("    cudaHostAlloc\n"),
        "names without _v3020:\n{text}"
    );
    assert!(text.contains("no NVTX ranges in this capture"));
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "wider than 80: {line:?}");
    }
}

#[test]
fn stats_json_carries_the_reference_figures() {
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(shared("nsys/reference.json")).unwrap())
            .unwrap();
    let out = nsys([
        OsStr::new("stats"),
        export_path().as_os_str(),
        OsStr::new("--format"),
        OsStr::new("json"),
        OsStr::new("--base"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let doc: Value = serde_json::from_str(&stdout_of(&out)).expect("JSON");
    assert_eq!(doc["schema"], "gpuscope.nsys/1");
    assert_eq!(doc["kernel_names"], "base");
    let kernel = &doc["kernels"][0];
    let want = &reference["kernels"][0];
    assert_eq!(kernel["name"], want["name"]);
    assert_eq!(kernel["count"], want["instances"]);
    let us = |ns: &Value| ns.as_f64().unwrap() / 1000.0;
    assert_eq!(kernel["total_us"].as_f64(), Some(us(&want["total_ns"])));
    assert_eq!(kernel["min_us"].as_f64(), Some(us(&want["min_ns"])));
    assert_eq!(kernel["grid"], serde_json::json!([97657, 1, 1]));
    let h2d = doc["memory_size"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["operation"] == "[CUDA memcpy Host-to-Device]")
        .expect("host to device");
    assert_eq!(h2d["total_bytes"], reference["memcpy"][0]["total_bytes"]);
    assert_eq!(h2d["count"], reference["memcpy"][0]["count"]);
    assert_eq!(
        doc["cuda_api"][0]["symbol"],
        reference["runtime_api"][0]["name"]
    );
    assert_eq!(doc["cuda_api"][0]["name"], "cudaHostAlloc");
    // What the capture lacks is null, with the reason beside it.
    assert!(doc["nvtx"].is_null() && doc["memory_usage"].is_null());
    assert!(doc["unavailable"]["memory_usage"]
        .as_str()
        .unwrap()
        .contains("--cuda-memory-usage true"));
}

#[test]
fn stats_html_is_one_self_contained_page_with_names_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("evil.sqlite");
    std::fs::copy(export_path(), &copy).unwrap();
    plant_html_in_kernel_name(&copy);
    let html = stats_html(&copy, dir.path());
    assert!(html.starts_with("<!doctype html>"));
    assert!(html.contains("CUDA GPU Kernel Summary"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(
        !html.contains("<script"),
        "unescaped input or a script in the page"
    );
    for fetch in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!html.contains(fetch), "page fetches: {fetch}");
    }
}

/// Renames the kernel in a copy of the export to an HTML payload by editing the bytes of
/// its StringIds value in place (same length, so the SQLite record stays valid).
fn plant_html_in_kernel_name(path: &Path) {
    let name = b"add_parallel(const float *, const float *, float *, int)";
    let evil = b"<script>alert(1)</script>";
    let mut bytes = std::fs::read(path).unwrap();
    let at = bytes
        .windows(name.len())
        .position(|w| w == name)
        .expect("kernel name in the file");
    // Same length keeps the SQLite record valid: pad with spaces.
    let mut replacement = evil.to_vec();
    replacement.resize(name.len(), b' ');
    bytes[at..at + name.len()].copy_from_slice(&replacement);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn files_that_are_not_exports_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.sqlite");
    std::fs::write(&text, "not a database\n").unwrap();
    let out = nsys([OsStr::new("stats"), text.as_os_str()]);
    assert_one_error_line(&out, "not an SQLite database");
    assert!(stderr_of(&out).contains("notes.sqlite"));

    let cut = dir.path().join("cut.sqlite");
    let bytes = std::fs::read(export_path()).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    assert_one_error_line(&nsys([OsStr::new("stats"), cut.as_os_str()]), "truncated");

    let missing = dir.path().join("missing.sqlite");
    assert_one_error_line(
        &nsys([OsStr::new("stats"), missing.as_os_str()]),
        "missing.sqlite",
    );
}

/// A directory for PATH with no nsys in it.
fn empty_path_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn without_nsys_every_recording_says_how_to_get_it() {
    let bin = empty_path_dir();
    let path = bin.path().as_os_str();
    let runs = tempfile::tempdir().unwrap();
    for args in [
        vec!["profile", "--", "python", "train.py"],
        vec!["launch", "--", "python", "train.py"],
        vec!["attach", "--session", "s1", "--duration", "0"],
    ] {
        let mut args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        args.splice(1..1, [OsStr::new("--logdir"), runs.path().as_os_str()]);
        let out = nsys_with_path(Some(path), &args);
        assert_one_error_line(&out, "nsys not found on PATH");
        assert!(stderr_of(&out).contains("https://developer.nvidia.com/nsight-systems"));
    }
    // Nothing was created for a run that did not start.
    assert_eq!(std::fs::read_dir(runs.path()).unwrap().count(), 0);

    let report = runs.path().join("report1.nsys-rep");
    std::fs::write(&report, b"not really a report").unwrap();
    let out = nsys_with_path(Some(path), [OsStr::new("stats"), report.as_os_str()]);
    assert_one_error_line(&out, "a report nsys must export first");
    assert!(stderr_of(&out).contains("nsys export --type sqlite"));
}

/// A stand-in `nsys` that appends its arguments (one line per call, then the session and
/// run directory it saw in its environment) to `log` and exits with `code`; for
/// `export`, it copies the real export to its `--output=`.
fn fake_nsys(dir: &Path, log: &Path, code: i32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = format!(
        "#!/bin/sh\n\
         echo \"$@\" >> '{log}'\n\
         echo \"env session=$GPUSCOPE_NSYS_SESSION run_dir=$GPUSCOPE_RUN_DIR\" >> '{log}'\n\
         if [ \"$1\" = export ]; then\n\
           for a in \"$@\"; do case $a in --output=*) cp '{real}' \"${{a#--output=}}\";; esac; done\n\
           exit 0\n\
         fi\n\
         exit {code}\n",
        log = log.display(),
        real = export_path().display(),
    );
    let nsys = dir.join("nsys");
    std::fs::write(&nsys, script).unwrap();
    std::fs::set_permissions(&nsys, std::fs::Permissions::from_mode(0o755)).unwrap();
    nsys
}

/// PATH with the stand-in first, then /bin and /usr/bin for `sh` and `cp`.
fn path_with(bin: &Path) -> std::ffi::OsString {
    std::env::join_paths([bin, Path::new("/bin"), Path::new("/usr/bin")]).unwrap()
}

/// A stand-in nsys exiting with a given code, its call log, and a run directory.
struct StandIn {
    bin: tempfile::TempDir,
    runs: tempfile::TempDir,
    log: PathBuf,
}

impl StandIn {
    fn new(code: i32) -> StandIn {
        let bin = tempfile::tempdir().unwrap();
        let log = bin.path().join("calls.log");
        fake_nsys(bin.path(), &log, code);
        StandIn {
            bin,
            runs: tempfile::tempdir().unwrap(),
            log,
        }
    }

    /// The run directory, for `--logdir`.
    fn runs(&self) -> String {
        self.runs.path().display().to_string()
    }

    /// `gpuscope nsys ARGS...` with the stand-in on PATH.
    fn run(&self, args: &[&str]) -> Output {
        nsys_with_path(Some(&path_with(self.bin.path())), args)
    }

    /// What the stand-in was called with so far.
    fn calls(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

#[test]
fn profile_prints_runs_and_passes_on_the_exit_code() {
    let nsys = StandIn::new(3);
    let runs = nsys.runs();
    let out = nsys.run(&[
        "profile",
        "--capture-range",
        "--duration",
        "30",
        "--logdir",
        &runs,
        "--",
        "python",
        "train.py",
        "--lr",
        "1e-3",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("nsys profile --trace=cuda,nvtx,osrt,cublas,cudnn --cuda-memory-usage=true"),
        "the command is printed: {err}"
    );
    let calls = nsys.calls();
    let first = calls.lines().next().unwrap();
    assert!(
        first.starts_with("profile --trace=cuda,nvtx,osrt,cublas,cudnn"),
        "{first}"
    );
    assert!(
        first.contains(&format!("--output={runs}/nsys/profile_")),
        "{first}"
    );
    assert!(first.contains("--export=sqlite"));
    assert!(first.contains("--capture-range=cudaProfilerApi --duration=30"));
    assert!(first.ends_with(" python train.py --lr 1e-3"), "{first}");
    assert!(calls.contains(&format!("run_dir={runs}")));
    assert!(Path::new(&runs).join("nsys").is_dir());
}

#[test]
fn dry_run_prints_the_command_without_nsys() {
    let bin = empty_path_dir();
    let out = nsys_with_path(
        Some(bin.path().as_os_str()),
        ["profile", "--dry-run", "--logdir", "r", "--", "./a.out"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let line = stdout_of(&out);
    assert!(line.starts_with("nsys profile --trace=cuda,nvtx,osrt,cublas,cudnn"));
    assert!(line.contains("--output=r/nsys/profile_"));
    assert!(line.trim_end().ends_with(" ./a.out"));
}

#[test]
fn launch_names_the_session_in_the_trainings_environment() {
    let nsys = StandIn::new(0);
    let out = nsys.run(&[
        "launch",
        "--session",
        "exp1",
        "--logdir",
        "runs/x",
        "--",
        "python",
        "t.py",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        nsys.calls(),
        "launch --session-new=exp1 --trace=cuda,nvtx,osrt,cublas,cudnn \
         --cuda-memory-usage=true python t.py\nenv session=exp1 run_dir=runs/x\n"
    );
}

/// A process that runs for a while with `env` in its environment; killed on drop.
struct Sleeper(std::process::Child);

impl Sleeper {
    fn start(env: &[(&str, &str)]) -> Sleeper {
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("60").env_remove("GPUSCOPE_NSYS_SESSION");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let sleeper = Sleeper(cmd.spawn().expect("sleep"));
        // `spawn` returns once the child has called exec, but the kernel fills in where
        // the new environment is a moment later: until then `/proc/PID/environ` reads
        // empty, and under load the test could look in that moment.
        let environ = format!("/proc/{}/environ", sleeper.0.id());
        let set = |text: &[u8]| {
            env.iter().all(|(k, v)| {
                let entry = format!("{k}={v}");
                text.split(|&b| b == 0).any(|e| e == entry.as_bytes())
            })
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read(&environ).is_ok_and(|text| set(&text)) {
            assert!(Instant::now() < deadline, "{environ} never showed {env:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
        sleeper
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn attach_finds_the_session_of_a_launched_process_and_records() {
    let nsys = StandIn::new(0);
    let runs = nsys.runs();
    let training = Sleeper::start(&[("GPUSCOPE_NSYS_SESSION", "exp7")]);
    let pid = training.0.id().to_string();
    let out = nsys.run(&[
        "attach",
        "--pid",
        &pid,
        "--duration",
        "0",
        "--logdir",
        &runs,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let calls = nsys.calls();
    let lines: Vec<&str> = calls.lines().filter(|l| !l.starts_with("env ")).collect();
    assert_eq!(lines.len(), 2, "{calls}");
    let start = format!("start --session=exp7 --output={runs}/nsys/snapshot_{pid}_");
    assert!(lines[0].starts_with(&start), "{calls}");
    assert_eq!(lines[1], "stop --session=exp7");
    assert!(stderr_of(&out).contains("gpuscope nsys stats"));
}

#[test]
fn attach_to_a_process_nsys_did_not_start_says_what_to_do() {
    let nsys = StandIn::new(0);
    let other = Sleeper::start(&[]);
    let pid = other.0.id().to_string();
    let out = nsys.run(&["attach", "--pid", &pid, "--dry-run"]);
    assert_one_error_line(&out, "not started by gpuscope nsys launch");
    assert!(stderr_of(&out).contains("gpuscope nsys launch -- CMD"));
    assert_eq!(nsys.calls(), "", "nsys must not run");
}

#[test]
fn attach_without_a_training_names_both_ways_to_give_one() {
    let out = nsys(["attach", "--dry-run"]);
    assert_one_error_line(&out, "--pid <PID>|--session <NAME>");
}

#[test]
fn a_failed_start_is_passed_on_and_stop_is_not_run() {
    let nsys = StandIn::new(5);
    let runs = nsys.runs();
    let out = nsys.run(&[
        "attach",
        "--session",
        "gone",
        "--duration",
        "0",
        "--logdir",
        &runs,
    ]);
    assert_eq!(out.status.code(), Some(5));
    assert!(!nsys.calls().contains("stop"), "{}", nsys.calls());
}

#[test]
fn stats_of_a_report_exports_it_beside_itself_first() {
    let nsys = StandIn::new(0);
    let report = nsys.runs.path().join("report1.nsys-rep");
    std::fs::write(&report, b"stand-in report").unwrap();
    let report = report.display().to_string();
    let out = nsys.run(&["stats", &report]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(stdout_of(&out).contains("add_parallel"));
    let sqlite = nsys.runs.path().join("report1.sqlite");
    assert!(sqlite.is_file());
    let export = format!(
        "export --type=sqlite --force-overwrite=true --output={} {report}",
        sqlite.display()
    );
    assert!(nsys.calls().starts_with(&export), "{}", nsys.calls());
    // The export is newer than the report now: used as it is, nsys not run again.
    std::fs::remove_file(&nsys.log).unwrap();
    assert_eq!(nsys.run(&["stats", &report]).status.code(), Some(0));
    assert_eq!(nsys.calls(), "");
}

/// The cells of the first row of the HTML table whose header row holds `first_header`:
/// (class attribute, text).
fn first_row(html: &str, first_header: &str) -> Vec<(String, String)> {
    let table = html
        .split("<table>")
        .find(|t| t.contains(&format!(">{first_header}</th>")))
        .unwrap_or_else(|| panic!("no table headed {first_header}"));
    let row = table.split("<tr>").nth(2).expect("a data row");
    row.split("<td")
        .skip(1)
        .map(|cell| {
            let (open, rest) = cell.split_once('>').unwrap();
            let class = open
                .split("class=\"")
                .nth(1)
                .map_or("", |c| &c[..c.find('"').unwrap()]);
            (
                class.to_owned(),
                rest[..rest.find("</td>").unwrap()].to_owned(),
            )
        })
        .collect()
}

/// nsys stats' tables name the row in their last column (the kernel, the API call), as
/// `nsys stats` prints them. The HTML page marked the first column (Time %) as the name
/// (left-aligned, wrapping) and right-aligned the names. Now the naming column is the
/// name and every figure is right-aligned.
#[test]
fn stats_html_names_the_row_in_its_last_column() {
    let dir = tempfile::tempdir().unwrap();
    let html = stats_html(&export_path(), dir.path());
    // The capture's one kernel, and its API summary's largest call (data: reference.json).
    for (header, name) in [
        ("Instances", "add_parallel("),
        ("Num Calls", "cudaHostAlloc"),
    ] {
        let cells = first_row(&html, header);
        let (last_class, last_text) = cells.last().unwrap();
        assert!(last_text.starts_with(name), "{cells:?}");
        assert_eq!(last_class, "name", "{cells:?}");
        for (class, text) in &cells[..cells.len() - 1] {
            assert_eq!(class, "num", "{text} in {cells:?}");
        }
    }
}
