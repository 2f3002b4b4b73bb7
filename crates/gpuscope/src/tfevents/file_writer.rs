//! One event file, written by a background thread so that the training loop only pays for
//! encoding an event into a shared buffer (no system call, no thread wake-up per event).
//!
//! The buffer is the bounded queue: past `wake_bytes` the thread is woken to write it out,
//! past `queue_bytes` callers wait for it (nothing is ever dropped). Durability: the file
//! starts with its `file_version` record already on disk; after that, records reach the
//! operating system at every flush — explicit, periodic (every `flush_interval` while
//! records are pending), when the buffer fills, and on close or drop. A process killed with
//! SIGKILL therefore loses at most the records of the last flush interval, and only at the
//! end of the file: readers see a clean or a truncated tail.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message;

use super::{encode, proto, record};
use crate::{Error, Result};

/// How a writer batches its output.
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
        WriterOptions {
            flush_interval: Duration::from_secs(2),
            queue_bytes: 8 << 20,
            filename_suffix: String::new(),
        }
    }
}

/// Pending bytes that make the writer thread start writing before its timer.
const WAKE_BYTES: usize = 256 << 10;

#[derive(Default)]
struct State {
    /// Framed records not yet written.
    pending: Vec<u8>,
    /// Flush requests made, and how many of them the thread has completed.
    flushes_requested: u64,
    flushes_done: u64,
    closing: bool,
    /// The first write error; once set, the writer accepts nothing more.
    failure: Option<String>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the writer thread: buffer past WAKE_BYTES, flush requested, closing.
    work: Condvar,
    /// Wakes callers waiting for a flush or for room in the buffer.
    done: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain bytes and counters: still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Writes one `events.out.tfevents.*` file.
pub struct EventFileWriter {
    path: PathBuf,
    shared: Arc<Shared>,
    queue_bytes: usize,
    thread: Option<JoinHandle<()>>,
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
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let mut first = Vec::new();
        record::write_record(
            &mut first,
            &encode::file_version(now_unix()).encode_to_vec(),
        )
        .and_then(|()| file.write_all(&first))
        .map_err(|e| Error::io(&path, e))?;

        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            done: Condvar::new(),
        });
        let worker = Worker {
            file,
            interval: options.flush_interval,
            shared: Arc::clone(&shared),
        };
        let thread = std::thread::Builder::new()
            .name("gpuscope-tfevents".into())
            .spawn(move || worker.run())
            .map_err(|e| Error::io(&path, e))?;
        Ok(EventFileWriter {
            path,
            shared,
            queue_bytes: options.queue_bytes.max(WAKE_BYTES),
            thread: Some(thread),
        })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues one event. Fails once the file could not be written, or after close.
    pub fn write(&self, event: &proto::Event) -> Result<()> {
        let mut state = self.shared.lock();
        while state.pending.len() >= self.queue_bytes && state.failure.is_none() && !state.closing {
            self.shared.work.notify_one();
            state = self
                .shared
                .done
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
        }
        self.usable(&state)?;
        append_record(&mut state.pending, event);
        if state.pending.len() >= WAKE_BYTES {
            self.shared.work.notify_one();
        }
        Ok(())
    }

    /// Waits until every event queued so far has been handed to the operating system.
    pub fn flush(&self) -> Result<()> {
        let mut state = self.shared.lock();
        if state.closing {
            return self.usable(&state);
        }
        state.flushes_requested += 1;
        let ticket = state.flushes_requested;
        self.shared.work.notify_one();
        while state.flushes_done < ticket && state.failure.is_none() {
            state = self
                .shared
                .done
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
        }
        self.usable(&state)
    }

    /// Flushes, stops the thread and closes the file. Idempotent.
    pub fn close(&mut self) -> Result<()> {
        if let Some(thread) = self.thread.take() {
            self.shared.lock().closing = true;
            self.shared.work.notify_one();
            if thread.join().is_err() {
                return Err(self.stopped("its thread panicked"));
            }
        }
        match self.shared.lock().failure.clone() {
            Some(why) => Err(self.stopped(&why)),
            None => Ok(()),
        }
    }

    fn usable(&self, state: &State) -> Result<()> {
        match (&state.failure, state.closing) {
            (Some(why), _) => Err(self.stopped(why)),
            (None, true) => Err(self.stopped("closed")),
            (None, false) => Ok(()),
        }
    }

    fn stopped(&self, why: &str) -> Error {
        Error::WriterStopped {
            path: self.path.clone(),
            why: why.to_owned(),
        }
    }
}

impl Drop for EventFileWriter {
    fn drop(&mut self) {
        // Errors were already reported to callers of write/flush; a drop only flushes.
        let _ = self.close();
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

struct Worker {
    file: File,
    interval: Duration,
    shared: Arc<Shared>,
}

impl Worker {
    fn run(mut self) {
        let mut batch = Vec::new();
        loop {
            let mut state = self.shared.lock();
            let idle = |s: &State| {
                s.pending.len() < WAKE_BYTES && s.flushes_requested == s.flushes_done && !s.closing
            };
            if idle(&state) {
                state = match self.shared.work.wait_timeout(state, self.interval) {
                    Ok((s, _)) => s,
                    Err(p) => p.into_inner().0,
                };
            }
            std::mem::swap(&mut batch, &mut state.pending);
            let ticket = state.flushes_requested;
            let closing = state.closing;
            drop(state);

            let written = if batch.is_empty() || self.failed() {
                Ok(())
            } else {
                self.file.write_all(&batch)
            };
            batch.clear();

            let mut state = self.shared.lock();
            if let Err(e) = written {
                state.failure.get_or_insert_with(|| e.to_string());
            }
            state.flushes_done = ticket;
            self.shared.done.notify_all();
            if closing {
                break;
            }
        }
    }

    fn failed(&self) -> bool {
        self.shared.lock().failure.is_some()
    }
}
