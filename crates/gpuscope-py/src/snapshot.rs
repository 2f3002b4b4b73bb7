//! Bindings of `gpuscope::formats::snapshot` and its analyses: a CUDA allocator snapshot, from a
//! file or from pickle bytes, analysed into the `gpuscope.snapshot/1` report as a dict.

use std::path::PathBuf;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use gpuscope::model::snapshot::Snapshot;
use gpuscope::render::snapshot::columns;
use gpuscope::{read_snapshot, read_snapshot_bytes, snapshot_report, Parts, SnapshotOptions};

use crate::error::IntoPy;

/// The snapshot `source` names (a path, or a pickle's bytes) and its path (`<bytes>`),
/// read without running anything in the pickle; `trace=false` reads only the state at the
/// dump.
fn read(py: Python<'_>, source: &Bound<'_, PyAny>, trace: bool) -> PyResult<(Snapshot, PathBuf)> {
    let parts = if trace { Parts::All } else { Parts::Segments };
    if let Ok(bytes) = source.cast::<PyBytes>() {
        let data = bytes.as_bytes();
        let snapshot = py
            .detach(|| read_snapshot_bytes(data, "<bytes>", parts))
            .py_err()?;
        Ok((snapshot, PathBuf::from("<bytes>")))
    } else if let Ok(path) = source.extract::<PathBuf>() {
        let snapshot = py
            .detach(|| read_snapshot(&path, parts, &mut |_, _| {}))
            .py_err()?;
        Ok((snapshot, path))
    } else {
        Err(PyTypeError::new_err(
            "a snapshot is read from a path or the bytes of a snapshot pickle",
        ))
    }
}

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
    let (snapshot, path) = read(py, source, trace)?;
    let options = SnapshotOptions {
        frames,
        top: top.max(1),
        ..SnapshotOptions::default()
    };
    let report = py.detach(|| snapshot_report(&snapshot, path, &options));
    Ok(pythonize::pythonize(py, &report)?.unbind())
}

/// The tables of snapshot `source` as `{table: {column: [values]}}` (`gpuscope.Snapshot`):
/// every site, not the report's top ones.
#[pyfunction]
#[pyo3(signature = (source, frames=1, *, trace=true))]
fn snapshot_tables(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    frames: usize,
    trace: bool,
) -> PyResult<Py<PyAny>> {
    let (snapshot, path) = read(py, source, trace)?;
    let options = SnapshotOptions {
        frames,
        top: EVERY_SITE,
        ..SnapshotOptions::default()
    };
    let tables = py.detach(|| {
        let report = snapshot_report(&snapshot, path, &options);
        columns::snapshot_tables(&snapshot, &report, frames)
    });
    Ok(pythonize::pythonize(py, &tables)?.unbind())
}

/// Sites listed per table: as many as a snapshot can have in practice.
const EVERY_SITE: usize = 1 << 20;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(analyze_snapshot, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot_tables, m)?)
}
