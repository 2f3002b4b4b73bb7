//! The raw memory timeline torch.profiler exports (`export_memory_timeline(path.raw.gz)`,
//! or `.raw.json`): a JSON array of `[time_ns, action, bytes, category]`, where the time
//! is -1 for tensors that existed before profiling, the action is 1 pre-existing,
//! 2 create, 3 increment version, 4 destroy, bytes are negative when memory is released,
//! and the category indexes torch's list below.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use crate::progress::Progress;
use crate::{Error, Result};

/// torch's categories, in the order of its `_CATEGORY_TO_INDEX`; the last is unknown.
pub const CATEGORIES: [&str; 8] = [
    "parameter",
    "optimizer_state",
    "input",
    "temporary",
    "activation",
    "gradient",
    "autograd_detail",
    "unknown",
];

/// One event of the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryEvent {
    /// Nanoseconds on the profiler's clock; -1 before profiling.
    pub time_ns: i64,
    /// 1 pre-existing, 2 create, 3 increment version, 4 destroy.
    pub action: u8,
    /// Bytes, negative when released.
    pub bytes: i64,
    /// Index into [`CATEGORIES`].
    pub category: u8,
}

/// True when the file (gzip or not) starts with a JSON array: a raw memory timeline
/// rather than a Chrome trace, which is an object.
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

/// Reads the timeline at `path`.
pub fn read_memory_timeline(
    path: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Vec<MemoryEvent>> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let total = file.metadata().map_or(0, |m| m.len());
    let mut bytes = Progress::new(total, progress);
    let counted = bytes.reader(file);
    let input: Box<dyn Read + '_> = if gzipped(path) {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(counted)))
    } else {
        Box::new(counted)
    };
    let events: Vec<(i64, u8, i64, u8)> =
        serde_json::from_reader(BufReader::with_capacity(1 << 18, input))
            .map_err(|e| Error::bad_input(path, format!("not a raw memory timeline ({e})")))?;
    if let Some((_, _, _, c)) = events.iter().find(|e| e.3 as usize >= CATEGORIES.len()) {
        return Err(Error::bad_input(
            path,
            format!("unknown memory category {c} (torch knows 0–7)"),
        ));
    }
    Ok(events
        .into_iter()
        .map(|(time_ns, action, bytes, category)| MemoryEvent {
            time_ns,
            action,
            bytes,
            category,
        })
        .collect())
}
