//! Reads everything a run directory holds (docs/run-dir.md), source by source, for the
//! run's diagnosis: the memory records of every rank, every profiler trace (the parallel
//! trace reader), the allocator snapshots, `gpu.jsonl` and the Nsight exports. A file of a
//! source other than the memory records that cannot be read is listed with why and the
//! rest is read: one damaged trace must not hide the others' findings.

use std::path::Path;

use super::load::load_run;
use super::paths::snapshot_iteration;
use super::sources::run_sources;
use crate::formats::gpu::samples::read_samples;
use crate::formats::nsys::read_export;
use crate::formats::snapshot::{read_snapshot, Parts};
use crate::formats::trace::load_traces;
use crate::model::run::{RunRead, SnapshotFile};
use crate::model::sources::{Source, Unreadable};
use crate::model::units::counted;
use crate::Result;

/// Everything at `path`: a run directory, or a file of memory records (then the records
/// alone). Fails as `gpuscope report` always has when there is nothing to read.
pub fn read_run(path: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<RunRead> {
    let mut run = RunRead {
        path: path.to_path_buf(),
        sources: None,
        ranks: Vec::new(),
        traces: Vec::new(),
        snapshots: Vec::new(),
        samples: Vec::new(),
        nsys: Vec::new(),
        unreadable: Vec::new(),
    };
    if !path.is_dir() {
        run.ranks = load_run(path, progress)?;
        return Ok(run);
    }
    let sources = run_sources(path)?;
    // A directory with other sources but no memory records is diagnosed from those; one
    // with nothing at all fails with the records' reader's message, as before.
    if !sources.files(Source::Memory).is_empty() || sources.found.is_empty() {
        run.ranks = load_run(path, progress)?;
    }
    let mut unreadable = |source, file: &Path, reason: String| {
        run.unreadable.push(Unreadable {
            source,
            path: file.to_path_buf(),
            reason,
        })
    };
    if !sources.files(Source::Trace).is_empty() {
        let dir = path.join("profiler_traces");
        match load_traces(&dir, progress) {
            // Copies gpuscope wrote there (overlays, counters) hold nothing new: left out
            // without a word.
            Ok(loaded) => {
                run.traces = loaded.traces;
                for why in loaded.skipped {
                    unreadable(Source::Trace, &dir, why);
                }
            }
            Err(e) => unreadable(Source::Trace, &dir, e.to_string()),
        }
    }
    for file in sources.files(Source::Snapshot) {
        if file.extension().is_some_and(|e| e == "pickle") {
            match read_snapshot(file, Parts::All, progress) {
                Ok(snapshot) => run.snapshots.push(SnapshotFile {
                    path: file.clone(),
                    taken_at: file
                        .file_name()
                        .and_then(|n| snapshot_iteration(&n.to_string_lossy())),
                    snapshot,
                }),
                Err(e) => unreadable(Source::Snapshot, file, e.to_string()),
            }
        }
    }
    for file in sources.files(Source::Gpu) {
        match read_samples(file) {
            Ok((samples, skipped)) => {
                run.samples = samples;
                if skipped > 0 {
                    unreadable(
                        Source::Gpu,
                        file,
                        format!(
                            "{} that are not samples were left out",
                            counted(skipped, "line")
                        ),
                    );
                }
            }
            Err(e) => unreadable(Source::Gpu, file, e.to_string()),
        }
    }
    for file in sources.files(Source::Nsys) {
        if file.extension().is_some_and(|e| e == "sqlite") {
            match read_export(file) {
                Ok(export) => run.nsys.push((file.clone(), export)),
                Err(e) => unreadable(Source::Nsys, file, e.to_string()),
            }
        } else if !file.with_extension("sqlite").is_file() {
            unreadable(
                Source::Nsys,
                file,
                "a report, not an export: `gpuscope nsys stats FILE` exports and reads it \
                 where nsys is installed"
                    .to_owned(),
            );
        }
    }
    run.sources = Some(sources);
    Ok(run)
}
