//! Reads memory records back: `profiles/memory*.jsonl` (the canonical format) and the
//! `tensor_profile_*.log` text blocks, written by gpuscope or by the existing
//! profiler. Bad lines are skipped and listed with their line numbers, never fatal: the
//! caller decides whether what is left is enough.

use std::io::{BufRead, Read};

use rayon::prelude::*;

use chrono::TimeZone;

use crate::formats::runlog::text_block::TOP_LARGE;
use crate::model::memory::{AllocatorStats, Categories, LargeTensor, MemoryRecord, Skipped};
use crate::model::units::ByteUnit;

/// Records read from one file, and what was skipped.
///
/// Only the records with the lowest and the highest iteration keep their per-module,
/// per-dtype and large-tensor detail: the analyses read those at the ends of a run only,
/// and dropping them from the records between keeps a run of a million records in memory.
#[derive(Debug, Clone, Default)]
pub struct ReadRecords {
    /// The records, in file order.
    pub records: Vec<MemoryRecord>,
    /// Lines that were not used.
    pub skipped: Vec<Skipped>,
    /// Indices in `records` of the lowest and the highest iteration so far.
    ends: Option<(usize, usize)>,
}

impl ReadRecords {
    /// Adds a record, dropping the detail of the one it replaces as an end.
    fn push(&mut self, record: MemoryRecord) {
        let at = self.records.len();
        let iteration = record.iteration;
        self.records.push(record);
        let Some((low, high)) = self.ends else {
            self.ends = Some((at, at));
            return;
        };
        let mut ends = (low, high);
        if iteration < self.records[low].iteration {
            ends.0 = at;
        }
        if iteration >= self.records[high].iteration {
            ends.1 = at;
        }
        for old in [low, high, at] {
            if old != ends.0 && old != ends.1 {
                thin(&mut self.records[old]);
            }
        }
        self.ends = Some(ends);
    }
}

fn thin(r: &mut MemoryRecord) {
    r.modules_bytes = Default::default();
    r.dtypes_bytes = Default::default();
    r.large_tensors = Vec::new();
}

/// Bytes of JSONL parsed per batch: large enough to split across threads, small enough
/// not to hold much of a file at once.
const BATCH_BYTES: usize = 8 << 20;

/// Reads JSONL memory records. A malformed line (a junk line, a record cut short by a
/// crash) is skipped and listed. Lines are parsed in parallel, in batches.
pub fn read_jsonl(mut input: impl Read) -> std::io::Result<ReadRecords> {
    let mut out = ReadRecords::default();
    let mut buf: Vec<u8> = Vec::with_capacity(BATCH_BYTES * 2);
    let mut lines_before = 0;
    loop {
        let n = (&mut input)
            .take(BATCH_BYTES as u64)
            .read_to_end(&mut buf)?;
        let eof = n == 0;
        let end = if eof {
            buf.len()
        } else {
            match buf.iter().rposition(|b| *b == b'\n') {
                Some(newline) => newline + 1,
                None => continue, // a line longer than a batch: read on
            }
        };
        let lines: Vec<&[u8]> = buf[..end].split(|b| *b == b'\n').collect();
        let parsed: Vec<Option<Result<MemoryRecord, String>>> = lines
            .par_iter()
            .map(|line| {
                let line = line.trim_ascii();
                (!line.is_empty()).then(|| {
                    serde_json::from_slice::<MemoryRecord>(line)
                        .map_err(|e| format!("not a memory record: {e}"))
                })
            })
            .collect();
        // A batch ending in a newline splits into one empty piece after it.
        let counted = if buf[..end].ends_with(b"\n") {
            lines.len() - 1
        } else {
            lines.len()
        };
        for (i, result) in parsed.into_iter().enumerate() {
            match result {
                Some(Ok(record)) => out.push(record),
                Some(Err(reason)) => out.skipped.push(Skipped {
                    line: lines_before + i + 1,
                    reason,
                }),
                None => {}
            }
        }
        lines_before += counted;
        buf.drain(..end);
        if eof {
            return Ok(out);
        }
    }
}

