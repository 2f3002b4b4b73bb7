//! Bindings of `gpuscope::formats::trace` and its analyses, for the profiler hook that summarises
//! each trace as torch.profiler writes it, and for notebooks.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use serde::Serialize;
use serde_json::value::RawValue;

use gpuscope::analysis::memory_timeline::timeline_columns;
use gpuscope::analysis::trace::classify::KernelType;
use gpuscope::analysis::trace::counter_tracks::{counter_samples, Tracks};
use gpuscope::analysis::trace::critical_path::{
    critical_path, path_overlay, path_table, window, CriticalPath,
};
use gpuscope::analysis::trace::kernels::type_breakdown_of;
use gpuscope::analysis::trace::launches::launches;
use gpuscope::analysis::trace::overlap::comm_comp_overlap_percent;
use gpuscope::analysis::trace::ranks;
use gpuscope::analysis::trace::rows;
use gpuscope::analysis::trace::scope::{scope_with, Scope};
use gpuscope::analysis::trace::sequences::sequence_table;
use gpuscope::analysis::trace::steps::{Category, RuntimePart};
use gpuscope::analysis::trace::summary::{self, RankSummary};
use gpuscope::analysis::trace::temporal::temporal;
use gpuscope::formats::trace::overlay::{write_overlay, Overlay};
use gpuscope::render::trace as render;
use gpuscope::{
    analyze_traces, load_traces, read_memory_timeline, write_file, Clock, Format, Render,
    TraceAnalysis, TraceFile,
};

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

/// Traces loaded once and asked one question at a time, for `gpuscope.TraceAnalysis`:
/// each method returns plain columns (lists) that the Python side hands to pandas in one
/// piece. Rank `k` is the `k`-th trace, in rank order.
#[pyclass(name = "TraceSet", module = "gpuscope._native", frozen)]
pub struct TraceSet {
    traces: Vec<TraceFile>,
    scopes: Vec<Scope>,
    clock: Clock,
    /// The earliest start of any event of any trace, ns: times are counted from it.
    origin: i64,
}

impl TraceSet {
    fn at(&self, k: usize) -> PyResult<(&TraceFile, &Scope)> {
        match (self.traces.get(k), self.scopes.get(k)) {
            (Some(t), Some(s)) => Ok((t, s)),
            _ => Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "no trace {k}: {} loaded",
                self.traces.len()
            ))),
        }
    }

    /// `f` of each trace, in order, as Python objects.
    fn each<T: Serialize + Send>(
        &self,
        py: Python<'_>,
        f: impl Fn(&TraceFile, &Scope) -> T + Sync,
    ) -> PyResult<Py<PyAny>> {
        let out: Vec<T> = py.detach(|| {
            self.traces
                .iter()
                .zip(&self.scopes)
                .map(|(t, s)| f(t, s))
                .collect()
        });
        Ok(pythonize::pythonize(py, &out)?.unbind())
    }

    /// `f` of trace `k`, as a Python object.
    fn one<T: Serialize + Send>(
        &self,
        py: Python<'_>,
        k: usize,
        f: impl Fn(&TraceFile, &Scope) -> T + Sync,
    ) -> PyResult<Py<PyAny>> {
        let (t, s) = self.at(k)?;
        let out = py.detach(|| f(t, s));
        Ok(pythonize::pythonize(py, &out)?.unbind())
    }
}

/// The critical path of `t` over `(annotation, first, last)`, as `critical_path` takes it.
fn path_of(
    t: &TraceFile,
    (annotation, first, last): &(String, usize, usize),
) -> Result<CriticalPath, String> {
    critical_path(&t.trace, window(&t.trace, annotation, *first, *last)?)
}

/// Where a trace set's ranks came from and each trace's rank, as `ranks` sets it.
fn with_ranks(mut traces: Vec<TraceFile>, ranks: Option<Vec<u32>>) -> Vec<TraceFile> {
    if let Some(ranks) = ranks {
        for (t, r) in traces.iter_mut().zip(ranks) {
            t.trace.rank = r;
        }
    }
    traces.sort_by_key(|t| t.trace.rank);
    traces
}

