//! An append-only file written by a background thread, for the writers that run inside a
//! training loop (event files, JSONL records, text logs): a caller only formats its bytes
//! into a shared buffer — no system call, no thread wake-up per call.
//!
//! The buffer is the bounded queue: past `WAKE_BYTES` the thread is woken to write it out,
//! past `queue_bytes` callers wait for it (nothing is ever dropped). Bytes reach the
//! operating system at every flush — explicit, periodic (every `flush_interval` while any
//! are pending), when the buffer fills, and on close or drop — so a process killed with
//! SIGKILL loses at most the last flush interval, and only at the end of the file.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::{Error, Result};

/// How a writer batches its output.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// Longest time written bytes may wait in memory before reaching the OS.
    pub flush_interval: Duration,
    /// Bytes that may wait in memory; past this, callers wait for the writer thread.
    pub queue_bytes: usize,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            flush_interval: Duration::from_secs(2),
            queue_bytes: 8 << 20,
        }
    }
}

/// Whether opening a file may reuse an existing one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Fail if the file exists (event files: one per writer).
    CreateNew,
    /// Append to the file if it exists (a run's JSONL across restarts).
    Append,
}

/// Pending bytes that make the writer thread start writing before its timer.
const WAKE_BYTES: usize = 256 << 10;

#[derive(Default)]
struct State {
    /// Bytes not yet written.
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

/// One append-only file with its writer thread.
pub struct BatchWriter {
    path: PathBuf,
    shared: Arc<Shared>,
    queue_bytes: usize,
    thread: Option<JoinHandle<()>>,
}

impl BatchWriter {
    /// Opens `path` (its directory must exist) and writes `header` to it before returning,
    /// so the file is valid as soon as it exists.
    pub fn open(
        path: &Path,
        mode: OpenMode,
        header: &[u8],
        options: &BatchOptions,
    ) -> Result<Self> {
        let mut open = OpenOptions::new();
        match mode {
            OpenMode::CreateNew => open.write(true).create_new(true),
            OpenMode::Append => open.append(true).create(true),
        };
        let mut file = open.open(path).map_err(|e| Error::io(path, e))?;
        file.write_all(header).map_err(|e| Error::io(path, e))?;
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
            .name("gpuscope-writer".into())
            .spawn(move || worker.run())
            .map_err(|e| Error::io(path, e))?;
        Ok(BatchWriter {
            path: path.to_path_buf(),
            shared,
            queue_bytes: options.queue_bytes.max(WAKE_BYTES),
            thread: Some(thread),
        })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lets `format` append bytes to the pending buffer. Fails once the file could not be
    /// written, or after close.
    pub fn append(&self, format: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
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
        format(&mut state.pending);
        if state.pending.len() >= WAKE_BYTES {
            self.shared.work.notify_one();
        }
        Ok(())
    }

    /// Waits until every byte appended so far has been handed to the operating system.
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

impl Drop for BatchWriter {
    fn drop(&mut self) {
        // Errors were already reported to callers of append/flush; a drop only flushes.
        let _ = self.close();
    }
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