/// Reads a `tensor_profile_<ts>.log` text log: blocks opened by `Iteration <n> | <time>` between rules of
/// `=`. MB figures become bytes (× 2^20). Blocks that lack `Allocated:` are skipped, and so
/// is a last block the file ends inside (training killed while the log was written).
pub fn read_text_log(mut input: impl BufRead) -> std::io::Result<ReadRecords> {
    let mut out = ReadRecords::default();
    let mut block: Option<(usize, Block)> = None;
    // One buffer for every line: a log of 200k blocks has 4M lines.
    let mut line = String::new();
    for i in 0.. {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            break;
        }
        let trimmed = line.trim_end();
        if let Some(rest) = trimmed.strip_prefix("Iteration ") {
            if let Some((start, b)) = block.take() {
                finish(start, b, &mut out);
            }
            match Block::open(rest) {
                Some(b) => block = Some((i + 1, b)),
                None => out.skipped.push(Skipped {
                    line: i + 1,
                    reason: "unreadable Iteration line".into(),
                }),
            }
            continue;
        }
        let Some((_, b)) = block.as_mut() else {
            if !trimmed.is_empty() && !trimmed.starts_with('=') {
                out.skipped.push(Skipped {
                    line: i + 1,
                    reason: "outside any block".into(),
                });
            }
            continue;
        };
        if let Err(reason) = b.line(trimmed) {
            out.skipped.push(Skipped {
                line: i + 1,
                reason,
            });
        }
    }
    if let Some((start, b)) = block.take() {
        if b.whole() {
            finish(start, b, &mut out);
        } else {
            out.skipped.push(Skipped {
                line: start,
                reason: "the last block is cut short (the file ends inside it)".into(),
            });
        }
    }
    Ok(out)
}

fn finish(start: usize, block: Block, out: &mut ReadRecords) {
    match block.into_record() {
        Some(r) => out.push(r),
        None => out.skipped.push(Skipped {
            line: start,
            reason: "block without an Allocated line (cut short?)".into(),
        }),
    }
}

#[derive(Default)]
enum Section {
    #[default]
    Header,
    Categories,
    DataTypes,
    Large,
}

#[derive(Default)]
struct Block {
    record: Option<MemoryRecord>,
    /// The section being read; `Large` is the last one a block has.
    section: Section,
    allocated: Option<(f64, f64)>,
    cpu_census: bool,
    /// Whether the block has a `Data Types:` section.
    data_types: bool,
}

impl Block {
    fn open(rest: &str) -> Option<Block> {
        let (iteration, time) = rest.split_once(" | ").unwrap_or((rest, ""));
        let iteration: i64 = iteration.trim().parse().ok()?;
        let time = chrono::NaiveDateTime::parse_from_str(time.trim(), "%Y-%m-%d %H:%M:%S")
            .ok()
            .and_then(|t| chrono::Local.from_local_datetime(&t).earliest())
            .map_or(0.0, |t| t.timestamp() as f64);
        Some(Block {
            record: Some(MemoryRecord {
                iteration,
                time,
                device: "cuda".into(),
                large_threshold_bytes: 100 << 20,
                ..MemoryRecord::default()
            }),
            ..Block::default()
        })
    }

    fn line(&mut self, line: &str) -> Result<(), String> {
        let record = self.record.as_mut().expect("open block");
        if line.is_empty() || line.starts_with('=') || line.starts_with("Top ") {
            return Ok(());
        }
        if let Some(n) = line.strip_prefix("Total Tensors: ") {
            record.tensor_count = n.trim().parse().map_err(|_| "bad tensor count")?;
        } else if line.starts_with("Allocated: ") {
            self.allocated = Some(allocated_line(line).ok_or("bad Allocated line")?);
        } else if line.starts_with("(CPU run") {
            self.cpu_census = true;
        } else if line == "Tensor Categories:" {
            self.section = Section::Categories;
        } else if line == "Data Types:" {
            self.section = Section::DataTypes;
            self.data_types = true;
        } else if let Some(rest) = line.strip_prefix("Large Tensors (>") {
            let (threshold, count) = rest.split_once("MB): ").ok_or("bad Large Tensors line")?;
            record.large_threshold_bytes =
                ByteUnit::Mib.to_bytes(threshold.parse().map_err(|_| "bad threshold")?);
            record.large_tensor_count = count.trim().parse().map_err(|_| "bad large count")?;
            self.section = Section::Large;
        } else {
            return match self.section {
                Section::Categories => {
                    let (name, bytes) = named_mb(line).ok_or("bad category line")?;
                    set_category(&mut record.categories_bytes, &name, bytes)
                }
                Section::DataTypes => {
                    let (name, bytes) = named_mb(line).ok_or("bad data type line")?;
                    record.dtypes_bytes.insert(name, bytes);
                    Ok(())
                }
                Section::Large => {
                    record
                        .large_tensors
                        .push(large_line(line).ok_or("bad large tensor line")?);
                    Ok(())
                }
                Section::Header => Err("unexpected line in block header".into()),
            };
        }
        Ok(())
    }