#[pymethods]
impl TraceSet {
    /// Loads `paths` (files, or one directory of traces); `ranks` gives each file's rank
    /// (else the trace's own); `hta_clock` takes times as HTA 0.5 rounds them;
    /// `last_step` keeps the last profiler step, which is otherwise left out.
    #[new]
    #[pyo3(signature = (paths, ranks=None, hta_clock=true, last_step=false))]
    fn new(
        py: Python<'_>,
        paths: Vec<PathBuf>,
        ranks: Option<Vec<u32>>,
        hta_clock: bool,
        last_step: bool,
    ) -> PyResult<Self> {
        if ranks.as_ref().is_some_and(|r| r.len() != paths.len()) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "ranks must give one rank per path",
            ));
        }
        let clock = if hta_clock {
            Clock::HtaRounded
        } else {
            Clock::Exact
        };
        py.detach(|| -> gpuscope::Result<Self> {
            let mut traces = Vec::new();
            for path in &paths {
                traces.extend(load_traces(path, &mut |_, _| {})?.traces);
            }
            let traces = with_ranks(traces, ranks);
            let scopes: Vec<Scope> = traces
                .iter()
                .map(|t| scope_with(&t.trace, clock, last_step))
                .collect();
            let origin = rows::origin(traces.iter().map(|t| &t.trace).zip(&scopes));
            Ok(TraceSet {
                traces,
                scopes,
                clock,
                origin,
            })
        })
        .py_err()
    }

    /// Each trace's rank.
    #[getter]
    fn ranks(&self) -> Vec<u32> {
        self.traces.iter().map(|t| t.trace.rank).collect()
    }

    /// Each trace's file.
    #[getter]
    fn paths(&self) -> Vec<PathBuf> {
        self.traces.iter().map(|t| t.path.clone()).collect()
    }

    /// Each trace's profiler step numbers, the last left out when it was.
    fn profiler_steps(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.each(py, |t, s| rows::profiler_steps(&t.trace, s))
    }

    /// Each trace's temporal breakdown (`None` without GPU work).
    fn temporal(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.each(py, |t, s| temporal(&t.trace, s))
    }

    /// Each trace's time by kernel type and overlap, with or without memory.
    fn kernel_types(&self, py: Python<'_>, memory: bool) -> PyResult<Py<PyAny>> {
        let types: &[KernelType] = if memory {
            &[
                KernelType::Computation,
                KernelType::Communication,
                KernelType::Memory,
            ]
        } else {
            &[KernelType::Computation, KernelType::Communication]
        };
        self.each(py, |t, s| type_breakdown_of(&t.trace, s, types))
    }

    /// Each trace's kernels by name.
    fn kernels(&self, py: Python<'_>, memory: bool) -> PyResult<Py<PyAny>> {
        self.each(py, |t, s| rows::kernel_table(&t.trace, s, memory))
    }

    /// Each trace's user annotations by name, on the GPU (`gpu`) or the CPU; `None` for a
    /// trace without any.
    fn annotations(&self, py: Python<'_>, gpu: bool) -> PyResult<Py<PyAny>> {
        self.each(py, |t, s| rows::annotation_table(&t.trace, s, gpu))
    }

    /// Each trace's share of communication hidden under computation.
    fn comm_comp_overlap(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.each(py, |t, s| comm_comp_overlap_percent(&t.trace, s))
    }

    /// Trace `k`'s idle gaps; gaps under `kernel_wait_us` are kernel waits.
    fn idle(&self, py: Python<'_>, k: usize, kernel_wait_us: i64) -> PyResult<Py<PyAny>> {
        self.one(py, k, |t, s| rows::idle_table(&t.trace, s, kernel_wait_us))
    }

    /// Trace `k`'s queue lengths over time.
    fn queue(&self, py: Python<'_>, k: usize) -> PyResult<Py<PyAny>> {
        self.one(py, k, |t, s| {
            rows::queue_table(&t.trace, s, &launches(&t.trace, s), self.origin)
        })
    }

    /// Trace `k`'s copy bandwidth over time.
    fn bandwidth(&self, py: Python<'_>, k: usize) -> PyResult<Py<PyAny>> {
        self.one(py, k, |t, s| {
            rows::bandwidth_table(&t.trace, s, self.origin)
        })
    }

    /// Trace `k`'s launches.
    fn launches(&self, py: Python<'_>, k: usize, memory: bool) -> PyResult<Py<PyAny>> {
        self.one(py, k, |t, s| {
            rows::launch_table(&t.trace, &launches(&t.trace, s), memory)
        })
    }

    /// Trace `k`'s kernel launches inside ATen operators.
    fn op_launches(&self, py: Python<'_>, k: usize) -> PyResult<Py<PyAny>> {
        self.one(py, k, |t, s| {
            rows::op_launch_table(&t.trace, s, &launches(&t.trace, s), self.origin)
        })
    }

    /// Trace `k`'s GPU work, each with the GPU user annotation it ran under; `None` for a
    /// trace without GPU user annotations.
    fn annotated_work(&self, py: Python<'_>, k: usize) -> PyResult<Py<PyAny>> {
        self.one(py, k, |t, s| {
            rows::annotated_work_table(&t.trace, s, self.origin)
        })
    }

    /// Trace `k`'s kernels with hardware counters (CUPTI's range profiler), each with the
    /// operators its launch ran under; `None` for a trace without any.
    fn counters(&self, py: Python<'_>, k: usize) -> PyResult<Py<PyAny>> {
        self.one(py, k, |t, _| {
            let every_event = scope_with(&t.trace, self.clock, true);
            rows::counter_table(&t.trace, &every_event, self.origin)
        })
    }

    /// Trace `k`'s patterns of GPU work launched by calls of the operators whose name
    /// contains `operator`, with the file positions of the first `marked` patterns' events.
    fn sequences(
        &self,
        py: Python<'_>,
        k: usize,
        operator: &str,
        min_len: usize,
        marked: usize,
    ) -> PyResult<Py<PyAny>> {
        self.one(py, k, |t, s| {
            sequence_table(&t.trace, s, operator, min_len, marked)
        })
    }

    /// Writes a copy of trace `k` to `target` with its queue lengths and copy bandwidth
    /// as counter tracks; the number of samples, and no file when there are none.
    fn write_counters(
        &self,
        py: Python<'_>,
        k: usize,
        target: PathBuf,
        queue_length: bool,
        copy_bandwidth: bool,
    ) -> PyResult<usize> {
        let (t, s) = self.at(k)?;
        let tracks = Tracks {
            queue_length,
            copy_bandwidth,
        };
        py.detach(|| {
            let samples = counter_samples(&t.trace, s, &launches(&t.trace, s), tracks);
            if samples.is_empty() {
                return Ok(0);
            }
            let overlay = Overlay {
                append: &samples,
                ..Overlay::default()
            };
            write_overlay(&t.path, &target, &overlay).map(|()| samples.len())
        })
        .py_err()
    }

    /// The critical path of trace `k` over `window`: (`annotation`, `first`, `last`),
    /// the first to last events whose name contains `annotation` (the whole trace for
    /// ""); a row per edge.
    fn critical_path(
        &self,
        py: Python<'_>,
        k: usize,
        window: (String, usize, usize),
    ) -> PyResult<Py<PyAny>> {
        let (t, _) = self.at(k)?;
        let table = py
            .detach(|| path_of(t, &window).map(|cp| path_table(&t.trace, &cp)))
            .map_err(PyValueError::new_err)?;
        Ok(pythonize::pythonize(py, &table)?.unbind())
    }

    /// Writes a copy of trace `k` to `target` with the critical path of `window` (as
    /// `critical_path` takes it) marked (see `path_overlay`).
    fn write_critical_path(
        &self,
        py: Python<'_>,
        k: usize,
        window: (String, usize, usize),
        target: PathBuf,
        only_critical: bool,
        all_edges: bool,
    ) -> PyResult<()> {
        let (t, _) = self.at(k)?;
        let cp = py
            .detach(|| path_of(t, &window))
            .map_err(PyValueError::new_err)?;
        py.detach(|| {
            let shown = path_overlay(&t.trace, &cp, only_critical, all_edges);
            let one = RawValue::from_string("1".to_owned()).expect("1 is JSON");
            let overlay = Overlay {
                args: shown
                    .critical
                    .iter()
                    .map(|&p| (p, ("critical", &*one)))
                    .collect(),
                flows: &shown.flows,
                drop: shown.drop,
                ..Overlay::default()
            };
            write_overlay(&t.path, &target, &overlay)
        })
        .py_err()
    }

    /// Every profiler step of trace `k`, the last included.
    fn all_steps(&self, py: Python<'_>, k: usize) -> PyResult<Py<PyAny>> {
        self.one(py, k, |t, _| {
            rows::profiler_steps(&t.trace, &scope_with(&t.trace, self.clock, true))
        })
    }

    /// Trace `k`'s events of `device` (`CPU`, `GPU` or `ALL`) in `iterations`, by name.
    fn ops(
        &self,
        py: Python<'_>,
        k: usize,
        iterations: Vec<u64>,
        device: &str,
    ) -> PyResult<Py<PyAny>> {
        let side = match device {
            "CPU" => rows::Side::Cpu,
            "GPU" => rows::Side::Gpu,
            "ALL" => rows::Side::All,
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "device must be CPU, GPU or ALL, not {other:?}"
                )))
            }
        };
        self.one(py, k, |t, _| {
            let every_event = scope_with(&t.trace, self.clock, true);
            rows::iteration_ops(&t.trace, &every_event, &iterations, side)
        })
    }

    /// Trace `k`'s span from its first event's start to its last one's, µs.
    fn start_span(&self, py: Python<'_>, k: usize) -> PyResult<Py<PyAny>> {
        self.one(py, k, |t, s| rows::start_span(&t.trace, s))
    }

    /// Trace `k`'s ranges of stream and correlation ids.
    fn id_ranges(&self, py: Python<'_>, k: usize) -> PyResult<Py<PyAny>> {
        self.one(py, k, |t, _| rows::id_ranges(&t.trace))
    }

    /// The `gpuscope trace --format json` document of all the traces, as a dict.
    fn document(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let analysis = py.detach(|| analyze_traces(&self.traces, self.clock, TOP));
        Ok(pythonize::pythonize(py, &render::document(&analysis))?.unbind())
    }
}

