//! Finds and reads the memory records of a run: a run directory (every rank's
//! `profiles/memory*.jsonl`, else its seed-format text logs), a JSONL file, or a text log.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use super::read::{read_jsonl, read_text_log, ReadRecords, Skipped};
use crate::model::memory::MemoryRecord;
use crate::{Error, Result};

/// The records of one process (rank) of a run, and where they came from.
#[derive(Debug, Clone)]
pub struct RankRecords {
    /// The rank (from the file name, else the records, else 0).
    pub rank: u32,
    /// The files read, in order.
    pub files: Vec<PathBuf>,
    /// The records, ordered by iteration.
    pub records: Vec<MemoryRecord>,
    /// Lines skipped, with their file.
    pub skipped: Vec<(PathBuf, Skipped)>,
}

/// Reads every rank's records under `path`. Fails when nothing usable is found.
pub fn load_run(path: &Path) -> Result<Vec<RankRecords>> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let files = if meta.is_dir() {
        run_files(path)?
    } else {
        vec![path.to_path_buf()]
    };
    let mut ranks: Vec<RankRecords> = Vec::new();
    for file in files {
        let rank = rank_of(&file);
        let read = read_file(&file)?;
        let entry = match ranks.iter_mut().find(|r| r.rank == rank) {
            Some(entry) => entry,
            None => {
                ranks.push(RankRecords {
                    rank,
                    files: Vec::new(),
                    records: Vec::new(),
                    skipped: Vec::new(),
                });
                ranks.last_mut().expect("just pushed")
            }
        };
        entry.files.push(file.clone());
        entry.records.extend(read.records);
        entry
            .skipped
            .extend(read.skipped.into_iter().map(|s| (file.clone(), s)));
    }
    for r in &mut ranks {
        r.records.sort_by_key(|rec| rec.iteration);
    }
    ranks.sort_by_key(|r| r.rank);
    if ranks.iter().all(|r| r.records.is_empty()) {
        let what = match ranks.iter().flat_map(|r| r.skipped.first()).next() {
            Some((file, s)) => format!(
                "no usable memory records ({}: line {}: {})",
                file.display(),
                s.line,
                s.reason
            ),
            None => "no memory records (expected profiles/memory.jsonl or a tensor_profile_*.log)"
                .to_owned(),
        };
        return Err(Error::bad_input(path, what));
    }
    Ok(ranks)
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

fn read_file(file: &Path) -> Result<ReadRecords> {
    let reader = BufReader::new(File::open(file).map_err(|e| Error::io(file, e))?);
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let read = if name.ends_with(".log") {
        read_text_log(reader)
    } else {
        read_jsonl(reader)
    };
    read.map_err(|e| Error::io(file, e))
}

/// The record files of a run directory: JSONL when there is any, else the text logs.
fn run_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let profiles = if dir.join("profiles").is_dir() {
        dir.join("profiles")
    } else {
        dir.to_path_buf()
    };
    let mut jsonl = Vec::new();
    let mut logs = Vec::new();
    for entry in std::fs::read_dir(&profiles).map_err(|e| Error::io(&profiles, e))? {
        let path = entry.map_err(|e| Error::io(&profiles, e))?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if is_record_file(&name) {
            if name.ends_with(".jsonl") {
                jsonl.push(path);
            } else {
                logs.push(path);
            }
        }
    }
    let mut files = if jsonl.is_empty() { logs } else { jsonl };
    files.sort();
    if files.is_empty() {
        return Err(Error::bad_input(
            dir,
            "no profiles/memory*.jsonl or tensor_profile_*.log here (is this a run directory?)",
        ));
    }
    Ok(files)
}

/// `memory.rank3.jsonl` / `tensor_profile_<ts>.rank3.log` → 3; otherwise 0.
fn rank_of(file: &Path) -> u32 {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    name.split('.')
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
