//! Writes memory records into a run directory: one JSON line each in
//! `profiles/memory[.rank<R>].jsonl`, one text block each in
//! `profiles/tensor_profile_<ts>[.rank<R>].log`, and their scalars to TensorBoard — all
//! through background writer threads.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{paths, tags, text_block};
use crate::formats::batch_writer::{BatchOptions, BatchWriter, OpenMode};
use crate::formats::tfevents::{EventWriter, WriterOptions};
use crate::model::health::NonfiniteEvent;
use crate::model::memory::MemoryRecord;
use crate::{Error, Result};

/// What a [`RunWriter`] writes besides the JSONL.
#[derive(Debug, Clone)]
pub struct RunWriterOptions {
    /// The process's rank when there are several; `None` for a single process.
    pub rank: Option<u32>,
    /// Write TensorBoard scalars.
    pub tensorboard: bool,
    /// Write the `tensor_profile_<ts>.log` text log.
    pub text_log: bool,
    /// Longest time a record waits in memory before reaching the OS.
    pub flush_interval: Duration,
}

impl Default for RunWriterOptions {
    fn default() -> Self {
        RunWriterOptions {
            rank: None,
            tensorboard: true,
            text_log: true,
            flush_interval: Duration::from_secs(2),
        }
    }
}

/// The writers of one process's records in one run directory.
pub struct RunWriter {
    run_dir: PathBuf,
    rank: Option<u32>,
    jsonl: BatchWriter,
    text: Option<BatchWriter>,
    tensorboard: Option<EventWriter>,
}

impl RunWriter {
    /// Creates the run directory's `profiles/` (and `tensorboard/`) and opens the files.
    /// The JSONL is appended to, so a restarted run keeps one file.
    pub fn create(run_dir: &Path, options: &RunWriterOptions) -> Result<Self> {
        let profiles = run_dir.join("profiles");
        fs::create_dir_all(&profiles).map_err(|e| Error::io(&profiles, e))?;
        let batch = BatchOptions {
            flush_interval: options.flush_interval,
            ..BatchOptions::default()
        };
        let jsonl_path = paths::memory_jsonl(run_dir, options.rank);
        let jsonl = BatchWriter::open(&jsonl_path, OpenMode::Append, b"", &batch)?;
        let text = if options.text_log {
            let stamp = chrono::Local::now().format("%Y%m%d_%H%M%S").to_string();
            let path = paths::text_log(run_dir, &stamp, options.rank);
            Some(BatchWriter::open(&path, OpenMode::Append, b"", &batch)?)
        } else {
            None
        };
        let tensorboard = if options.tensorboard {
            let writer_options = WriterOptions {
                flush_interval: options.flush_interval,
                ..WriterOptions::default()
            };
            let tb = EventWriter::create(
                paths::tensorboard_dir(run_dir, options.rank),
                writer_options,
            )?;
            tb.add_custom_scalars_layout(&tags::layout())?;
            Some(tb)
        } else {
            None
        };
        Ok(RunWriter {
            run_dir: run_dir.to_path_buf(),
            rank: options.rank,
            jsonl,
            text,
            tensorboard,
        })
    }

    /// The files being written: JSONL, then text log, then event file.
    pub fn paths(&self) -> Vec<PathBuf> {
        let mut paths = vec![self.jsonl.path().to_path_buf()];
        paths.extend(self.text.as_ref().map(|t| t.path().to_path_buf()));
        paths.extend(self.tensorboard.as_ref().map(|t| t.path().to_path_buf()));
        paths
    }

    /// The TensorBoard writer, for other figures of the same run.
    pub fn tensorboard(&self) -> Option<&EventWriter> {
        self.tensorboard.as_ref()
    }

    /// Queues one record to every destination.
    pub fn write(&self, record: &MemoryRecord) -> Result<()> {
        self.jsonl.append(|buf| {
            serde_json::to_writer(&mut *buf, record).expect("a record always serialises");
            buf.push(b'\n');
        })?;
        if let Some(text) = &self.text {
            let local = chrono::DateTime::from_timestamp(record.time as i64, 0)
                .map(|t| {
                    t.with_timezone(&chrono::Local)
                        .format("%Y-%m-%d %H:%M:%S")
                        .to_string()
                })
                .unwrap_or_default();
            let block = text_block::format_block(record, &local);
            text.append(|buf| buf.extend_from_slice(block.as_bytes()))?;
        }
        if let Some(tb) = &self.tensorboard {
            for (tag, value) in tags::record_scalars(record) {
                tb.add_scalar(&tag, value, record.iteration, Some(record.time))?;
            }
        }
        Ok(())
    }

    /// Writes a non-finite event at once (training may be about to stop): its human
    /// report first when given (see `render::nonfinite`; the report's path, relative to the
    /// run directory, goes into the event), then a line of
    /// `profiles/nonfinite[.rank<R>].jsonl`. Returns the report's path.
    pub fn write_nonfinite(
        &self,
        event: &mut NonfiniteEvent,
        report: Option<&[u8]>,
    ) -> Result<Option<PathBuf>> {
        let report = if let Some(text) = report {
            let path = paths::nonfinite_report(&self.run_dir, event.iteration, self.rank);
            fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
            event.report = path
                .strip_prefix(&self.run_dir)
                .ok()
                .map(|p| p.display().to_string());
            Some(path)
        } else {
            None
        };
        let path = paths::nonfinite_jsonl(&self.run_dir, self.rank);
        let mut line = serde_json::to_vec(event).expect("an event always serialises");
        line.push(b'\n');
        fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(&line))
            .map_err(|e| Error::io(&path, e))?;
        Ok(report)
    }

    /// Waits until everything queued is in the files.
    pub fn flush(&self) -> Result<()> {
        self.jsonl.flush()?;
        if let Some(text) = &self.text {
            text.flush()?;
        }
        if let Some(tb) = &self.tensorboard {
            tb.flush()?;
        }
        Ok(())
    }

    /// Flushes and closes every file. Idempotent.
    pub fn close(&mut self) -> Result<()> {
        let mut first_error = self.jsonl.close().err();
        if let Some(text) = &mut self.text {
            first_error = first_error.or(text.close().err());
        }
        if let Some(tb) = &mut self.tensorboard {
            first_error = first_error.or(tb.close().err());
        }
        first_error.map_or(Ok(()), Err)
    }
}
