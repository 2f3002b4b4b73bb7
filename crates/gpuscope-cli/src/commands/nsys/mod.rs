//! `gpuscope nsys`: run Nsight Systems' `nsys` to record (profile, launch, attach), and
//! summarise what it recorded (stats). The command lines come from the engine
//! (`gpuscope::formats::nsys::capture`); this module finds nsys, prints and runs them, and passes
//! nsys's exit code on.

mod capture;
mod stats;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use gpuscope::formats::nsys::capture::{find_nsys, install_dirs};

use gpuscope::given_run_dir;

use crate::args::{NsysArgs, NsysCommand, NsysRunArgs};
use crate::{shell, Failure};

/// The line printed when nsys is nowhere to be found.
const NOT_FOUND: &str = "nsys not found on PATH, in /opt/nvidia/nsight-systems*/bin or \
    /usr/local/cuda/bin (install Nsight Systems: https://developer.nvidia.com/nsight-systems, \
    or add its bin/ to PATH)";

pub fn run(args: NsysArgs) -> Result<(), Failure> {
    match args.command {
        NsysCommand::Profile(a) => capture::profile(a),
        NsysCommand::Launch(a) => capture::launch(a),
        NsysCommand::Attach(a) => capture::attach(a),
        NsysCommand::Stats(a) => stats::run(a),
    }
}

/// The nsys to run.
fn locate() -> Option<PathBuf> {
    let extra = install_dirs(Path::new("/opt/nvidia"), Path::new("/usr/local/cuda"));
    find_nsys(std::env::var_os("PATH").as_deref(), &extra)
}

/// The run directory: `--logdir`, else `$GPUSCOPE_RUN_DIR`, else `runs/gpuscope` (as the
/// Python side defaults).
fn run_dir(run: &NsysRunArgs) -> PathBuf {
    given_run_dir(run.logdir.as_deref()).unwrap_or_else(|| PathBuf::from("runs/gpuscope"))
}

/// A prepared nsys invocation: printed, then run unless `--dry-run`.
struct Nsys {
    program: PathBuf,
    dry_run: bool,
}

impl Nsys {
    /// nsys itself, or with `--dry-run` whatever is found (`nsys` if nothing is).
    fn new(dry_run: bool) -> Result<Nsys, Failure> {
        let program = match (locate(), dry_run) {
            (Some(p), _) => p,
            (None, true) => PathBuf::from("nsys"),
            (None, false) => return Err(Failure::Usage(NOT_FOUND.to_owned())),
        };
        Ok(Nsys { program, dry_run })
    }

    /// Prints and runs `nsys argv...` with `env` added; returns its exit code (128 plus
    /// the signal when a signal ended it; 0 for a dry run).
    fn run(&self, argv: &[OsString], env: &[(&str, &OsStr)]) -> Result<i32, Failure> {
        let line = shell::line(
            std::iter::once(self.program.as_os_str()).chain(argv.iter().map(OsString::as_os_str)),
        );
        if self.dry_run {
            println!("{line}");
            return Ok(0);
        }
        eprintln!("gpuscope: {line}");
        let status = Command::new(&self.program)
            .args(argv)
            .envs(env.iter().copied())
            .status()
            .map_err(|e| {
                Failure::Usage(format!(
                    "{}: cannot run nsys: {e} (check the Nsight Systems installation)",
                    self.program.display()
                ))
            })?;
        Ok(exit_code(status))
    }
}

#[cfg(unix)]
fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

#[cfg(not(unix))]
fn exit_code(status: std::process::ExitStatus) -> i32 {
    status.code().unwrap_or(1)
}

/// Success for 0, else nsys's code passed on.
fn passed_on(code: i32) -> Result<(), Failure> {
    match code {
        0 => Ok(()),
        c => Err(Failure::Exit(c)),
    }
}
