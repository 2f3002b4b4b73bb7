//! What the writer classes share: flushing and closing an engine writer with the GIL
//! released, and a closed writer's error.

use pyo3::prelude::*;

use gpuscope::{EventWriter, RunWriter};

use crate::error::{IntoPy, WriterError};

/// An engine writer with background threads.
pub trait Flushable: Send + Sync {
    /// Waits until everything queued is in the files.
    fn flush(&self) -> gpuscope::Result<()>;
    /// Flushes and closes the files.
    fn close(&mut self) -> gpuscope::Result<()>;
}

impl Flushable for EventWriter {
    fn flush(&self) -> gpuscope::Result<()> {
        EventWriter::flush(self)
    }
    fn close(&mut self) -> gpuscope::Result<()> {
        EventWriter::close(self)
    }
}

impl Flushable for RunWriter {
    fn flush(&self) -> gpuscope::Result<()> {
        RunWriter::flush(self)
    }
    fn close(&mut self) -> gpuscope::Result<()> {
        RunWriter::close(self)
    }
}

/// The open writer in `slot`, or the error of a closed one.
pub fn open<'a, W>(slot: &'a Option<W>, class: &str) -> PyResult<&'a W> {
    slot.as_ref()
        .ok_or_else(|| WriterError::new_err(format!("{class} is closed")))
}

/// Flushes the writer in `slot` with the GIL released.
pub fn flush<W: Flushable>(py: Python<'_>, slot: &Option<W>, class: &str) -> PyResult<()> {
    let writer = open(slot, class)?;
    py.detach(|| writer.flush()).py_err()
}

/// Closes and drops the writer in `slot`; nothing to do when it is already closed.
pub fn close<W: Flushable>(py: Python<'_>, slot: &mut Option<W>) -> PyResult<()> {
    match slot.take() {
        Some(mut writer) => py.detach(move || writer.close()).py_err(),
        None => Ok(()),
    }
}
