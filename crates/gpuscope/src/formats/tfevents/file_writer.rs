//! One event file: TFRecord-framed events appended through a [`BatchWriter`], so the
//! training loop only pays for encoding an event. The file starts with its
//! `file_version` record already on disk.

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message;

use super::{encode, proto, record};
use crate::formats::batch_writer::{BatchOptions, BatchWriter, OpenMode};
use crate::{Error, Result};

/// How an event writer batches its output and names its file.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Longest time a written record may wait in memory before reaching the OS.
    pub flush_interval: Duration,
    /// Encoded bytes that may wait in memory; past this, callers wait for the writer thread.
    pub queue_bytes: usize,
    /// Appended to the file name, as `SummaryWriter(filename_suffix=...)` does.
    pub filename_suffix: String,
}

impl Default for WriterOptions {
    fn default() -> Self {
        let batch = BatchOptions::default();
        WriterOptions {
            flush_interval: batch.flush_interval,
            queue_bytes: batch.queue_bytes,
            filename_suffix: String::new(),
        }
    }
}

/// Writes one `events.out.tfevents.*` file.
pub struct EventFileWriter {
    file: BatchWriter,
}

/// Seconds since the Unix epoch, as event wall times are stored.
pub fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The name TensorBoard writers give an event file:
/// `events.out.tfevents.<10-digit unix time>.<host>.<pid>.<n><suffix>`, where `n` counts
/// the files this process has opened, so two writers in one second never collide.
pub fn event_file_name(suffix: &str) -> String {
    static OPENED: AtomicU64 = AtomicU64::new(0);
    let n = OPENED.fetch_add(1, Ordering::Relaxed);
    let host = gethostname::gethostname();
    format!(
        "events.out.tfevents.{:010}.{}.{}.{}{}",
        now_unix() as u64,
        host.to_string_lossy(),
        std::process::id(),
        n,
        suffix
    )
}

impl EventFileWriter {
    /// Creates `dir` if needed and a new event file in it, with its first record on disk.
    pub fn create(dir: &Path, options: &WriterOptions) -> Result<Self> {
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join(event_file_name(&options.filename_suffix));
        let mut header = Vec::new();
        append_record(&mut header, &encode::file_version(now_unix()));
        let batch = BatchOptions {
            flush_interval: options.flush_interval,
            queue_bytes: options.queue_bytes,
        };
        let file = BatchWriter::open(&path, OpenMode::CreateNew, &header, &batch)?;
        Ok(EventFileWriter { file })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Queues one event. Fails once the file could not be written, or after close.
    pub fn write(&self, event: &proto::Event) -> Result<()> {
        self.file.append(|buf| append_record(buf, event))
    }

    /// Waits until every event queued so far has been handed to the operating system.
    pub fn flush(&self) -> Result<()> {
        self.file.flush()
    }

    /// Flushes, stops the thread and closes the file. Idempotent.
    pub fn close(&mut self) -> Result<()> {
        self.file.close()
    }
}

/// Frames `event` onto `out` without an intermediate buffer.
fn append_record(out: &mut Vec<u8>, event: &proto::Event) {
    let start = out.len();
    let len = (event.encoded_len() as u64).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&record::masked_crc32c(&len).to_le_bytes());
    event.encode(out).expect("Vec grows as needed");
    let crc = record::masked_crc32c(&out[start + 12..]);
    out.extend_from_slice(&crc.to_le_bytes());
}
