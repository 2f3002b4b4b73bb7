//! `gpuscope compare BASE NEW`: read both run directories, compare, render, and with
//! `--fail-on` exit 1 on a regression, each named on one line of stderr.

use std::path::Path;

use gpuscope::model::run::RunRead;
use gpuscope::{compare_runs, read_run};

use crate::args::CompareArgs;
use crate::{output, Failure};

pub fn run(args: CompareArgs) -> Result<(), Failure> {
    output::not_an_input(args.output.as_deref(), &[Some(&args.base), Some(&args.new)])?;
    let (base, new) = (read(&args.base)?, read(&args.new)?);
    let comparison = compare_runs(&base, &new, &args.fail_on);
    output::emit(args.format, args.output.as_deref(), &comparison)?;
    if comparison.passed() {
        return Ok(());
    }
    for regression in &comparison.regressions {
        eprintln!("regression: {}", regression.line);
    }
    Err(Failure::Exit(1))
}

/// The run directory at `path`; files that could not be used are named on stderr.
fn read(path: &Path) -> Result<RunRead, Failure> {
    let run = read_run(path, &mut output::progress("reading"))?;
    for u in &run.unreadable {
        eprintln!("skipped {}: {}", u.path.display(), u.reason);
    }
    Ok(run)
}
