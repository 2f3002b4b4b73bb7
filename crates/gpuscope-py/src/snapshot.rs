//! Bindings of `gpuscope::formats::snapshot` and its analyses: a CUDA allocator snapshot, from a
//! file or from pickle bytes, analysed into the `gpuscope.snapshot/1` report as a dict.

use std::path::PathBuf;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use gpuscope::{read_snapshot, read_snapshot_bytes, snapshot_report, Parts, SnapshotOptions};

use crate::error::IntoPy;

/// The `gpuscope snapshot --format json` report of `source`: a snapshot pickle's path, or
/// its bytes. The pickle is read without running anything in it; `trace=False` reads only
/// the state at the dump (`--no-trace`).
#[pyfunction]
#[pyo3(signature = (source, frames=1, top=15, *, trace=true))]
fn analyze_snapshot(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    frames: usize,
    top: usize,
    trace: bool,
) -> PyResult<Py<PyAny>> {
    let parts = if trace { Parts::All } else { Parts::Segments };
    let options = SnapshotOptions {
        frames,
        top: top.max(1),
        ..SnapshotOptions::default()
    };
    let (snapshot, path) = if let Ok(bytes) = source.cast::<PyBytes>() {
        let data = bytes.as_bytes();
        let snapshot = py
            .detach(|| read_snapshot_bytes(data, "<bytes>", parts))
            .py_err()?;
        (snapshot, PathBuf::from("<bytes>"))
    } else if let Ok(path) = source.extract::<PathBuf>() {
        let snapshot = py
            .detach(|| read_snapshot(&path, parts, &mut |_, _| {}))
            .py_err()?;
        (snapshot, path)
    } else {
        return Err(PyTypeError::new_err(
            "analyze_snapshot() takes a path or the bytes of a snapshot pickle",
        ));
    };
    let report = py.detach(|| snapshot_report(&snapshot, path, &options));
    Ok(pythonize::pythonize(py, &report)?.unbind())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(analyze_snapshot, m)?)
}
