//! `gpuscope nsys profile`, `launch` and `attach`: record with nsys into the run
//! directory's `nsys/`, and say which file to give `gpuscope nsys stats`.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use gpuscope::formats::nsys::capture::{
    default_session, launch_argv, output_stem, profile_argv, session_from_environ, start_argv,
    stop_argv, SESSION_ENV,
};
use gpuscope::RUN_DIR_VAR;

use super::{passed_on, run_dir, Nsys};
use crate::args::{NsysAttachArgs, NsysLaunchArgs, NsysProfileArgs};
use crate::Failure;

fn create_dir(dir: &Path) -> Result<(), Failure> {
    std::fs::create_dir_all(dir).map_err(|e| {
        Failure::Usage(format!(
            "{}: cannot create the directory: {e} (give another --logdir)",
            dir.display()
        ))
    })
}

pub fn profile(a: NsysProfileArgs) -> Result<(), Failure> {
    let dir = run_dir(&a.run);
    let output = output_stem(&dir, "profile");
    let argv = profile_argv(&output, a.capture_range, a.duration, &a.command);
    let nsys = Nsys::new(a.run.dry_run)?;
    if !a.run.dry_run {
        create_dir(output.parent().unwrap_or(&dir))?;
    }
    let code = nsys.run(&argv, &[(RUN_DIR_VAR, dir.as_os_str())])?;
    if code == 0 && !a.run.dry_run {
        eprintln!(
            "gpuscope: summarise with: gpuscope nsys stats {}.sqlite",
            output.display()
        );
    }
    passed_on(code)
}

pub fn launch(a: NsysLaunchArgs) -> Result<(), Failure> {
    let dir = run_dir(&a.run);
    let session = a.session.clone().unwrap_or_else(default_session);
    let argv = launch_argv(&session, &a.command);
    let nsys = Nsys::new(a.run.dry_run)?;
    if !a.run.dry_run {
        eprintln!(
            "gpuscope: nsys session {session}; record a snapshot with: gpuscope nsys attach \
             --session {session} (or --pid of the training)"
        );
    }
    let env = [
        (SESSION_ENV, OsStr::new(&session)),
        (RUN_DIR_VAR, dir.as_os_str()),
    ];
    passed_on(nsys.run(&argv, &env)?)
}

pub fn attach(a: NsysAttachArgs) -> Result<(), Failure> {
    let session = match (&a.session, a.pid) {
        (Some(s), _) => s.clone(),
        (None, Some(pid)) => session_of(pid)?,
        (None, None) => {
            return Err(Failure::Usage(
                "give --pid PID or --session NAME (see gpuscope nsys attach --help)".to_owned(),
            ))
        }
    };
    let dir = run_dir(&a.run);
    let stem = a
        .pid
        .map_or_else(|| "snapshot".to_owned(), |p| format!("snapshot_{p}"));
    let output = output_stem(&dir, &stem);
    let nsys = Nsys::new(a.run.dry_run)?;
    if !a.run.dry_run {
        create_dir(output.parent().unwrap_or(&dir))?;
    }
    passed_on(nsys.run(&start_argv(&session, &output), &[])?)?;
    if !a.run.dry_run {
        eprintln!("gpuscope: recording for {} s", a.duration);
        std::thread::sleep(Duration::from_secs(u64::from(a.duration)));
    }
    passed_on(nsys.run(&stop_argv(&session), &[])?)?;
    if !a.run.dry_run {
        eprintln!(
            "gpuscope: summarise with: gpuscope nsys stats {}.nsys-rep",
            output.display()
        );
    }
    Ok(())
}

/// The nsys session a process was launched in, from its environment.
fn session_of(pid: u32) -> Result<String, Failure> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).map_err(|e| {
        Failure::Usage(match e.kind() {
            std::io::ErrorKind::NotFound => {
                format!("process {pid}: no such process (check the pid)")
            }
            _ => format!(
                "process {pid}: cannot read its environment: {e} (run as the training's user, \
                 or give --session NAME)"
            ),
        })
    })?;
    session_from_environ(&environ).ok_or_else(|| {
        Failure::Usage(format!(
            "process {pid}: not started by gpuscope nsys launch, no {SESSION_ENV} in its \
             environment (Nsight Systems records only processes it started: start the training \
             with gpuscope nsys launch -- CMD, or give --session NAME of an nsys launch \
             --session-new NAME)"
        ))
    })
}
