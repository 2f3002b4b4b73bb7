//! Finds and reads the memory records of a run: a run directory (every rank's
//! `profiles/memory*.jsonl`, else its `tensor_profile_*.log` text logs, else its `tensorboard/`), a
//! JSONL file, a text log, or a TensorBoard event file or log directory.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use super::from_tensorboard::records_from_series;
use super::oom_report::read_oom_reports;
use super::paths;
use super::read::{read_jsonl, read_text_log, ReadRecords};
use crate::formats::progress::Progress;
use crate::formats::tfevents::load::{load_log_dir, LoadOptions};
use crate::formats::tfevents::reader::is_event_file_name;
use crate::model::health::NonfiniteEvent;
use crate::model::memory::{RankRecords, Skipped};
use crate::model::tensorboard::DataKind;
use crate::{Error, Result};

/// Where a run's records are.
pub(crate) enum RecordSource {
    /// JSONL files or `tensor_profile_*.log` text logs.
    Files(Vec<PathBuf>),
    /// A TensorBoard event file or log directory.
    TensorBoard(PathBuf),
}

/// Reads every rank's records under `path`. Fails when nothing usable is found.
/// `progress` is told the bytes read so far and the total, as reading goes.
pub fn load_run(path: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<Vec<RankRecords>> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let source = if meta.is_dir() {
        run_source(path)?
    } else if is_event_file_name(&file_name(path)) {
        RecordSource::TensorBoard(path.to_path_buf())
    } else {
        RecordSource::Files(vec![path.to_path_buf()])
    };
    let mut ranks = match source {
        RecordSource::Files(files) => read_files(files, progress)?,
        RecordSource::TensorBoard(dir) => read_tensorboard(&dir, progress)?,
    };
    for r in &mut ranks {
        if !r.records.is_sorted_by_key(|rec| rec.iteration) {
            r.records.sort_by_key(|rec| rec.iteration);
        }
    }
    ranks.sort_by_key(|r| r.rank);
    if ranks.iter().all(|r| r.records.is_empty()) {
        // A run can stop (on_nonfinite="raise") before its first record: say what it saw.
        if let Some(e) = ranks.iter().flat_map(|r| &r.nonfinite).next() {
            let first = e.first_component().map_or("the gradients".to_owned(), |c| {
                format!("loss component {c}")
            });
            let report = e
                .report
                .as_deref()
                .map(|r| format!("; see {r}"))
                .unwrap_or_default();
            return Err(Error::bad_input(
                path,
                format!(
                    "no memory records, but non-finite values at iteration {}: {first} went \
                     non-finite first{report}",
                    e.iteration
                ),
            ));
        }
        let what = match ranks.iter().flat_map(|r| r.skipped.first()).next() {
            Some((file, s)) => format!("no usable memory records ({})", s.describe(file)),
            None => "no memory records (expected profiles/memory.jsonl, a tensor_profile_*.log \
                     or TensorProfiling/ tags in TensorBoard)"
                .to_owned(),
        };
        return Err(Error::bad_input(path, what));
    }
    Ok(ranks)
}

fn read_files(files: Vec<PathBuf>, progress: &mut dyn FnMut(u64, u64)) -> Result<Vec<RankRecords>> {
    let total = files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let mut bytes = Progress::new(total, progress);
    let mut ranks: Vec<RankRecords> = Vec::new();
    for file in files {
        let rank = rank_of(&file);
        let read = read_file(&file, &mut bytes)?;
        let skipped = read.skipped.into_iter().map(|s| (file.clone(), s));
        match ranks.iter_mut().find(|r| r.rank == rank) {
            Some(entry) => {
                entry.files.push(file.clone());
                entry.records.extend(read.records);
                entry.skipped.extend(skipped);
            }
            None => ranks.push(RankRecords {
                rank,
                files: vec![file.clone()],
                skipped: skipped.collect(),
                records: read.records,
                nonfinite: Vec::new(),
                ooms: Vec::new(),
            }),
        }
    }
    for r in &mut ranks {
        read_nonfinite(r)?;
        read_ooms(r);
    }
    Ok(ranks)
}

