//! `gpuscope report`: summarise the memory records of one or more runs.

use std::path::{Path, PathBuf};

use gpuscope::analysis::advice::{advise, fragmentation};
use gpuscope::analysis::compare::compare;
use gpuscope::analysis::leak::analyze;
use gpuscope::analysis::losses;
use gpuscope::analysis::summary::summarize;
use gpuscope::render::report::{self as render, RunReport};
use gpuscope::runlog::load::{latest_run, load_run};

use crate::args::{ReportArgs, ReportFormat};
use crate::{output, Failure};

pub fn run(args: ReportArgs) -> Result<(), Failure> {
    let mut reports = Vec::new();
    let mut loaded = Vec::new();
    for given in &args.paths {
        let path = resolve(given)?;
        for rank in load_run(&path)? {
            let (Some(summary), Some(last)) = (summarize(&rank.records), rank.records.last())
            else {
                continue;
            };
            reports.push(RunReport {
                path: path.clone(),
                rank: rank.rank,
                files: rank.files,
                summary,
                leak: analyze(&rank.records),
                fragmentation: fragmentation(last),
                advice: advise(last),
                losses: losses::analyze(&rank.records),
                skipped: rank
                    .skipped
                    .iter()
                    .map(|(file, s)| format!("{}:{}: {}", file.display(), s.line, s.reason))
                    .collect(),
            });
            loaded.push((
                format!("{} (rank {})", path.display(), rank.rank),
                rank.records,
            ));
        }
    }
    let runs: Vec<_> = loaded
        .iter()
        .map(|(l, r)| (l.clone(), r.as_slice()))
        .collect();
    let comparison = compare(&runs);
    let mut out = output::open(args.output.as_deref())?;
    match args.format {
        ReportFormat::Text => render::text(&reports, comparison.as_ref(), &mut out)?,
        ReportFormat::Json => render::json(&reports, comparison.as_ref(), &mut out)?,
    }
    out.flush()?;
    Ok(())
}

/// `latest` → the newest run under `$GPUSCOPE_RUNS` or the current directory, said on stderr.
fn resolve(given: &Path) -> Result<PathBuf, Failure> {
    if given != Path::new("latest") || given.exists() {
        return Ok(given.to_path_buf());
    }
    let root = std::env::var_os("GPUSCOPE_RUNS").map_or_else(|| PathBuf::from("."), PathBuf::from);
    let run = latest_run(&root)?;
    eprintln!("latest run: {}", run.display());
    Ok(run)
}
