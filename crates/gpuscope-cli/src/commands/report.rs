//! `gpuscope report`: diagnose one or more runs from everything each left behind.

use std::path::{Path, PathBuf};

use gpuscope::{latest_run, read_run, report_runs};

use crate::args::ReportArgs;
use crate::{output, Failure};

pub fn run(args: ReportArgs) -> Result<(), Failure> {
    let mut runs = Vec::new();
    for given in &args.paths {
        let path = resolve(given)?;
        output::not_an_input(args.output.as_deref(), &[Some(&path)])?;
        runs.push(read_run(&path, &mut output::progress("reading"))?);
    }
    output::emit(args.format, args.output.as_deref(), &report_runs(runs))
}

/// `latest` → the newest run under `$GPUSCOPE_RUNS` or the current directory, said on stderr.
fn resolve(given: &Path) -> Result<PathBuf, Failure> {
    if given != Path::new("latest") || given.exists() {
        return Ok(given.to_path_buf());
    }
    let root = std::env::var_os("GPUSCOPE_RUNS")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| PathBuf::from("."), PathBuf::from);
    let run = latest_run(&root)?;
    eprintln!("latest run: {}", run.display());
    Ok(run)
}
