//! The nsys command lines gpuscope runs, built as data so they can be printed, tested and
//! run by the CLI (which alone starts processes): `nsys profile` with the traces a PyTorch
//! recommend, `nsys launch` / `start` / `stop` for a snapshot of a running training (the
//! way Nsight Systems documents recording a process it started earlier: it cannot attach
//! to one it did not start), and `nsys export` of a report to SQLite. Also: where nsys is
//! installed, and which session a launched process belongs to.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// What a PyTorch training is traced with: CUDA, NVTX ranges, OS runtime calls, cuBLAS
/// and cuDNN.
pub const TRACES: &str = "cuda,nvtx,osrt,cublas,cudnn";

/// Environment variable `gpuscope nsys launch` sets in the training's environment so that
/// `gpuscope nsys attach --pid` finds its session.
pub const SESSION_ENV: &str = "GPUSCOPE_NSYS_SESSION";

/// The directory of a run directory where nsys reports go.
pub const NSYS_DIR: &str = "nsys";

/// `--name=value` as one argument.
fn flag(name: &str, value: impl AsRef<OsStr>) -> OsString {
    let mut f = OsString::from(format!("--{name}="));
    f.push(value);
    f
}

/// The flags every recording shares: those traces and CUDA memory usage.
fn trace_flags() -> [OsString; 2] {
    [flag("trace", TRACES), flag("cuda-memory-usage", "true")]
}

/// `nsys profile ...` writing `output`.nsys-rep and `output`.sqlite; `capture_range`
/// records only between cudaProfilerStart and cudaProfilerStop, `duration` stops after so
/// many seconds.
pub fn profile_argv(
    output: &Path,
    capture_range: bool,
    duration: Option<u32>,
    command: &[OsString],
) -> Vec<OsString> {
    let mut argv = vec![OsString::from("profile")];
    argv.extend(trace_flags());
    argv.push(flag("export", "sqlite"));
    argv.push(flag("output", output));
    if capture_range {
        argv.push(flag("capture-range", "cudaProfilerApi"));
    }
    if let Some(s) = duration {
        argv.push(flag("duration", s.to_string()));
    }
    argv.extend(command.iter().cloned());
    argv
}

/// `nsys launch` of `command` in a new session `session`, traced as [`profile_argv`]
/// traces, recording nothing until `nsys start`.
pub fn launch_argv(session: &str, command: &[OsString]) -> Vec<OsString> {
    let mut argv = vec![OsString::from("launch"), flag("session-new", session)];
    argv.extend(trace_flags());
    argv.extend(command.iter().cloned());
    argv
}

/// `nsys start` recording session `session` into `output`.nsys-rep.
pub fn start_argv(session: &str, output: &Path) -> Vec<OsString> {
    vec![
        "start".into(),
        flag("session", session),
        flag("output", output),
    ]
}

/// `nsys stop` of session `session`: ends the recording and writes the report.
pub fn stop_argv(session: &str) -> Vec<OsString> {
    vec!["stop".into(), flag("session", session)]
}

/// `nsys export` of `report` (.nsys-rep) to the SQLite file `sqlite`.
pub fn export_argv(report: &Path, sqlite: &Path) -> Vec<OsString> {
    vec![
        "export".into(),
        flag("type", "sqlite"),
        flag("force-overwrite", "true"),
        flag("output", sqlite),
        report.into(),
    ]
}

/// `<run dir>/nsys/<stem>_<YYYYmmdd_HHMMSS>` (local time, as the run logs are named);
/// nsys adds the extensions.
pub fn output_stem(run_dir: &Path, stem: &str) -> PathBuf {
    let stamp = chrono::Local::now().format("%Y%m%d_%H%M%S");
    run_dir.join(NSYS_DIR).join(format!("{stem}_{stamp}"))
}

/// A session name for `gpuscope nsys launch`: `gpuscope-<YYYYmmdd_HHMMSS>`.
pub fn default_session() -> String {
    format!("gpuscope-{}", chrono::Local::now().format("%Y%m%d_%H%M%S"))
}

/// The session named in a process environment (`/proc/<pid>/environ`: `NAME=value`
/// entries separated by NUL bytes).
pub fn session_from_environ(environ: &[u8]) -> Option<String> {
    let prefix = format!("{SESSION_ENV}=");
    environ
        .split(|&b| b == 0)
        .find_map(|entry| entry.strip_prefix(prefix.as_bytes()))
        .map(|value| String::from_utf8_lossy(value).into_owned())
        .filter(|s| !s.is_empty())
}

