//! Reads one trace file, or every trace file of a directory (one per rank) in parallel.

use super::read::read_trace;
use crate::model::trace::TraceFile;
use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// True for the names torch.profiler gives traces (`*.json`, `*.json.gz`).
pub fn is_trace_file_name(name: &str) -> bool {
    name.ends_with(".json") || name.ends_with(".json.gz")
}

/// Reads `files` on as many threads as there are cores, each taking the next file;
/// `progress` is told the bytes of the files finished so far. Plain threads rather than
/// rayon's: each read parses its batches on rayon's pool, and a pool worker waiting for
/// the pool is how rayon deadlocks.
fn read_in_parallel(
    files: &[(PathBuf, u64)],
    progress: &mut dyn FnMut(u64),
) -> Vec<Result<TraceFile>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len());
    let next = AtomicUsize::new(0);
    let (sender, finished) = mpsc::channel::<(usize, Result<TraceFile>)>();
    let mut results: Vec<Option<Result<TraceFile>>> = files.iter().map(|_| None).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (sender, next) = (sender.clone(), &next);
            scope.spawn(move || loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some((file, _)) = files.get(k) else {
                    return;
                };
                let trace = read_trace(file, &mut |_, _| {}).map(|trace| TraceFile {
                    path: file.clone(),
                    trace,
                });
                if sender.send((k, trace)).is_err() {
                    return;
                }
            });
        }
        drop(sender);
        let mut done = 0;
        for (k, result) in finished {
            done += files[k].1;
            progress(done);
            results[k] = Some(result);
        }
    });
    results
        .into_iter()
        .map(|r| r.expect("every file is read"))
        .collect()
}

/// The traces read, and the files of a directory that could not be used.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The traces, ordered by rank.
    pub traces: Vec<TraceFile>,
    /// `path: why` for each file of the directory that is not a usable trace.
    pub skipped: Vec<String>,
}

/// The files of the directory `path` (and its subdirectories) named like traces
/// (`*.json`, `*.json.gz`), sorted, with their sizes; fails when there are none.
pub fn trace_files(path: &Path) -> Result<Vec<(PathBuf, u64)>> {
    let mut files: Vec<(PathBuf, u64)> = walkdir::WalkDir::new(path)
        .max_depth(2)
        .follow_links(true)
        .into_iter()
        .filter_map(std::result::Result::ok)
        .filter(|e| e.file_type().is_file() && is_trace_file_name(&e.file_name().to_string_lossy()))
        .map(|e| {
            let size = e.metadata().map_or(0, |m| m.len());
            (e.into_path(), size)
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::bad_input(
            path,
            "no trace files (*.json, *.json.gz) in this directory",
        ));
    }
    Ok(files)
}

/// The trace at `path`, or every trace in the directory `path`. A directory's file that is
/// not a usable trace (another JSON file, a damaged rank) is skipped and listed; fails when
/// none is usable. `progress` is told the bytes read so far and the total.
pub fn load_traces(path: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<Loaded> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.is_dir() {
        let trace = read_trace(path, progress)?;
        return Ok(Loaded {
            traces: vec![TraceFile {
                path: path.to_path_buf(),
                trace,
            }],
            skipped: Vec::new(),
        });
    }
    let files = trace_files(path)?;
    let total = files.iter().map(|(_, size)| size).sum();
    let read = read_in_parallel(&files, &mut |done| progress(done, total));
    let mut loaded = Loaded::default();
    let mut first_error = None;
    for result in read {
        match result {
            Ok(trace) => loaded.traces.push(trace),
            Err(e) => {
                loaded.skipped.push(e.to_string());
                first_error.get_or_insert(e);
            }
        }
    }
    if let (true, Some(e)) = (loaded.traces.is_empty(), first_error) {
        return Err(e);
    }
    loaded.traces.sort_by_key(|t| t.trace.rank);
    Ok(loaded)
}
