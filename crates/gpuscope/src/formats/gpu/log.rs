//! Where samples are logged: JSONL (`gpu.jsonl`, one [`Sample`] per line), CSV (one row
//! per GPU per sample, for spreadsheets) and TensorBoard scalars — each through a
//! background writer thread, appended to, so a restarted monitor keeps one file. A JSONL
//! log that already holds samples (a resumed run) sets where TensorBoard steps continue.

use std::io::Read;
use std::path::Path;

use crate::formats::batch_writer::{BatchOptions, BatchWriter, OpenMode};
use crate::formats::tfevents::{EventWriter, WriterOptions};
use crate::model::gpu::{GpuSample, Sample};
use crate::{Error, Result};

use super::tags;

/// The CSV columns, one row per GPU (one row with empty GPU columns without a GPU).
pub const CSV_COLUMNS: &[&str] = &[
    "time",
    "source",
    "gpu_index",
    "gpu_name",
    "gpu_uuid",
    "memory_used_bytes",
    "memory_total_bytes",
    "memory_percent",
    "utilization_percent",
    "temperature_c",
    "power_w",
    "power_limit_w",
    "gpu_processes",
    "host_cpu_percent",
    "ram_used_bytes",
    "ram_total_bytes",
    "command_rss_bytes",
    "command_cpu_percent",
    "command_gpu_memory_bytes",
];

enum Format {
    Jsonl,
    Csv,
}

/// The destinations samples are written to; none at first.
#[derive(Default)]
pub struct SampleLog {
    files: Vec<(Format, BatchWriter)>,
    tensorboard: Option<EventWriter>,
    step: i64,
    /// Samples found in a JSONL log when it was opened.
    earlier: i64,
}

impl SampleLog {
    /// Also appends samples to `path`: CSV if it ends in `.csv`, else JSONL. The samples
    /// a JSONL file already holds count as earlier steps ([`SampleLog::earlier_samples`]).
    pub fn add_file(&mut self, path: &Path) -> Result<()> {
        let csv = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
        let empty = std::fs::metadata(path).map_or(true, |m| m.len() == 0);
        let header = if empty {
            if csv {
                format!("{}\n", CSV_COLUMNS.join(","))
            } else {
                String::new()
            }
        } else {
            let (lines, cut_off) = lines_of(path)?;
            if !csv {
                self.earlier = self.earlier.max(lines);
                self.step = self.step.max(lines);
            }
            // A line cut off by a killed run is ended, so the next one starts whole.
            if cut_off { "\n" } else { "" }.to_owned()
        };
        let writer = BatchWriter::open(
            path,
            OpenMode::Append,
            header.as_bytes(),
            &BatchOptions::default(),
        )?;
        let format = if csv { Format::Csv } else { Format::Jsonl };
        self.files.push((format, writer));
        Ok(())
    }

    /// Also writes samples as TensorBoard scalars into a new event file in `dir`.
    pub fn add_tensorboard(&mut self, dir: &Path) -> Result<()> {
        self.tensorboard = Some(EventWriter::create(dir, WriterOptions::default())?);
        Ok(())
    }

    /// The event file being written, if any.
    pub fn tensorboard_path(&self) -> Option<&Path> {
        self.tensorboard.as_ref().map(EventWriter::path)
    }

    /// Samples an earlier run left in the JSONL log: this run's TensorBoard steps start
    /// after them, so a resumed run's scalars continue instead of starting over at 0.
    pub fn earlier_samples(&self) -> i64 {
        self.earlier
    }

    /// Queues `sample` to every destination; TensorBoard steps count samples from 0, or
    /// from [`SampleLog::earlier_samples`].
    pub fn write(&mut self, sample: &Sample) -> Result<()> {
        for (format, file) in &self.files {
            match format {
                Format::Jsonl => file.append(|buf| {
                    serde_json::to_writer(&mut *buf, sample).expect("a sample always serialises");
                    buf.push(b'\n');
                })?,
                Format::Csv => {
                    let rows = csv_rows(sample).map_err(|e| Error::io(file.path(), e))?;
                    file.append(|buf| buf.extend_from_slice(&rows))?;
                }
            }
        }
        if let Some(tb) = &self.tensorboard {
            for (tag, value) in tags::sample_scalars(sample) {
                tb.add_scalar(&tag, value, self.step, Some(sample.time))?;
            }
        }
        self.step += 1;
        Ok(())
    }

    /// Flushes and closes every destination. Idempotent.
    pub fn close(&mut self) -> Result<()> {
        let mut first_error = None;
        for (_, file) in &mut self.files {
            first_error = first_error.or(file.close().err());
        }
        if let Some(tb) = &mut self.tensorboard {
            first_error = first_error.or(tb.close().err());
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// The lines of a file, counting a last one without its newline (a run killed while
/// writing it), and whether there is such a line. Read in chunks: a log of a long run
/// can be large.
fn lines_of(path: &Path) -> Result<(i64, bool)> {
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut chunk = vec![0; 1 << 20];
    let (mut lines, mut last) = (0i64, b'\n');
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io(path, e)),
        };
        lines += memchr::memchr_iter(b'\n', &chunk[..n]).count() as i64;
        last = chunk[n - 1];
    }
    let cut_off = last != b'\n';
    Ok((lines + i64::from(cut_off), cut_off))
}

fn csv_rows(sample: &Sample) -> std::io::Result<Vec<u8>> {
    let mut out = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    let none = GpuSample::default();
    let rows: Vec<Option<&GpuSample>> = if sample.gpus.is_empty() {
        vec![None]
    } else {
        sample.gpus.iter().map(Some).collect()
    };
    let text = |v: Option<String>| v.unwrap_or_default();
    let num = |v: Option<f64>| v.map(|v| format!("{v}")).unwrap_or_default();
    let int = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    let tree = sample.tree.as_ref();
    for gpu in rows {
        let g = gpu.unwrap_or(&none);
        out.write_record([
            format!("{}", sample.time),
            sample.source.clone(),
            text(gpu.map(|g| g.index.to_string())),
            text(gpu.map(|g| g.name.clone())),
            text(g.uuid.clone()),
            int(g.memory_used_bytes),
            int(g.memory_total_bytes),
            num(g.memory_percent()),
            num(g.utilization_percent),
            num(g.temperature_c),
            num(g.power_w),
            num(g.power_limit_w),
            text(gpu.map(|g| g.processes.len().to_string())),
            num(sample.host.cpu_percent),
            int(sample.host.ram_used_bytes),
            int(sample.host.ram_total_bytes),
            int(tree.and_then(|t| t.rss_bytes)),
            num(tree.and_then(|t| t.cpu_percent)),
            int(tree.and_then(|t| t.gpu_memory_bytes)),
        ])?;
    }
    out.into_inner().map_err(|e| e.into_error())
}
