//! Lists what a run directory holds, source by source ([`Sources`]): the files each
//! source's reader would take, by name only (nothing is read here), and the sources with
//! none.

use std::path::{Path, PathBuf};

use super::load::{run_source, RecordSource};
use super::paths::oom_report_rank;
use crate::formats::trace::load::is_trace_file_name;
use crate::model::sources::{Absent, Found, Source, Sources};
use crate::{Error, Result};

/// The sources of the run directory `run_dir`.
pub fn run_sources(run_dir: &Path) -> Result<Sources> {
    let meta = std::fs::metadata(run_dir).map_err(|e| Error::io(run_dir, e))?;
    if !meta.is_dir() {
        return Err(Error::bad_input(run_dir, "not a run directory"));
    }
    let mut sources = Sources::default();
    for &source in Source::ALL {
        let files = files_of(run_dir, source)?;
        if files.is_empty() {
            sources.absent.push(Absent {
                source,
                written_by: source.written_by(),
            });
        } else {
            sources.found.push(Found { source, files });
        }
    }
    Ok(sources)
}

fn files_of(dir: &Path, source: Source) -> Result<Vec<PathBuf>> {
    match source {
        // As `gpuscope report` reads them: JSONL, else text logs, else TensorBoard tags
        // (`tensorboard/`, or the event files of a TensorBoard directory given itself).
        Source::Memory => Ok(match run_source(dir) {
            Ok(RecordSource::Files(files)) => files,
            Ok(RecordSource::TensorBoard(events)) => vec![events],
            Err(_) => Vec::new(), // a directory of runs, or none: no records of its own
        }),
        Source::Trace => listed(&dir.join("profiler_traces"), is_trace_file_name),
        Source::Snapshot => listed(&dir.join("snapshots"), |name| {
            name.ends_with(".pickle") || oom_report_rank(name).is_some()
        }),
        Source::Gpu => Ok([dir.join("gpu.jsonl")]
            .into_iter()
            .filter(|p| p.is_file())
            .collect()),
        Source::Nonfinite => listed(&dir.join("profiles"), |name| {
            name.starts_with("nonfinite") && (name.ends_with(".jsonl") || name.ends_with(".txt"))
        }),
        Source::Nsys => listed(&dir.join("nsys"), |name| {
            [".nsys-rep", ".qdrep", ".sqlite"]
                .iter()
                .any(|ext| name.ends_with(ext))
        }),
    }
}

/// The files of `dir` whose names `keep` takes, sorted; none when `dir` does not exist.
fn listed(dir: &Path, keep: impl Fn(&str) -> bool) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        // `is_file` follows links: a run directory may link files kept elsewhere.
        if keep(&entry.file_name().to_string_lossy()) && entry.path().is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}