    /// Whether the block has all it should: its last section, `Large Tensors (>N MB): n`,
    /// and that many large tensors listed (the format lists at most five).
    fn whole(&self) -> bool {
        let Some(record) = &self.record else {
            return false;
        };
        let listed = record.large_tensors.len() as u64;
        matches!(self.section, Section::Large)
            && listed >= record.large_tensor_count.min(TOP_LARGE as u64)
    }

    fn into_record(self) -> Option<MemoryRecord> {
        let mut record = self.record?;
        let (allocated, reserved) = self.allocated?;
        // The data types sum the tensors the census found (none when the section is
        // empty); the categories may hold more (on GPU, activations are the allocated
        // memory no tensor object owns). Without the section, the categories stand in.
        record.census_bytes = if self.data_types {
            record.dtypes_bytes.values().sum()
        } else {
            record.categories_bytes.total()
        };
        if self.cpu_census {
            record.device = "cpu".into();
            record.census_bytes = ByteUnit::Mib.to_bytes(allocated);
        } else {
            record.allocator = Some(AllocatorStats {
                allocated_bytes: ByteUnit::Mib.to_bytes(allocated),
                reserved_bytes: ByteUnit::Mib.to_bytes(reserved),
                ..AllocatorStats::default()
            });
        }
        if record.large_tensor_count as usize == record.large_tensors.len() {
            record.large_tensor_bytes = record.large_tensors.iter().map(|t| t.bytes).sum();
        }
        Some(record)
    }
}

/// `Allocated: 1944.23 MB | Reserved: 2425.87 MB | Fragmentation: 19.9%` → (MB, MB).
fn allocated_line(line: &str) -> Option<(f64, f64)> {
    let mut parts = line.split(" | ");
    let allocated = parts
        .next()?
        .strip_prefix("Allocated: ")?
        .strip_suffix(" MB")?;
    let reserved = parts
        .next()?
        .strip_prefix("Reserved: ")?
        .strip_suffix(" MB")?;
    Some((
        allocated.trim().parse().ok()?,
        reserved.trim().parse().ok()?,
    ))
}

/// `  parameters     :  1012.80 MB` → ("parameters", bytes).
fn named_mb(line: &str) -> Option<(String, u64)> {
    let (name, value) = line.split_once(':')?;
    let value: f64 = value.trim().strip_suffix("MB")?.trim().parse().ok()?;
    Some((name.trim().to_owned(), ByteUnit::Mib.to_bytes(value)))
}

fn set_category(c: &mut Categories, name: &str, bytes: u64) -> Result<(), String> {
    if c.set(name, bytes) {
        Ok(())
    } else {
        Err(format!("unknown category {name:?}"))
    }
}