/// The `gpuscope.rank_summary/1` summary of the one trace file at `path`, as a dict.
#[pyfunction]
#[pyo3(signature = (path, hta_clock=false))]
fn rank_summary(py: Python<'_>, path: PathBuf, hta_clock: bool) -> PyResult<Py<PyAny>> {
    let clock = if hta_clock {
        Clock::HtaRounded
    } else {
        Clock::Exact
    };
    let summary = py
        .detach(|| -> gpuscope::Result<RankSummary> {
            if path.is_dir() {
                return Err(gpuscope::Error::bad_input(
                    &path,
                    "a directory: rank_summary takes one rank's trace file",
                ));
            }
            let loaded = load_traces(&path, &mut |_, _| {})?;
            Ok(summary::rank_summary(&loaded.traces[0], clock))
        })
        .py_err()?;
    Ok(pythonize::pythonize(py, &summary)?.unbind())
}

/// The stragglers among ranks of these (rank, compute time µs) pairs, by gpuscope's rule:
/// (rank, percent over the median) pairs, slowest first.
#[pyfunction]
fn stragglers(compute_us: Vec<(u32, f64)>) -> Vec<(u32, f64)> {
    ranks::stragglers(&compute_us)
        .into_iter()
        .map(|s| (s.rank, s.compute_over_median_percent))
        .collect()
}

