//! Finds event files under a log directory and streams their events, one record in memory
//! at a time.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use super::decode::decode_event;
use super::record::{RecordReader, TruncatedTail};
use crate::model::tensorboard::Event;
use crate::{Error, Result};

/// An event file and the run it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFile {
    /// The run: the file's directory relative to the log directory (`.` for the top).
    pub run: String,
    /// The file.
    pub path: PathBuf,
}

/// True for the names TensorBoard treats as event files.
pub fn is_event_file_name(name: &str) -> bool {
    name.contains("tfevents")
}

/// The event files at `path`: the file itself, or every event file below a directory,
/// ordered by run and then by name (so restarts of a run are read in order).
pub fn find_event_files(path: &Path) -> Result<Vec<EventFile>> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_file() {
        return Ok(vec![EventFile {
            run: ".".into(),
            path: path.to_path_buf(),
        }]);
    }
    if !meta.is_dir() {
        return Err(Error::bad_input(
            path,
            "not a regular file or a directory (give an event file or a log directory)",
        ));
    }
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(path).follow_links(true) {
        let entry = entry.map_err(|e| {
            let at = e.path().unwrap_or(path).to_path_buf();
            Error::io(at, e.into())
        })?;
        let name = entry.file_name().to_string_lossy();
        if entry.file_type().is_file() && is_event_file_name(&name) {
            let dir = entry.path().parent().unwrap_or(path);
            let run = dir
                .strip_prefix(path)
                .ok()
                .filter(|rel| !rel.as_os_str().is_empty())
                .map_or_else(|| ".".to_owned(), |rel| rel.to_string_lossy().into_owned());
            files.push(EventFile {
                run,
                path: entry.path().to_path_buf(),
            });
        }
    }
    if files.is_empty() {
        return Err(Error::bad_input(
            path,
            "no TensorBoard event files (events.out.tfevents.*) in this directory",
        ));
    }
    files.sort_by(|a, b| (&a.run, &a.path).cmp(&(&b.run, &b.path)));
    Ok(files)
}

/// Streams the events of one file.
pub struct EventReader {
    records: RecordReader<BufReader<File>>,
}

impl EventReader {
    /// Opens `path` for reading.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        Ok(EventReader {
            records: RecordReader::new(BufReader::with_capacity(256 * 1024, file), path),
        })
    }

    /// Set when the file ended inside a record (a writer killed or still writing).
    pub fn truncated(&self) -> Option<&TruncatedTail> {
        self.records.truncated()
    }

    /// The next event, `None` at the end of the file.
    pub fn next_event(&mut self) -> Result<Option<Event>> {
        let offset = self.records.offset();
        let Some(data) = self.records.next_record()? else {
            return Ok(None);
        };
        decode_event(data).map(Some).map_err(|e| {
            let what = if offset == 0 {
                format!("not a TensorBoard event file (first record is not an Event: {e})")
            } else {
                format!("record at byte offset {offset} is not an Event protobuf ({e})")
            };
            Error::bad_input(self.records.path(), what)
        })
    }
}

impl Iterator for EventReader {
    type Item = Result<Event>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_event().transpose()
    }
}
