//! Reads what `gpuscope compare` needs of a run directory, each source by its own reader:
//! the memory records of every rank ([`load_run`]), the profiler traces of
//! `profiler_traces/` ([`load_traces`]) and the latest allocator snapshot of the lowest rank
//! ([`read_snapshot`]). Which files a source has is [`run_sources`]'s answer.

use std::path::{Path, PathBuf};

use super::runlog::load::load_run;
use super::runlog::paths::snapshot_iteration;
use super::runlog::sources::run_sources;
use super::snapshot::{read_snapshot, Parts};
use super::trace::load_traces;
use crate::model::run::RunData;
use crate::model::sources::Source;
use crate::{Error, Result};

/// The run directory `dir`, read. Fails when `dir` is not a directory or has no memory
/// records; a trace directory with no usable trace, or a damaged snapshot, fails too (the
/// comparison would otherwise quietly lose a figure).
pub fn read_run_dir(dir: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<RunData> {
    let sources = run_sources(dir).map_err(|e| match e {
        Error::BadInput { path, .. } => Error::bad_input(
            path,
            "not a run directory (give the directory a training wrote, with profiles/ in it)",
        ),
        e => e,
    })?;
    let ranks = load_run(dir, progress)?;
    let (traces, skipped) = if sources.files(Source::Trace).is_empty() {
        (Vec::new(), Vec::new())
    } else {
        let loaded = load_traces(&dir.join("profiler_traces"), progress)?;
        (loaded.traces, loaded.skipped)
    };
    let snapshot = match latest_snapshot(sources.files(Source::Snapshot)) {
        Some(path) => {
            let snapshot = read_snapshot(&path, Parts::All, progress)?;
            Some((path, snapshot))
        }
        None => None,
    };
    Ok(RunData {
        path: dir.to_path_buf(),
        ranks,
        traces,
        snapshot,
        skipped,
    })
}

/// Of the snapshots taken at an iteration, the lowest rank's latest.
fn latest_snapshot(files: &[PathBuf]) -> Option<PathBuf> {
    files
        .iter()
        .filter_map(|path| {
            let name = path.file_name()?.to_string_lossy();
            let (rank, iteration) = snapshot_iteration(&name)?;
            Some((std::cmp::Reverse(rank.unwrap_or(0)), iteration, path))
        })
        .max()
        .map(|(_, _, path)| path.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_ranks_latest_snapshot_is_compared() {
        let files: Vec<PathBuf> = [
            "s/oom.rank0.20261126_065229.pickle",
            "s/rank0.iter10.pickle",
            "s/rank0.iter30.pickle",
            "s/rank1.iter50.pickle",
            "s/oom.rank0.20261126_065229.txt",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(
            latest_snapshot(&files),
            Some(PathBuf::from("s/rank0.iter30.pickle"))
        );
        assert_eq!(latest_snapshot(&files[..1]), None);
    }
}