/// Adds the non-finite events written beside the rank's first file:
/// `nonfinite.rank<R>.jsonl`, or `nonfinite.jsonl` for a single process.
fn read_nonfinite(rank: &mut RankRecords) -> Result<()> {
    let Some(dir) = rank.files.first().and_then(|f| f.parent()) else {
        return Ok(());
    };
    let mut names = vec![paths::nonfinite_jsonl_name(Some(rank.rank))];
    if rank.rank == 0 {
        names.push(paths::nonfinite_jsonl_name(None));
    }
    for path in names.iter().map(|n| dir.join(n)).filter(|p| p.is_file()) {
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<NonfiniteEvent>(line) {
                Ok(event) => rank.nonfinite.push(event),
                Err(e) => rank.skipped.push((
                    path.clone(),
                    Skipped {
                        line: i + 1,
                        reason: format!("not a non-finite event: {e}"),
                    },
                )),
            }
        }
    }
    rank.nonfinite.sort_by_key(|e| e.iteration);
    Ok(())
}

/// Adds the out-of-memory reports of the run directory whose `profiles/` holds the rank's
/// first file; a report that cannot be read is skipped with the reason.
fn read_ooms(rank: &mut RankRecords) {
    let Some(run_dir) = rank
        .files
        .first()
        .and_then(|f| f.parent())
        .filter(|dir| dir.ends_with("profiles"))
        .and_then(Path::parent)
    else {
        return;
    };
    let (events, failed) = read_oom_reports(run_dir, rank.rank);
    rank.ooms = events;
    rank.skipped.extend(
        failed
            .into_iter()
            .map(|(path, reason)| (path, Skipped { line: 0, reason })),
    );
}

/// Each TensorBoard run is a rank: `rank<R>` by its name, else numbered in order. A
/// damaged or truncated file keeps what came before the damage, and says so.
fn read_tensorboard(dir: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<Vec<RankRecords>> {
    let options = LoadOptions {
        keep_points: None,
        keep_going: true,
    };
    let data = load_log_dir(dir, &options, progress)?;
    let mut runs: Vec<&str> = data.files.iter().map(|f| f.run.as_str()).collect();
    runs.dedup();
    Ok(runs
        .iter()
        .enumerate()
        .map(|(i, run)| {
            let files = data.files.iter().filter(|f| f.run == *run);
            let skipped = files
                .clone()
                .flat_map(|f| {
                    let damaged = f.damaged.clone();
                    let truncated = f
                        .truncated_at
                        .map(|at| format!("file ends inside a record at byte {at}"));
                    damaged
                        .into_iter()
                        .chain(truncated)
                        .map(|reason| (f.path.clone(), Skipped { line: 0, reason }))
                })
                .collect();
            RankRecords {
                rank: run
                    .rsplit('/')
                    .next()
                    .and_then(|name| name.strip_prefix("rank")?.parse().ok())
                    .unwrap_or(i as u32),
                files: files.map(|f| f.path.clone()).collect(),
                records: records_from_series(
                    data.series
                        .iter()
                        .filter(|s| s.run == *run && s.kind == DataKind::Scalar),
                ),
                skipped,
                nonfinite: Vec::new(),
                ooms: Vec::new(),
            }
        })
        .collect())
}

/// The run directory under `root` (4 levels deep at most) whose record file changed last:
/// the directory holding `profiles/`, or the file's own directory.
pub fn latest_run(root: &Path) -> Result<PathBuf> {
    let newest = walkdir::WalkDir::new(root)
        .max_depth(4)
        .into_iter()
        .filter_map(std::result::Result::ok)
        .filter(|e| e.file_type().is_file() && is_record_file(&e.file_name().to_string_lossy()))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.into_path())))
        .max_by_key(|(modified, _)| *modified);
    let Some((_, file)) = newest else {
        return Err(Error::bad_input(
            root,
            "no run with memory records here (set GPUSCOPE_RUNS or give a path)",
        ));
    };
    let dir = file.parent().unwrap_or(root);
    Ok(if dir.file_name().is_some_and(|n| n == "profiles") {
        dir.parent().unwrap_or(dir).to_path_buf()
    } else {
        dir.to_path_buf()
    })
}

fn is_record_file(name: &str) -> bool {
    (name.starts_with("memory") && name.ends_with(".jsonl"))
        || (name.starts_with("tensor_profile_") && name.ends_with(".log"))
}

