//! The human report `gpuscope.oom_guard` writes beside an out-of-memory snapshot
//! (`snapshots/oom.[rank<R>.]<stamp>.txt`), read back for `gpuscope report`: torch's
//! message (the request that failed, the device's capacity) and the memory record taken
//! at the error, which follows a `record:` line as JSON.

use std::path::{Path, PathBuf};

use crate::model::memory::MemoryRecord;
use crate::model::oom::{OomEvent, OomMemory, OomSnapshot};

/// The line before the record's JSON.
const RECORD_LINE: &str = "record:";
/// The line holding torch's message.
const ERROR_PREFIX: &str = "error: ";

/// The line that names the snapshot saved with the report (`none (no CUDA)` without one).
const SNAPSHOT_PREFIX: &str = "allocator snapshot: ";

/// The reports of `rank` under `run_dir/snapshots/` (the unranked ones belong to rank 0),
/// oldest first (their names end in the time they were written, `YYYYmmdd_HHMMSS`);
/// reports that cannot be read are left out with the reason.
pub fn read_oom_reports(run_dir: &Path, rank: u32) -> (Vec<OomEvent>, Vec<(PathBuf, String)>) {
    let mut events = Vec::new();
    let mut failed = Vec::new();
    let Ok(entries) = std::fs::read_dir(run_dir.join("snapshots")) else {
        return (events, failed);
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            super::paths::oom_report_rank(name).is_some_and(|r| r.unwrap_or(0) == rank)
        })
        .collect();
    paths.sort();
    for path in paths {
        match std::fs::read_to_string(&path) {
            Ok(text) => events.push(parse(path, &text)),
            Err(e) => failed.push((path, e.to_string())),
        }
    }
    (events, failed)
}

/// One report; what it does not hold stays unknown.
pub fn parse(path: PathBuf, text: &str) -> OomEvent {
    let message = text
        .lines()
        .find_map(|l| l.strip_prefix(ERROR_PREFIX))
        .unwrap_or("")
        .to_owned();
    let record: Option<MemoryRecord> = text
        .split_once(&format!("\n{RECORD_LINE}\n"))
        .and_then(|(_, json)| serde_json::from_str(json).ok());
    let total = record
        .as_ref()
        .and_then(|r| r.allocator.as_ref()?.device_total_bytes)
        .or_else(|| size_after(&message, "total capacity of "));
    let snapshot = text
        .lines()
        .find_map(|l| l.strip_prefix(SNAPSHOT_PREFIX))
        .map(str::trim)
        .filter(|named| !named.is_empty() && !named.starts_with("none"))
        .map(|named| OomSnapshot {
            named: named.to_owned(),
            path: Path::new(named)
                .file_name()
                .map(|name| path.with_file_name(name))
                .filter(|beside| beside.is_file()),
        });
    let mut event = OomEvent::new(
        path,
        record.as_ref().map(|r| r.iteration),
        record.as_ref().map(|r| r.time),
        size_after(&message, "Tried to allocate "),
        total,
        message,
        snapshot,
    );
    event.at_error = record.map(|r| OomMemory {
        allocated_bytes: r.allocator.as_ref().map(|a| a.allocated_bytes),
        reserved_bytes: r.allocator.as_ref().map(|a| a.reserved_bytes),
        categories_bytes: r.categories_bytes,
    });
    event
}

/// A size as torch's `format_size` writes it (`512 bytes`, `1.50 KiB`, `2.00 MiB`,
/// `16384.00 GiB`) right after `label` in `message`.
fn size_after(message: &str, label: &str) -> Option<u64> {
    let rest = &message[message.find(label)? + label.len()..];
    let mut words = rest.split_whitespace();
    let number: f64 = words.next()?.parse().ok()?;
    let unit = words.next()?.trim_end_matches(['.', ',', ';']);
    let scale = match unit {
        "bytes" | "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    (number.is_finite() && number >= 0.0).then(|| (number * scale).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn sizes_in_every_unit_torch_writes() {
        let m = "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity \
                 of 79.15 GiB of which 3.44 MiB is free.";
        assert_eq!(size_after(m, "Tried to allocate "), Some(20 << 20));
        assert_eq!(
            size_after(m, "total capacity of "),
            Some((79.15 * GIB as f64).round() as u64)
        );
        assert_eq!(
            size_after("Tried to allocate 512 bytes", "Tried to allocate "),
            Some(512)
        );
        assert_eq!(
            size_after("Tried to allocate 1.50 KiB", "Tried to allocate "),
            Some(1536)
        );
        assert_eq!(
            size_after("Tried to allocate lots", "Tried to allocate "),
            None
        );
        assert_eq!(size_after("no such label", "Tried to allocate "), None);
    }

    #[test]
    fn a_report_without_a_record_keeps_the_message() {
        let text = "gpuscope: out of memory\ntime: 2026-11-26 06:52:29\nerror: CUDA out of \
                    memory. Tried to allocate 200.00 GiB. GPU 0 has a total capacity of 79.15 \
                    GiB of which 70.00 GiB is free.\n\nallocator snapshot: none\n";
        let e = parse(PathBuf::from("oom.x.txt"), text);
        assert_eq!(e.iteration, None);
        assert_eq!(e.requested_bytes, Some(200 * GIB));
        assert!(e.impossible);
        assert!(e.message.starts_with("CUDA out of memory."));
    }
}
