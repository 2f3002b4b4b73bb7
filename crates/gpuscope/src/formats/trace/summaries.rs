//! Directories of rank summaries (`<rank>.summary.json`, written by `gpuscope trace
//! --summaries-out`): small JSON documents, told from traces by their size and by what
//! `parse` makes of them (their schema), not by their names.

use std::path::Path;

use super::load::trace_files;
use crate::Result;

/// The documents of the directory `path` as `parse` reads them, when every file named like
/// a trace in it is one, no larger than `max_bytes`; `None` when `path` is not a directory
/// or holds anything else (traces).
pub fn read_summaries<T>(
    path: &Path,
    max_bytes: u64,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<Vec<T>>> {
    if !path.is_dir() {
        return Ok(None);
    }
    let files = trace_files(path)?.files;
    if files.iter().any(|(_, size)| *size > max_bytes) {
        return Ok(None);
    }
    let mut summaries = Vec::with_capacity(files.len());
    for (file, _) in files {
        // A file that cannot be read is no summary: the directory is read as traces, which
        // names it among the files skipped.
        let text = std::fs::read_to_string(&file).ok();
        match text.as_deref().and_then(&parse) {
            Some(s) => summaries.push(s),
            None => return Ok(None),
        }
    }
    Ok(Some(summaries))
}
