//! Reads one trace file, or every trace file of a directory (one per rank) in parallel.

use super::read::{peek_head, rank_in_name, read_trace, Head};
use crate::model::trace::TraceFile;
use crate::{Error, Result};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};

/// True for the names torch.profiler gives traces (`*.json`, `*.json.gz`).
pub fn is_trace_file_name(name: &str) -> bool {
    name.ends_with(".json") || name.ends_with(".json.gz")
}

/// A trace file and its size in bytes, as [`trace_files`] lists them.
pub type Listed = (PathBuf, u64);

/// Reads `files` on as many threads as there are cores, turns each trace into a `T` with
/// `map` on the thread that read it, and hands the results to `each` in the order of
/// `files`, with the file each came from, until `each` breaks: then the files not yet
/// read are left unread. A thread takes a file only when fewer than
/// twice as many results as threads wait for their turn, so a directory of thousands of
/// ranks holds a few traces at a time, whatever `map` keeps. Plain threads rather than
/// rayon's: each read parses its batches on rayon's pool, and a pool worker waiting for
/// the pool is how rayon deadlocks.
pub fn map_traces<T: Send>(
    files: &[Listed],
    map: &(dyn Fn(Result<TraceFile>) -> T + Sync),
    each: &mut dyn FnMut(&Listed, T) -> ControlFlow<()>,
) {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len());
    let window = (2 * threads).min(files.len());
    let (jobs, job) = mpsc::channel::<usize>();
    let job = Mutex::new(job);
    for k in 0..window {
        let _ = jobs.send(k);
    }
    let (sender, finished) = mpsc::channel::<(usize, T)>();
    let stopped = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (sender, job, stopped) = (sender.clone(), &job, &stopped);
            scope.spawn(move || loop {
                let next = job.lock().map(|j| j.recv());
                let Ok(Ok(k)) = next else {
                    return;
                };
                if stopped.load(Ordering::Relaxed) {
                    return;
                }
                let (file, _) = &files[k];
                let trace = read_trace(file, &mut |_, _| {}).map(|trace| TraceFile {
                    path: file.clone(),
                    trace,
                });
                if sender.send((k, map(trace))).is_err() {
                    return;
                }
            });
        }
        drop(sender);
        let (mut waiting, mut handed, mut queued) = (BTreeMap::new(), 0, window);
        'results: for (k, result) in finished {
            waiting.insert(k, result);
            while let Some(result) = waiting.remove(&handed) {
                if each(&files[handed], result).is_break() {
                    // The threads stop after the read at hand and start no other.
                    stopped.store(true, Ordering::Relaxed);
                    break 'results;
                }
                handed += 1;
                if queued < files.len() {
                    let _ = jobs.send(queued);
                    queued += 1;
                }
            }
            if handed == files.len() {
                break;
            }
        }
        // The threads waiting for a file see the queue closed and stop.
        drop(jobs);
    });
}

/// The traces read, and the files of a directory that could not be used.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The traces, ordered by rank.
    pub traces: Vec<TraceFile>,
    /// `path: why` for each file of the directory that is not a usable trace.
    pub skipped: Vec<String>,
    /// `path: what` for each copy of a trace that gpuscope wrote into the directory,
    /// left out (see [`Listing::copies`]).
    pub copies: Vec<String>,
}

/// A directory's trace files, and the copies of traces gpuscope wrote there.
#[derive(Debug, Default)]
pub struct Listing {
    /// The trace files with their sizes, in rank order.
    pub files: Vec<Listed>,
    /// `path: what` for each copy of a trace that gpuscope wrote (an overlay, a trace with
    /// counters, marked by its first member) whose trace is listed too: a second trace
    /// of that rank, which would be counted twice. Left out; read by its own path, it is
    /// a trace. A copy whose trace is not there (an overlay in a directory of its own) is
    /// listed as a trace.
    pub copies: Vec<String>,
}

/// The files of the directory `path` (and its subdirectories) named like traces
/// (`*.json`, `*.json.gz`), with their sizes, in rank order (`distributedInfo.rank`, else
/// the rank in the file's name: `rank2` before `rank10`), then by path, and apart from
/// them the copies gpuscope wrote of traces listed; fails when there are no traces.
pub fn trace_files(path: &Path) -> Result<Listing> {
    let mut listed: Vec<(Listed, Head)> = walkdir::WalkDir::new(path)
        .max_depth(2)
        .follow_links(true)
        .into_iter()
        .filter_map(std::result::Result::ok)
        .filter(|e| e.file_type().is_file() && is_trace_file_name(&e.file_name().to_string_lossy()))
        .map(|e| {
            let size = e.metadata().map_or(0, |m| m.len());
            let head = peek_head(e.path());
            ((e.into_path(), size), head)
        })
        .collect();
    listed.sort_by_cached_key(|((path, _), head)| {
        (head.rank.or_else(|| rank_in_name(path)), path.clone())
    });
    // How many files of each name are listed: a copy is left out when another file
    // has the name it names (a copy of a copy, when the first copy is listed, whether
    // that one is left out or not).
    let mut names: FxHashMap<OsString, usize> = FxHashMap::default();
    for ((path, _), _) in &listed {
        if let Some(name) = path.file_name() {
            *names.entry(name.to_owned()).or_default() += 1;
        }
    }
    let mut listing = Listing::default();
    for (file, head) in listed {
        let source = head.copy_of.filter(|source| {
            let own = file.0.file_name() == Some(OsStr::new(source));
            names.get(OsStr::new(source)).copied().unwrap_or(0) > usize::from(own)
        });
        match source {
            Some(source) => listing.copies.push(format!(
                "{}: a copy of {source} that gpuscope wrote; give its own path to read it",
                file.0.display()
            )),
            None => listing.files.push(file),
        }
    }
    if listing.files.is_empty() {
        // Only copies that name each other.
        let what = if listing.copies.is_empty() {
            "no trace files (*.json, *.json.gz) in this directory"
        } else {
            "only copies gpuscope wrote of one another's traces; give one's own path to read it"
        };
        return Err(Error::bad_input(path, what));
    }
    Ok(listing)
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
            ..Loaded::default()
        });
    }
    let Listing { files, copies } = trace_files(path)?;
    let total = files.iter().map(|(_, size)| size).sum();
    let mut loaded = Loaded {
        copies,
        ..Loaded::default()
    };
    let mut first_error = None;
    let mut done = 0;
    map_traces(&files, &|trace| trace, &mut |(_, size), trace| {
        done += size;
        progress(done, total);
        match trace {
            Ok(trace) => loaded.traces.push(trace),
            Err(e) => {
                loaded.skipped.push(e.to_string());
                first_error.get_or_insert(e);
            }
        }
        ControlFlow::Continue(())
    });
    if let (true, Some(e)) = (loaded.traces.is_empty(), first_error) {
        return Err(e);
    }
    loaded.traces.sort_by_key(|t| t.trace.rank);
    Ok(loaded)
}
