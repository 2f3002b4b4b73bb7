//! The memory timeline torch.profiler exports (`export_memory_timeline`), in either of its
//! JSON forms (gzipped or not):
//!
//! - raw (a path ending `.raw.json.gz`): an array of `[time_ns, action, bytes, category]`,
//!   the time -1 for tensors that existed before profiling, the action 1 pre-existing,
//!   2 create, 3 increment version, 4 destroy, bytes negative when memory is released,
//!   the category an index into torch's list below;
//! - coalesced (`.json`, `.json.gz`, and what torch writes for other names such as
//!   `.raw.gz`): `[times_us, sizes]`, each size row `[0, bytes of each category…]`.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use crate::formats::progress::Progress;
use crate::model::memory_timeline::{MemoryEvent, MemoryTimeline, CATEGORIES};
use crate::{Error, Result};

/// True when the file (gzip or not) starts with a JSON array: a memory timeline rather
/// than a Chrome trace, which is an object.
pub fn is_memory_timeline(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    let mut head = [0u8; 64];
    let reader: Box<dyn Read> = if gzipped(path) {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let n = reader.take(64).read(&mut head).unwrap_or(0);
    head[..n]
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'[')
}

fn gzipped(path: &Path) -> bool {
    let mut magic = [0u8; 2];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == [0x1f, 0x8b]
}

/// Reads the timeline at `path`, in either form; a file that is not a JSON array (a
/// Chrome trace) is refused from its first bytes.
pub fn read_memory_timeline(
    path: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<MemoryTimeline> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    // A Chrome trace is an object: refused from its first bytes, not after reading it.
    if !is_memory_timeline(path) {
        return Err(Error::bad_input(
            path,
            "not a memory timeline of torch.profiler's export_memory_timeline (a JSON array)",
        ));
    }
    let total = file.metadata().map_or(0, |m| m.len());
    let mut bytes = Progress::new(total, progress);
    let counted = bytes.reader(file);
    let input: Box<dyn Read + '_> = if gzipped(path) {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(counted)))
    } else {
        Box::new(counted)
    };
    let mut text = Vec::new();
    BufReader::with_capacity(1 << 18, input)
        .read_to_end(&mut text)
        .map_err(|e| Error::bad_input(path, format!("cannot be read to the end ({e})")))?;
    // A raw export read straight into its rows: a DOM of millions of small arrays costs
    // several times the file. Anything else goes through the DOM, which says what is
    // wrong with it.
    if let Ok(rows) = serde_json::from_slice::<Vec<Row>>(&text) {
        drop(text);
        return raw_events(&rows)
            .map(MemoryTimeline::Raw)
            .map_err(|what| Error::bad_input(path, what));
    }
    let doc: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| Error::bad_input(path, format!("not a memory timeline ({e})")))?;
    parse(doc).map_err(|what| Error::bad_input(path, what))
}

/// A row of a raw export: time (ns), action, bytes, category.
type Row = (i64, i64, i64, i64);

/// The events of raw rows; fails on a category torch does not have.
fn raw_events(rows: &[Row]) -> std::result::Result<Vec<MemoryEvent>, String> {
    rows.iter()
        .map(|&(time_ns, action, bytes, category)| {
            if !(0..CATEGORIES.len() as i64).contains(&category) {
                return Err(format!(
                    "unknown memory category {category} (torch knows 0–7)"
                ));
            }
            Ok(MemoryEvent {
                time_ns,
                action: action.clamp(0, 255) as u8,
                bytes,
                category: category as u8,
            })
        })
        .collect()
}

fn parse(doc: serde_json::Value) -> std::result::Result<MemoryTimeline, String> {
    let not_one = || {
        "not a memory timeline of torch.profiler (expected [[time, action, bytes, category], …] \
         or [times, sizes])"
            .to_owned()
    };
    let rows = doc.as_array().ok_or_else(not_one)?;
    let int = |v: &serde_json::Value| v.as_i64().ok_or_else(not_one);
    let coalesced = rows.len() == 2
        && rows[1]
            .as_array()
            .is_some_and(|s| s.iter().all(|r| r.is_array()));
    if coalesced
        && rows[0]
            .as_array()
            .is_some_and(|t| t.iter().all(|v| v.is_number()))
    {
        let times_us = rows[0]
            .as_array()
            .ok_or_else(not_one)?
            .iter()
            .map(int)
            .collect::<std::result::Result<_, _>>()?;
        let bytes = rows[1]
            .as_array()
            .ok_or_else(not_one)?
            .iter()
            .map(|row| {
                let row = row.as_array().ok_or_else(not_one)?;
                if row.len() != CATEGORIES.len() + 1 {
                    return Err(format!(
                        "a size row has {} entries; torch writes {}",
                        row.len(),
                        CATEGORIES.len() + 1
                    ));
                }
                row[1..].iter().map(int).collect()
            })
            .collect::<std::result::Result<_, _>>()?;
        return Ok(MemoryTimeline::Totals { times_us, bytes });
    }
    let rows: Vec<Row> = rows
        .iter()
        .map(|row| {
            let row = row
                .as_array()
                .filter(|r| r.len() == 4)
                .ok_or_else(not_one)?;
            Ok((int(&row[0])?, int(&row[1])?, int(&row[2])?, int(&row[3])?))
        })
        .collect::<std::result::Result<_, String>>()?;
    raw_events(&rows).map(MemoryTimeline::Raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> std::result::Result<MemoryTimeline, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("timeline.raw.json");
        std::fs::write(&path, text).unwrap();
        read_memory_timeline(&path, &mut |_, _| {}).map_err(|e| e.to_string())
    }

    #[test]
    fn the_typed_rows_and_the_dom_agree_on_what_a_raw_export_is() {
        let event = |time_ns, bytes, category| MemoryEvent {
            time_ns,
            action: 2,
            bytes,
            category,
        };
        assert_eq!(
            read("[[-1, 2, 512, 0], [5, 2, -64, 7]]"),
            Ok(MemoryTimeline::Raw(vec![
                event(-1, 512, 0),
                event(5, -64, 7)
            ]))
        );
        assert_eq!(read("[]"), Ok(MemoryTimeline::Raw(Vec::new())));
        // Refused by the typed rows, then by the DOM with the reason.
        for (text, why) in [
            ("[[1, 2, 3.5, 0]]", "not a memory timeline"),
            ("[[1, 2, 99999999999999999999, 0]]", "not a memory timeline"),
            ("[[1, 2, 3]]", "not a memory timeline"),
            ("[[1, 2, 3, 8]]", "unknown memory category 8"),
        ] {
            let err = read(text).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
        }
        // A coalesced export of four instants: its times parse as a row, its sizes do not.
        let coalesced = "[[1, 2, 3, 4], [[0,1,0,0,0,0,0,0,0], [0,2,0,0,0,0,0,0,0], \
                         [0,3,0,0,0,0,0,0,0], [0,4,0,0,0,0,0,0,0]]]";
        match read(coalesced) {
            Ok(MemoryTimeline::Totals { times_us, bytes }) => {
                assert_eq!(times_us, [1, 2, 3, 4]);
                assert_eq!(bytes[3][0], 4);
            }
            other => panic!("{other:?}"),
        }
    }
}