/// The `gpuscope.ranks/1` merge of rank summaries (dicts as `rank_summary` returns them).
#[pyfunction]
fn merge_rank_summaries(py: Python<'_>, summaries: Vec<Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
    let parsed: Vec<RankSummary> = summaries
        .iter()
        .enumerate()
        .map(|(k, s)| {
            pythonize::depythonize(s).map_err(|e| {
                crate::error::BadInputError::new_err(format!(
                    "summary {k} is not a gpuscope.rank_summary/1 summary: {e}"
                ))
            })
        })
        .collect::<PyResult<_>>()?;
    if let Some((k, s)) = parsed.iter().enumerate().find(|(_, s)| !s.has_schema()) {
        return Err(crate::error::BadInputError::new_err(format!(
            "summary {k} has schema {:?}, not {}",
            s.schema,
            summary::SUMMARY_SCHEMA
        )));
    }
    let merged = py.detach(|| summary::merge_rank_summaries(&parsed));
    Ok(pythonize::pythonize(py, &merged)?.unbind())
}

/// Writes a copy of the trace at `source` to `target` (gzipped for a `.gz` name) where
/// the event at each position of `marks` (in `traceEvents`) has `args[member]` set to the
/// JSON text given for it; with `drop_other_args`, the other complete events lose their
/// `args`. Values are copied as written (Python's `json` would round long times).
#[pyfunction]
fn write_trace_overlay(
    py: Python<'_>,
    source: PathBuf,
    target: PathBuf,
    member: &str,
    marks: HashMap<u32, String>,
    drop_other_args: bool,
) -> PyResult<()> {
    let values: Vec<(u32, Box<RawValue>)> = marks
        .into_iter()
        .map(|(position, json)| RawValue::from_string(json).map(|v| (position, v)))
        .collect::<Result<_, _>>()
        .map_err(|e| PyValueError::new_err(format!("a mark is not JSON: {e}")))?;
    let overlay = Overlay {
        args: values
            .iter()
            .map(|(position, value)| (*position, (member, &**value)))
            .collect(),
        drop_other_args,
        ..Overlay::default()
    };
    py.detach(|| write_overlay(&source, &target, &overlay))
        .py_err()
}

