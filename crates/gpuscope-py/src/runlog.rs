//! Bindings of `gpuscope::formats::runlog` and `gpuscope::formats::process`: the
//! run-directory writer that the memory profiler hands its records to (and the keys of
//! those records), the variable that names the run directory, and the process sampler.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use gpuscope::model::health::NonfiniteEvent;
use gpuscope::model::memory::{self, MemoryRecord};
use gpuscope::render::columns::Columns;
use gpuscope::render::nonfinite::report_of;
use gpuscope::render::report::columns::{findings_table, run_tables};
use gpuscope::{read_run, report_runs, ProcessSampler, RunWriter, RunWriterOptions, RUN_DIR_VAR};

use crate::error::IntoPy;
use crate::writers;

/// Columns of a non-finite event's report: read in a terminal or an editor.
const REPORT_WIDTH: u16 = 80;

/// Writes memory records (plain dicts shaped like a `profiles/memory.jsonl` line) to the
/// JSONL, the tensor_profile text log and TensorBoard, on background threads.
#[pyclass(name = "RunWriter", module = "gpuscope._native")]
pub struct PyRunWriter {
    inner: Option<RunWriter>,
    paths: Vec<PathBuf>,
}

impl PyRunWriter {
    fn writer(&self) -> PyResult<&RunWriter> {
        writers::open(&self.inner, "RunWriter")
    }
}

#[pymethods]
impl PyRunWriter {
    #[new]
    #[pyo3(signature = (run_dir, rank=None, tensorboard=true, text_log=true, flush_secs=2.0))]
    fn new(
        py: Python<'_>,
        run_dir: PathBuf,
        rank: Option<u32>,
        tensorboard: bool,
        text_log: bool,
        flush_secs: f64,
    ) -> PyResult<Self> {
        if !(flush_secs.is_finite() && flush_secs > 0.0) {
            return Err(PyValueError::new_err(
                "flush_secs must be a positive number",
            ));
        }
        let options = RunWriterOptions {
            rank,
            tensorboard,
            text_log,
            flush_interval: Duration::from_secs_f64(flush_secs),
        };
        let writer = py
            .detach(|| RunWriter::create(&run_dir, &options))
            .py_err()?;
        Ok(PyRunWriter {
            paths: writer.paths(),
            inner: Some(writer),
        })
    }

    /// The files written: JSONL, then the text log and the event file when enabled.
    #[getter]
    fn paths(&self) -> Vec<OsString> {
        self.paths
            .iter()
            .map(|p| p.clone().into_os_string())
            .collect()
    }

    /// Queues one record (see `profiles/memory.jsonl` in docs/run-dir.md for its keys).
    fn write(&self, record: &Bound<'_, PyDict>) -> PyResult<()> {
        let record: MemoryRecord = pythonize::depythonize(record.as_any())
            .map_err(|e| PyValueError::new_err(format!("not a memory record: {e}")))?;
        self.writer()?.write(&record).py_err()
    }

    /// Writes a non-finite event now (a dict shaped like a `profiles/nonfinite.jsonl`
    /// line) and, when `report`, its human report; returns the report's path.
    #[pyo3(signature = (event, report=true))]
    fn write_nonfinite(
        &self,
        py: Python<'_>,
        event: &Bound<'_, PyDict>,
        report: bool,
    ) -> PyResult<Option<PathBuf>> {
        let mut event: NonfiniteEvent = pythonize::depythonize(event.as_any())
            .map_err(|e| PyValueError::new_err(format!("not a non-finite event: {e}")))?;
        let writer = self.writer()?;
        py.detach(|| {
            let text = report
                .then(|| report_of(&event, REPORT_WIDTH))
                .transpose()
                .map_err(|e| gpuscope::Error::io(&self.paths[0], e))?;
            writer.write_nonfinite(&mut event, text.as_deref())
        })
        .py_err()
    }

    /// One extra scalar in the run's TensorBoard file (no-op without TensorBoard).
    fn add_scalar(&self, tag: &str, value: f64, step: i64) -> PyResult<()> {
        match self.writer()?.tensorboard() {
            Some(tb) => tb.add_scalar(tag, value, step, None).py_err(),
            None => Ok(()),
        }
    }

    /// Waits until everything written so far is in the files.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        writers::flush(py, &self.inner, "RunWriter")
    }

    /// Flushes and closes the files. Calling it again does nothing.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        writers::close(py, &mut self.inner)
    }
}

/// Samples this process: `{"rss_bytes", "heap_bytes", "cpu_percent", "ram_percent"}`
/// (`cpu_percent` is measured between samples, `None` on the first).
#[pyclass(name = "ProcessSampler", module = "gpuscope._native")]
pub struct PyProcessSampler {
    inner: ProcessSampler,
}

#[pymethods]
impl PyProcessSampler {
    #[new]
    fn new() -> Self {
        PyProcessSampler {
            inner: ProcessSampler::new(),
        }
    }

    fn sample<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stats = self.inner.sample();
        pythonize::pythonize(py, &stats).map_err(|e| PyValueError::new_err(e.to_string()))
    }
}

/// Bytes in use by the C heap (glibc `mallinfo2`), or `None` off glibc.
#[pyfunction]
fn heap_in_use() -> Option<u64> {
    gpuscope::heap_in_use()
}

/// The JSON keys of a memory record and of each of its parts (`RunWriter.write`'s dict).
#[pyfunction]
fn memory_record_keys() -> BTreeMap<&'static str, Vec<&'static str>> {
    memory::record_keys()
        .into_iter()
        .map(|(part, keys)| (part, keys.to_vec()))
        .collect()
}

/// The tables of the run directory at `path` as `{table: {column: [values]}}`: `records`,
/// `sections`, `gradients`, `nonfinite`, `gpu_samples`, and `findings` (the diagnosis of
/// `gpuscope report`); a table the run has no rows for is absent.
#[pyfunction]
fn read_run_tables(py: Python<'_>, path: PathBuf) -> PyResult<Py<PyAny>> {
    let tables = py
        .detach(|| -> gpuscope::Result<BTreeMap<&'static str, Columns>> {
            let run = read_run(&path, &mut |_, _| {})?;
            let mut tables = run_tables(&run);
            let report = report_runs(vec![run]);
            let findings = findings_table(&report.diagnoses);
            if !findings.is_empty() {
                tables.insert("findings", findings);
            }
            Ok(tables)
        })
        .py_err()?;
    Ok(pythonize::pythonize(py, &tables)?.unbind())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("RUN_DIR_VAR", RUN_DIR_VAR)?;
    m.add_class::<PyRunWriter>()?;
    m.add_function(wrap_pyfunction!(memory_record_keys, m)?)?;
    m.add_class::<PyProcessSampler>()?;
    m.add_function(wrap_pyfunction!(heap_in_use, m)?)?;
    m.add_function(wrap_pyfunction!(read_run_tables, m)?)
}
