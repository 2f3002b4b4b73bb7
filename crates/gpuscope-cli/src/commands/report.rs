//! `gpuscope report`: summarise the memory records of one or more runs.

use std::path::{Path, PathBuf};

use gpuscope::analysis::advice::{advise, fragmentation};
use gpuscope::analysis::leak::analyze;
use gpuscope::analysis::losses;
use gpuscope::analysis::summary::summarize;
use gpuscope::render::report::{self as render, RunReport};
use gpuscope::runlog::load::load_run;

use crate::args::{ReportArgs, ReportFormat};
use crate::{output, Failure};

pub fn run(args: ReportArgs) -> Result<(), Failure> {
    let mut reports = Vec::new();
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
        }
    }
    let mut out = output::open(args.output.as_deref())?;
    match args.format {
        ReportFormat::Text => render::text(&reports, &mut out)?,
        ReportFormat::Json => render::json(&reports, &mut out)?,
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
    let newest = walkdir::WalkDir::new(&root)
        .max_depth(4)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name().to_string_lossy();
            e.file_type().is_file()
                && ((name.starts_with("memory") && name.ends_with(".jsonl"))
                    || (name.starts_with("tensor_profile_") && name.ends_with(".log")))
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.into_path())))
        .max_by_key(|(modified, _)| *modified);
    match newest {
        Some((_, file)) => {
            // The run directory is the parent of profiles/.
            let dir = file.parent().unwrap_or(&root);
            let run = if dir.file_name().is_some_and(|n| n == "profiles") {
                dir.parent().unwrap_or(dir).to_path_buf()
            } else {
                dir.to_path_buf()
            };
            eprintln!("latest run: {}", run.display());
            Ok(run)
        }
        None => Err(Failure::Usage(format!(
            "latest: no run with memory records under {} (set GPUSCOPE_RUNS or give a path)",
            root.display()
        ))),
    }
}