fn read_file(path: &Path, progress: &mut Progress) -> Result<ReadRecords> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let counted = progress.reader(file);
    let read = if file_name(path).ends_with(".log") {
        read_text_log(BufReader::new(counted))
    } else {
        read_jsonl(counted)
    };
    read.map_err(|e| Error::io(path, e))
}

/// The records of a run directory: JSONL when there is any, else the text logs, else its
/// TensorBoard event files (in `tensorboard/` or the directory itself).
pub(crate) fn run_source(dir: &Path) -> Result<RecordSource> {
    let mut files = record_files(dir)?;
    files.sort();
    if !files.is_empty() {
        return Ok(RecordSource::Files(files));
    }
    let tensorboard = dir.join("tensorboard");
    if tensorboard.is_dir() {
        return Ok(RecordSource::TensorBoard(tensorboard));
    }
    // A directory of runs: reading their event files as one run would pass them off as
    // its ranks.
    let runs = runs_in(dir);
    if !runs.is_empty() {
        let list: Vec<String> = runs.iter().map(|r| r.display().to_string()).collect();
        return Err(Error::bad_input(
            dir,
            format!(
                "holds {} runs, not one: give them each (gpuscope report {})",
                runs.len(),
                list.join(" ")
            ),
        ));
    }
    if has_event_files(dir) {
        return Ok(RecordSource::TensorBoard(dir.to_path_buf()));
    }
    Err(Error::bad_input(
        dir,
        "no profiles/memory*.jsonl, tensor_profile_*.log or TensorBoard event files here \
         (is this a run directory?)",
    ))
}

/// The sub-directories of `dir` that are run directories by their own files (records, or
/// a `tensorboard/` directory), sorted.
fn runs_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut runs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .filter(|p| p.join("tensorboard").is_dir() || record_files(p).is_ok_and(|f| !f.is_empty()))
        .collect();
    runs.sort();
    runs
}

/// The memory record files of a run directory (in `profiles/` when it has one): the JSONL
/// files if any, else the `tensor_profile_*.log` text logs.
pub(crate) fn record_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let profiles = if dir.join("profiles").is_dir() {
        dir.join("profiles")
    } else {
        dir.to_path_buf()
    };
    let mut jsonl = Vec::new();
    let mut logs = Vec::new();
    for entry in std::fs::read_dir(&profiles).map_err(|e| Error::io(&profiles, e))? {
        let path = entry.map_err(|e| Error::io(&profiles, e))?.path();
        let name = file_name(&path);
        if is_record_file(&name) {
            if name.ends_with(".jsonl") {
                jsonl.push(path);
            } else {
                logs.push(path);
            }
        }
    }
    Ok(if jsonl.is_empty() { logs } else { jsonl })
}

fn has_event_files(dir: &Path) -> bool {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(std::result::Result::ok)
        .any(|e| e.file_type().is_file() && is_event_file_name(&e.file_name().to_string_lossy()))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `memory.rank3.jsonl` / `tensor_profile_<ts>.rank3.log` → 3; otherwise 0.
fn rank_of(file: &Path) -> u32 {
    file_name(file)
        .split('.')
        .find_map(|part| part.strip_prefix("rank").and_then(|r| r.parse().ok()))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_is_the_run_written_last() {
        let root = tempfile::tempdir().unwrap();
        for (run, delay) in [("old", 0), ("new", 30)] {
            std::thread::sleep(std::time::Duration::from_millis(delay));
            let profiles = root.path().join("runs").join(run).join("profiles");
            std::fs::create_dir_all(&profiles).unwrap();
            std::fs::write(profiles.join("memory.jsonl"), "").unwrap();
        }
        assert_eq!(
            latest_run(root.path()).unwrap(),
            root.path().join("runs/new")
        );
        let empty = tempfile::tempdir().unwrap();
        assert!(latest_run(empty.path())
            .unwrap_err()
            .to_string()
            .contains("no run"));
    }

    #[test]
    fn ranks_come_from_file_names() {
        assert_eq!(rank_of(Path::new("p/memory.rank3.jsonl")), 3);
        assert_eq!(
            rank_of(Path::new("p/tensor_profile_20260101_000000.rank12.log")),
            12
        );
        assert_eq!(rank_of(Path::new("p/memory.jsonl")), 0);
    }
}
