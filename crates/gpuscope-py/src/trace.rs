//! Bindings of `gpuscope::formats::trace` and its analyses, for the profiler hook that summarises
//! each trace as torch.profiler writes it, and for notebooks.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use pyo3::prelude::*;

use gpuscope::analysis::trace::ranks::compare_ranks;
use gpuscope::analysis::trace::report::{report, RankReport};
use gpuscope::analysis::trace::scope::Clock;
use gpuscope::formats::trace::load_traces;
use gpuscope::render::trace as render;
use gpuscope::Error;

use crate::error::IntoPy;

/// Kernels listed by name in reports made here, as `gpuscope trace` lists by default.
const TOP: usize = 10;

/// Every rank's report, with `gpuscope trace`'s defaults.
fn analysed(path: &Path) -> gpuscope::Result<Vec<RankReport>> {
    let loaded = load_traces(path, &mut |_, _| {})?;
    Ok(report(&loaded.traces, Clock::Exact, TOP))
}

/// Analyses the trace(s) at `path` (a file or a directory of ranks); writes the HTML
/// report to `html` when given; returns the short summary of each rank as text.
#[pyfunction]
#[pyo3(signature = (path, html=None, width=100))]
fn summarize_trace(
    py: Python<'_>,
    path: PathBuf,
    html: Option<PathBuf>,
    width: u16,
) -> PyResult<String> {
    py.detach(|| -> gpuscope::Result<String> {
        let ranks = analysed(&path)?;
        if let Some(out) = &html {
            let file = File::create(out).map_err(|e| Error::io(out, e))?;
            let comparison = compare_ranks(&ranks);
            render::html::html(&ranks, comparison.as_ref(), &mut BufWriter::new(file))
                .map_err(|e| Error::io(out, e))?;
        }
        let mut text = Vec::new();
        for r in &ranks {
            render::summary(r, width, &mut text).map_err(|e| Error::io(&path, e))?;
        }
        Ok(String::from_utf8_lossy(&text).into_owned())
    })
    .py_err()
}

/// The `gpuscope trace --format json` document of the trace(s) at `path`, as a dict.
#[pyfunction]
fn analyze_trace(py: Python<'_>, path: PathBuf) -> PyResult<Py<PyAny>> {
    let ranks = py.detach(|| analysed(&path)).py_err()?;
    let comparison = compare_ranks(&ranks);
    let doc = render::document(&ranks, comparison.as_ref(), "exact");
    Ok(pythonize::pythonize(py, &doc)?.unbind())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(summarize_trace, m)?)?;
    m.add_function(wrap_pyfunction!(analyze_trace, m)?)
}
