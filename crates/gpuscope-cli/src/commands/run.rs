//! `gpuscope run [--logdir DIR] -- CMD ...`: starts CMD with `GPUSCOPE_RUN_DIR` set to
//! the run directory, samples GPUs, the host and CMD's process tree every `--interval`
//! into `gpu.jsonl` and `tensorboard/` there, passes SIGINT/SIGTERM on, and returns CMD's
//! exit code (128+N when signal N killed it) after a summary on stderr.
//!
//! Its own failures before CMD starts (run directory, a command that cannot be started)
//! exit 2 with one `error:` line. Once CMD runs, nothing of gpuscope's may stop it: a log
//! that cannot be written is said once and sampling goes on without it.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use gpuscope::render::monitor as render;
use gpuscope::{given_run_dir, Peaks, SampleLog, Sampler, RUN_DIR_VAR};

use crate::args::RunArgs;
use crate::shell;
use crate::signals::{sleep_until, Stop};
use crate::Failure;

pub fn run(args: RunArgs) -> Result<(), Failure> {
    let (run_dir, created) = run_dir(args.logdir.as_deref())?;
    let mut sampler = Sampler::detect();
    let stop = Stop::catch()?;
    let started = Instant::now();
    let mut child = spawn(&args.command, &run_dir).inspect_err(|_| {
        if created {
            // Only if still empty: nothing of anyone else's is removed.
            let _ = std::fs::remove_dir(&run_dir);
        }
    })?;
    if let Some(reason) = sampler.no_gpu_reason() {
        eprintln!("gpuscope run: no NVIDIA GPU found: {reason}; recording host figures only");
    }
    stop.forward_to(child.id());
    sampler.follow_tree(child.id());
    let mut log = open_log(&run_dir);
    let interval = Duration::from_secs_f64(args.interval);
    let mut peaks = Peaks::default();
    let status = loop {
        let tick = Instant::now();
        let sample = sampler.sample();
        peaks.add(&sample);
        if let Some(l) = &mut log {
            if let Err(e) = l.write(&sample) {
                eprintln!("gpuscope run: {e}; samples are no longer written");
                log = None;
            }
        }
        sleep_until(tick + interval, || exited(&mut child).is_some());
        if let Some(status) = exited(&mut child) {
            break status;
        }
    };
    let duration = started.elapsed().as_secs_f64();
    if let Some(mut l) = log {
        if let Err(e) = l.close() {
            eprintln!("gpuscope run: {e}");
        }
    }
    let code = exit_code(status);
    summary(&args.command, code, duration, &run_dir, &peaks);
    match code {
        0 => Ok(()),
        code => Err(Failure::Exit(code)),
    }
}

/// `--logdir`, else `$GPUSCOPE_RUN_DIR`, else a new `runs/<YYYYmmdd_HHMMSS>` (the text
/// log's timestamp format; `_2`, `_3`... when several start in one second); created, and
/// whether it was created now.
fn run_dir(given: Option<&Path>) -> Result<(PathBuf, bool), Failure> {
    let dir = given_run_dir(given).unwrap_or_else(|| {
        let stamp = chrono::Local::now().format("%Y%m%d_%H%M%S").to_string();
        let base = Path::new("runs").join(&stamp);
        std::iter::once(base.clone())
            .chain((2..1000).map(|n| Path::new("runs").join(format!("{stamp}_{n}"))))
            .find(|dir| !dir.exists())
            .unwrap_or(base)
    });
    let created = !dir.exists();
    std::fs::create_dir_all(&dir).map_err(|e| {
        Failure::Usage(format!(
            "{}: cannot create the run directory: {e} (check --logdir)",
            dir.display()
        ))
    })?;
    Ok((std::path::absolute(&dir).unwrap_or(dir), created))
}

fn spawn(command: &[OsString], run_dir: &Path) -> Result<Child, Failure> {
    let (program, rest) = command
        .split_first()
        .ok_or_else(|| Failure::Usage("no command given (gpuscope run -- CMD ...)".into()))?;
    Command::new(program)
        .args(rest)
        .env(RUN_DIR_VAR, run_dir)
        .spawn()
        .map_err(|e| {
            Failure::Usage(format!(
                "{}: cannot start the command: {e} (check its name and PATH)",
                program.to_string_lossy()
            ))
        })
}

/// `gpu.jsonl` and `tensorboard/` in the run directory; `None`, said once, if they
/// cannot be opened — the command runs on.
fn open_log(run_dir: &Path) -> Option<SampleLog> {
    let mut log = SampleLog::default();
    let opened = log
        .add_file(&run_dir.join("gpu.jsonl"))
        .and_then(|()| log.add_tensorboard(&run_dir.join("tensorboard")));
    match opened {
        Ok(()) => {
            let earlier = log.earlier_samples();
            if earlier > 0 {
                eprintln!(
                    "gpuscope run: {} already holds {earlier} samples of an earlier run; this \
                     run's are appended, TensorBoard steps continuing from {earlier}",
                    run_dir.display()
                );
            }
            Some(log)
        }
        Err(e) => {
            eprintln!("gpuscope run: {e}; the command runs without samples");
            None
        }
    }
}

fn exited(child: &mut Child) -> Option<ExitStatus> {
    child.try_wait().ok().flatten()
}

/// The exit code a shell would report: the code, or 128+N for death by signal N.
fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|n| 128 + n))
        .unwrap_or(1)
}

fn summary(command: &[OsString], code: i32, duration: f64, run_dir: &Path, peaks: &Peaks) {
    let mut text = format!(
        "gpuscope run: `{}` exited with code {code} after {duration:.1} s; {} samples in {}\n",
        shell::line(command.iter().map(OsString::as_os_str)),
        peaks.samples,
        run_dir.join("gpu.jsonl").display()
    );
    let mut lines = Vec::new();
    if render::summary_text(peaks, &mut lines).is_ok() {
        text += &String::from_utf8_lossy(&lines);
    }
    eprint!("{text}");
}