/// `    257.49 MB | shape=(1500000, 15, 3) | dtype=float32`.
fn large_line(line: &str) -> Option<LargeTensor> {
    let mut parts = line.split(" | ");
    let mb: f64 = parts
        .next()?
        .trim()
        .strip_suffix("MB")?
        .trim()
        .parse()
        .ok()?;
    let shape = parts
        .next()?
        .trim()
        .strip_prefix("shape=(")?
        .strip_suffix(')')?;
    let dtype = parts.next()?.trim().strip_prefix("dtype=")?;
    let shape = shape
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().ok())
        .collect::<Option<Vec<i64>>>()?;
    Some(LargeTensor {
        bytes: ByteUnit::Mib.to_bytes(mb),
        shape,
        dtype: dtype.to_owned(),
        device: String::new(),
        name: None,
        category: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::runlog::text_block::format_block;

    #[test]
    fn our_blocks_read_back() {
        let mib = 1u64 << 20;
        let mut r = MemoryRecord {
            iteration: 7,
            time: 0.0,
            rank: 0,
            device: "cuda".into(),
            categories_bytes: Categories {
                parameters: Some(10 * mib),
                gradients: Some(5 * mib),
                optimizer_state: Some(20 * mib),
                buffers: Some(0),
                activations: Some(3 * mib),
                other: None,
            },
            modules_bytes: Default::default(),
            dtypes_bytes: [("float32".to_owned(), 35 * mib)].into_iter().collect(),
            tensor_count: 12,
            census_bytes: 35 * mib,
            large_tensors: vec![],
            large_tensor_count: 0,
            large_tensor_bytes: 0,
            large_threshold_bytes: 100 * mib,
            allocator: Some(AllocatorStats {
                allocated_bytes: 38 * mib,
                reserved_bytes: 50 * mib,
                ..Default::default()
            }),
            system: Default::default(),
            losses: Default::default(),
            sections: Default::default(),
            gradients: None,
            autocast: None,
        };
        let mut text = format_block(&r, "2026-01-28 14:02:05");
        text.push_str("junk line\n");
        r.iteration = 8;
        r.allocator = None;
        text.push_str(&format_block(&r, "2026-01-28 14:02:06"));
        r.iteration = 9;
        r.allocator = Some(AllocatorStats::default());
        r.dtypes_bytes.clear();
        text.push_str(&format_block(&r, "2026-01-28 14:02:07"));
        let read = read_text_log(text.as_bytes()).unwrap();
        assert_eq!(read.records.len(), 3);
        assert_eq!(read.skipped.len(), 1, "{:?}", read.skipped);
        let first = &read.records[0];
        assert_eq!(first.iteration, 7);
        // The census is the data types' sum, not the categories' (38 MiB with activations);
        // an empty data types section is a census of nothing.
        assert_eq!(first.census_bytes, 35 * mib);
        assert_eq!(read.records[2].census_bytes, 0);
        assert_eq!(first.categories_bytes.optimizer_state, Some(20 * mib));
        assert_eq!(first.categories_bytes.activations, Some(3 * mib));
        assert_eq!(first.allocator.as_ref().unwrap().reserved_bytes, 50 * mib);
        assert_eq!(read.records[1].device, "cpu");
        assert!(read.records[1].allocator.is_none());
    }

    #[test]
    fn a_last_block_the_file_ends_inside_is_skipped() {
        let mib = 1u64 << 20;
        let large = |n: i64| LargeTensor {
            bytes: 200 * mib,
            shape: vec![n, 1024, 50],
            dtype: "float32".into(),
            device: "cuda:0".into(),
            name: None,
            category: "parameters".into(),
        };
        let mut r = MemoryRecord {
            iteration: 1,
            device: "cuda".into(),
            categories_bytes: Categories {
                parameters: Some(600 * mib),
                ..Default::default()
            },
            dtypes_bytes: [("float32".to_owned(), 600 * mib)].into_iter().collect(),
            large_tensors: vec![large(1), large(2), large(3)],
            large_tensor_count: 3,
            large_threshold_bytes: 100 * mib,
            allocator: Some(AllocatorStats {
                allocated_bytes: 600 * mib,
                reserved_bytes: 700 * mib,
                ..Default::default()
            }),
            ..Default::default()
        };
        let first = format_block(&r, "2026-01-28 14:02:05");
        r.iteration = 2;
        let last = format_block(&r, "2026-01-28 14:02:06");
        let whole = read_text_log(format!("{first}{last}").as_bytes()).unwrap();
        assert_eq!(whole.records.len(), 2);
        assert!(whole.skipped.is_empty(), "{:?}", whole.skipped);
        // Every cut after the last block's Iteration line and before its last large
        // tensor's line (cut inside either, that line is unreadable and skipped on its own).
        let from = last.find("Iteration").unwrap() + "Iteration 2 | 2026-01-28 14:02:06".len();
        let to = last.trim_end().rfind('\n').unwrap();
        for cut in from..to {
            let read = read_text_log(format!("{first}{}", &last[..cut]).as_bytes()).unwrap();
            let iterations: Vec<i64> = read.records.iter().map(|r| r.iteration).collect();
            assert_eq!(iterations, vec![1], "cut at {cut}: {:?}", &last[..cut]);
            assert!(
                read.skipped.iter().any(|s| s.reason.contains("cut short")),
                "cut at {cut}: {:?}",
                read.skipped
            );
        }
    }

    #[test]
    fn jsonl_skips_bad_lines_with_their_numbers() {
        let text = "{\"iteration\": 1}\nnot json\n\n{\"iteration\":";
        let read = read_jsonl(text.as_bytes()).unwrap();
        assert!(read.records.is_empty());
        let lines: Vec<usize> = read.skipped.iter().map(|s| s.line).collect();
        assert_eq!(lines, vec![1, 2, 4]);
    }
}