/// torch.profiler's memory timeline export at `path` (raw or coalesced), every moment as
/// columns: `categories` (names), then `time_ms` and each category's `bytes` as the
/// little-endian bytes of float64 and int64 arrays. A raw export holds millions of
/// events: as Python ints the columns would take several times the file.
#[pyfunction]
fn memory_timeline(py: Python<'_>, path: PathBuf) -> PyResult<Py<PyAny>> {
    let columns = py
        .detach(|| read_memory_timeline(&path, &mut |_, _| {}).map(timeline_columns))
        .py_err()?;
    let array = |values: Vec<[u8; 8]>| PyBytes::new(py, values.as_flattened());
    let out = PyDict::new(py);
    out.set_item("categories", columns.categories)?;
    out.set_item(
        "time_ms",
        array(columns.time_ms.iter().map(|t| t.to_le_bytes()).collect()),
    )?;
    // Each byte column is dropped once it is copied.
    let bytes: Vec<Bound<'_, PyBytes>> = columns
        .bytes
        .into_iter()
        .map(|column| array(column.iter().map(|b| b.to_le_bytes()).collect()))
        .collect();
    out.set_item("bytes", bytes)?;
    Ok(out.into_any().unbind())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(summarize_trace, m)?)?;
    m.add_function(wrap_pyfunction!(rank_summary, m)?)?;
    m.add_function(wrap_pyfunction!(merge_rank_summaries, m)?)?;
    m.add_function(wrap_pyfunction!(stragglers, m)?)?;
    m.add_function(wrap_pyfunction!(analyze_trace, m)?)?;
    m.add_function(wrap_pyfunction!(write_trace_overlay, m)?)?;
    m.add_function(wrap_pyfunction!(memory_timeline, m)?)?;
    m.add(
        "STEP_CATEGORIES",
        Category::ALL
            .iter()
            .map(Category::as_str)
            .collect::<Vec<_>>(),
    )?;
    m.add(
        "RUNTIME_PARTS",
        RuntimePart::ALL
            .iter()
            .map(RuntimePart::as_str)
            .collect::<Vec<_>>(),
    )?;
    m.add_class::<TraceSet>()
}
