//! Bindings of `gpuscope::formats::trace` and its analyses, for the profiler hook that summarises
//! each trace as torch.profiler writes it, and for notebooks.

use std::path::{Path, PathBuf};

use pyo3::prelude::*;

use gpuscope::render::trace as render;
use gpuscope::{analyze_traces, load_traces, write_file, Clock, Format, Render, TraceAnalysis};

use crate::error::IntoPy;

const TOP: usize = 10;

fn analysed(path: &Path) -> gpuscope::Result<TraceAnalysis> {
    let loaded = load_traces(path, &mut |_, _| {})?;
    Ok(analyze_traces(&loaded.traces, Clock::Exact, TOP))
}

#[pyfunction]
#[pyo3(signature = (path, html=None, width=100))]
fn summarize_trace(
    py: Python<'_>,
    path: PathBuf,
    html: Option<PathBuf>,
    width: u16,
) -> PyResult<String> {
    py.detach(|| -> gpuscope::Result<String> {
        let analysis = analysed(&path)?;
        if let Some(out) = &html {
            write_file(out, |w| analysis.render(Format::Html, width, w))?;
        }
        let mut text = Vec::new();
        for r in &analysis.ranks {
            render::summary(r, width, &mut text).map_err(|e| gpuscope::Error::io(&path, e))?;
        }
        Ok(String::from_utf8_lossy(&text).into_owned())
    })
    .py_err()
}

/// The `gpuscope trace --format json` document of the trace(s) at `path`, as a dict.
#[pyfunction]
fn analyze_trace(py: Python<'_>, path: PathBuf) -> PyResult<Py<PyAny>> {
    let analysis = py.detach(|| analysed(&path)).py_err()?;
    Ok(pythonize::pythonize(py, &render::document(&analysis))?.unbind())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(summarize_trace, m)?)?;
    m.add_function(wrap_pyfunction!(analyze_trace, m)?)
}