/// Directories searched for `nsys` after PATH: Nsight Systems' own installs (newest
/// version first) and the CUDA toolkit's.
pub fn install_dirs(opt_nvidia: &Path, cuda: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(opt_nvidia)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("nsight-systems")
        })
        .map(|e| e.path().join("bin"))
        .collect();
    found.sort();
    found.reverse();
    found.push(cuda.join("bin"));
    found
}

/// The first executable `nsys` on `path` (a PATH value), then in `extra` directories.
pub fn find_nsys(path: Option<&OsStr>, extra: &[PathBuf]) -> Option<PathBuf> {
    let on_path: Vec<PathBuf> = path.map_or_else(Vec::new, |p| std::env::split_paths(p).collect());
    on_path
        .iter()
        .chain(extra)
        .map(|dir| dir.join("nsys"))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.with_extension("exe").is_file() || path.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(argv: &[OsString]) -> Vec<String> {
        argv.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn cmd(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn profile_uses_the_training_flags_and_names_the_output() {
        let argv = profile_argv(
            Path::new("runs/x/nsys/profile_1"),
            false,
            None,
            &cmd(&["python", "train.py", "--lr", "1e-3"]),
        );
        assert_eq!(
            strings(&argv),
            [
                "profile",
                "--trace=cuda,nvtx,osrt,cublas,cudnn",
                "--cuda-memory-usage=true",
                "--export=sqlite",
                "--output=runs/x/nsys/profile_1",
                "python",
                "train.py",
                "--lr",
                "1e-3"
            ]
        );
    }

    #[test]
    fn capture_range_and_duration_are_added_when_asked() {
        let argv = profile_argv(Path::new("o"), true, Some(30), &cmd(&["./a.out"]));
        let argv = strings(&argv);
        assert!(argv.contains(&"--capture-range=cudaProfilerApi".to_owned()));
        assert!(argv.contains(&"--duration=30".to_owned()));
        assert_eq!(argv.last().map(String::as_str), Some("./a.out"));
    }

    #[test]
    fn snapshot_commands_share_the_session() {
        assert_eq!(
            strings(&launch_argv("s1", &cmd(&["python", "t.py"]))),
            [
                "launch",
                "--session-new=s1",
                "--trace=cuda,nvtx,osrt,cublas,cudnn",
                "--cuda-memory-usage=true",
                "python",
                "t.py"
            ]
        );
        assert_eq!(
            strings(&start_argv("s1", Path::new("d/snap"))),
            ["start", "--session=s1", "--output=d/snap"]
        );
        assert_eq!(strings(&stop_argv("s1")), ["stop", "--session=s1"]);
        assert_eq!(
            strings(&export_argv(Path::new("r.nsys-rep"), Path::new("r.sqlite"))),
            [
                "export",
                "--type=sqlite",
                "--force-overwrite=true",
                "--output=r.sqlite",
                "r.nsys-rep"
            ]
        );
    }

    #[test]
    fn the_session_is_read_from_a_process_environment() {
        let environ = b"PATH=/bin\0GPUSCOPE_NSYS_SESSION=exp1\0HOME=/root\0";
        assert_eq!(session_from_environ(environ).as_deref(), Some("exp1"));
        assert_eq!(session_from_environ(b"PATH=/bin\0"), None);
        assert_eq!(session_from_environ(b"GPUSCOPE_NSYS_SESSION=\0"), None);
        assert_eq!(session_from_environ(b""), None);
    }

    #[cfg(unix)]
    #[test]
    fn nsys_is_found_on_path_first_then_in_install_dirs() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (on_path, opt) = (dir.path().join("bin"), dir.path().join("opt"));
        let old = opt.join("nsight-systems-2025.1.1/bin");
        let new = opt.join("nsight-systems-2026.1.1/bin");
        for d in [&on_path, &old, &new] {
            std::fs::create_dir_all(d).unwrap();
        }
        let make = |d: &Path, mode: u32| {
            let f = d.join("nsys");
            std::fs::write(&f, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            f
        };
        make(&old, 0o755);
        let newest = make(&new, 0o755);
        let extra = install_dirs(&opt, &dir.path().join("cuda"));
        let path = std::env::join_paths([&on_path]).unwrap();
        assert_eq!(find_nsys(Some(&path), &extra), Some(newest));
        // Not executable: not nsys.
        make(&on_path, 0o644);
        assert_eq!(find_nsys(Some(&path), &[]), None);
        let first = make(&on_path, 0o755);
        assert_eq!(find_nsys(Some(&path), &extra), Some(first));
        assert_eq!(find_nsys(None, &[]), None);
    }
}
