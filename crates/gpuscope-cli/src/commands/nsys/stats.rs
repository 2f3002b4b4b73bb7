//! `gpuscope nsys stats`: summarise an `nsys export --type sqlite` file, exporting a
//! `.nsys-rep` report beside itself first (with nsys) when given one.

use std::path::{Path, PathBuf};

use gpuscope::formats::nsys::capture::export_argv;
use gpuscope::{nsys_report, read_export, KernelNames};

use super::{locate, Nsys, NOT_FOUND};
use crate::args::NsysStatsArgs;
use crate::{output, Failure};

pub fn run(a: NsysStatsArgs) -> Result<(), Failure> {
    let sqlite = sqlite_of(&a.path)?;
    let export = read_export(&sqlite)?;
    let names = if a.base {
        KernelNames::Base
    } else {
        KernelNames::Demangled
    };
    output::emit(a.format, a.output.as_deref(), &nsys_report(&export, names))
}

fn is_report(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("nsys-rep") || e.eq_ignore_ascii_case("qdrep"))
}

/// The SQLite export to read: `path` itself, or for a report the `.sqlite` beside it,
/// exported now unless one at least as new is already there.
fn sqlite_of(path: &Path) -> Result<PathBuf, Failure> {
    if !is_report(path) {
        return Ok(path.to_owned());
    }
    let sqlite = path.with_extension("sqlite");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let report_time = modified(path).ok_or_else(|| {
        Failure::Usage(format!(
            "{}: no such report (check the path)",
            path.display()
        ))
    })?;
    if modified(&sqlite).is_some_and(|t| t >= report_time) {
        return Ok(sqlite);
    }
    if locate().is_none() {
        return Err(Failure::Usage(format!(
            "{}: a report nsys must export first, and {NOT_FOUND}; or run `nsys export \
             --type sqlite {}` where Nsight Systems is installed and give the .sqlite",
            path.display(),
            path.display()
        )));
    }
    let code = Nsys::new(false)?.run(&export_argv(path, &sqlite), &[])?;
    if code != 0 {
        return Err(Failure::Usage(format!(
            "{}: nsys export failed with exit code {code} (see its message above)",
            path.display()
        )));
    }
    Ok(sqlite)
}
