//! Bindings of `gpuscope::formats::tfevents`: the event writer and the log-directory reader.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use pyo3::exceptions::{PyKeyError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyList};

use gpuscope::formats::tfevents::{self, EventWriter, LoadOptions, WriterOptions};
use gpuscope::model::tensorboard::{
    tensorflow_bucket_limits, Chart, ChartContent, ChartGroup, Histogram, MarginSeries, ValueData,
};
use gpuscope::render::tb::series_keys;

use crate::error::IntoPy;
use crate::writers;

/// TensorBoard event writer with `torch.utils.tensorboard.SummaryWriter`'s method names.
#[pyclass(name = "EventWriter", module = "gpuscope._native", subclass)]
pub struct PyEventWriter {
    inner: Option<EventWriter>,
    log_dir: PathBuf,
    path: PathBuf,
}

impl PyEventWriter {
    fn writer(&self) -> PyResult<&EventWriter> {
        writers::open(&self.inner, "EventWriter")
    }
}

/// A number from a Python float or int, a numpy scalar or a one-element tensor (through
/// `__float__`, i.e. one `.item()`; a tensor is detached first, as torch warns otherwise).
fn number(value: &Bound<'_, PyAny>, what: &str) -> PyResult<f64> {
    if let Ok(x) = value.cast::<PyFloat>() {
        return Ok(x.value());
    }
    let detached;
    let value = if value.hasattr(intern!(value.py(), "detach"))? {
        detached = value.call_method0(intern!(value.py(), "detach"))?;
        &detached
    } else {
        value
    };
    value.extract::<f64>().map_err(|cause| {
        if cause.is_instance_of::<PyOverflowError>(value.py()) {
            // An int beyond the largest float: say so (SummaryWriter raises OverflowError).
            let digits = value
                .call_method0(intern!(value.py(), "bit_length"))
                .and_then(|bits| bits.extract::<f64>())
                .map_or_else(
                    |_| String::new(),
                    |bits| {
                        format!(
                            " of about {} digits",
                            (bits * std::f64::consts::LOG10_2).ceil()
                        )
                    },
                );
            let err = PyOverflowError::new_err(format!(
                "{what} is an integer{digits}, too large for a float (the largest is about \
                 1.8e308, and TensorBoard stores scalars as floats)"
            ));
            err.set_cause(value.py(), Some(cause));
            return err;
        }
        let type_name = value
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        let err = PyTypeError::new_err(format!(
            "{what} must be a number, a numpy scalar or a one-element tensor, not {type_name}"
        ));
        err.set_cause(value.py(), Some(cause));
        err
    })
}

/// `add_histogram`'s `bins` (1 to [`Histogram::MAX_EQUAL_BUCKETS`]) or `max_bins` (1 or
/// more) as a number.
fn positive_bins(value: &Bound<'_, PyAny>, name: &str) -> PyResult<usize> {
    let error = |why: &str| {
        let shown = value.repr().map_or_else(|_| "?".into(), |r| r.to_string());
        PyValueError::new_err(format!("{name}={shown}: {why}"))
    };
    const MAX: usize = Histogram::MAX_EQUAL_BUCKETS;
    if name == "bins" && value.gt(MAX).unwrap_or(false) {
        return Err(error(&format!(
            "at most {MAX} equal-width buckets (each one is stored in every record; \
             TensorBoard draws about 30); give fewer"
        )));
    }
    match value.extract::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ if name == "bins" => Err(error(
            "expected 'tensorflow' or a positive number of equal-width buckets",
        )),
        _ => Err(error("expected a positive number of buckets")),
    }
}

/// One chart of SummaryWriter's layout dict: `["Multiline", [regex, ...]]` or
/// `["Margin", [value, lower, upper]]`.
fn chart_content(title: &Bound<'_, PyAny>, spec: &Bound<'_, PyAny>) -> PyResult<ChartContent> {
    let bad = || {
        PyValueError::new_err(format!(
            "chart {title}: expected ['Multiline', [tag regex, ...]] \
             or ['Margin', [value tag, lower tag, upper tag]]"
        ))
    };
    let (kind, tags): (String, Vec<String>) = match spec.extract::<Vec<Bound<'_, PyAny>>>() {
        Ok(parts) if parts.len() == 2 => (
            parts[0].extract().map_err(|_| bad())?,
            parts[1].extract().map_err(|_| bad())?,
        ),
        _ => return Err(bad()),
    };
    match (kind.as_str(), tags.as_slice()) {
        ("Multiline", _) => Ok(ChartContent::Multiline(tags)),
        ("Margin", [value, lower, upper]) => Ok(ChartContent::Margin(vec![MarginSeries {
            value: value.clone(),
            lower: lower.clone(),
            upper: upper.clone(),
        }])),
        _ => Err(bad()),
    }
}

#[pymethods]
impl PyEventWriter {
    /// `max_queue` is accepted for SummaryWriter compatibility and has no effect: the queue
    /// is bounded by bytes, and records are written every `flush_secs` or sooner.
    #[new]
    #[pyo3(signature = (log_dir=None, comment="", max_queue=10, flush_secs=2.0, filename_suffix=""))]
    fn new(
        py: Python<'_>,
        log_dir: Option<PathBuf>,
        comment: &str,
        max_queue: usize,
        flush_secs: f64,
        filename_suffix: &str,
    ) -> PyResult<Self> {
        let _ = max_queue;
        if !(flush_secs.is_finite() && flush_secs > 0.0) {
            return Err(PyValueError::new_err(
                "flush_secs must be a positive number",
            ));
        }
        let log_dir = log_dir.unwrap_or_else(|| tfevents::writer::default_log_dir(comment));
        let options = WriterOptions {
            flush_interval: Duration::from_secs_f64(flush_secs),
            filename_suffix: filename_suffix.to_owned(),
            ..WriterOptions::default()
        };
        let writer = py
            .detach(|| EventWriter::create(log_dir, options))
            .py_err()?;
        Ok(PyEventWriter {
            log_dir: writer.log_dir().to_path_buf(),
            path: writer.path().to_path_buf(),
            inner: Some(writer),
        })
    }

    /// The log directory.
    #[getter]
    fn log_dir(&self) -> OsString {
        self.log_dir.clone().into_os_string()
    }

    /// SummaryWriter's name for the log directory.
    fn get_logdir(&self) -> OsString {
        self.log_dir.clone().into_os_string()
    }

    /// The main event file.
    #[getter]
    fn path(&self) -> OsString {
        self.path.clone().into_os_string()
    }

    #[pyo3(signature = (tag, scalar_value, global_step=None, walltime=None, new_style=false, double_precision=false))]
    fn add_scalar(
        &self,
        tag: &str,
        scalar_value: &Bound<'_, PyAny>,
        global_step: Option<i64>,
        walltime: Option<f64>,
        new_style: bool,
        double_precision: bool,
    ) -> PyResult<()> {
        let value = number(scalar_value, "scalar_value")?;
        let (writer, step) = (self.writer()?, global_step.unwrap_or(0));
        if new_style {
            writer.add_scalar_tensor(tag, value, double_precision, step, walltime)
        } else {
            writer.add_scalar(tag, value, step, walltime)
        }
        .py_err()
    }

    #[pyo3(signature = (main_tag, tag_scalar_dict, global_step=None, walltime=None))]
    fn add_scalars(
        &self,
        main_tag: &str,
        tag_scalar_dict: &Bound<'_, PyDict>,
        global_step: Option<i64>,
        walltime: Option<f64>,
    ) -> PyResult<()> {
        let mut values = Vec::with_capacity(tag_scalar_dict.len());
        for (key, value) in tag_scalar_dict.iter() {
            values.push((key.str()?.to_string(), number(&value, "each value")?));
        }
        self.writer()?
            .add_scalars(main_tag, &values, global_step.unwrap_or(0), walltime)
            .py_err()
    }

    #[pyo3(signature = (tag, text_string, global_step=None, walltime=None))]
    fn add_text(
        &self,
        tag: &str,
        text_string: &str,
        global_step: Option<i64>,
        walltime: Option<f64>,
    ) -> PyResult<()> {
        self.writer()?
            .add_text(tag, text_string, global_step.unwrap_or(0), walltime)
            .py_err()
    }

    /// Histogram of a flat list of floats (the Python class converts tensors and arrays);
    /// `bins` is a number of equal-width buckets (at most
    /// [`Histogram::MAX_EQUAL_BUCKETS`]) or `"tensorflow"` (the default); with `max_bins`,
    /// adjacent buckets are merged down to at most that many.
    #[pyo3(signature = (tag, values, global_step=None, bins=None, walltime=None, max_bins=None))]
    fn _add_histogram_values(
        &self,
        tag: &str,
        values: Vec<f64>,
        global_step: Option<i64>,
        bins: Option<&Bound<'_, PyAny>>,
        walltime: Option<f64>,
        max_bins: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let max_bins = max_bins.map(|m| positive_bins(m, "max_bins")).transpose()?;
        let tensorflow = bins.is_none_or(|b| b.extract::<&str>().is_ok_and(|s| s == "tensorflow"));
        let mut histogram = match bins {
            Some(b) if !tensorflow => Histogram::from_values(&values, positive_bins(b, "bins")?),
            _ => Histogram::from_values_with_limits(&values, &tensorflow_bucket_limits()),
        };
        if let Some(max_bins) = max_bins {
            histogram.merge_buckets(max_bins);
        }
        self.writer()?
            .add_histogram(tag, &histogram, global_step.unwrap_or(0), walltime)
            .py_err()
    }

    /// Charts for TensorBoard's custom-scalars plugin, in SummaryWriter's format:
    /// `{"Group": {"Chart": ["Multiline", ["tag regex", ...]],
    ///             "Band": ["Margin", ["value tag", "lower tag", "upper tag"]]}}`.
    fn add_custom_scalars(&self, layout: &Bound<'_, PyDict>) -> PyResult<()> {
        let mut groups = Vec::new();
        for (title, charts) in layout.iter() {
            let charts = charts.cast::<PyDict>()?;
            let mut group = ChartGroup {
                title: title.str()?.to_string(),
                charts: Vec::new(),
            };
            for (chart_title, spec) in charts.iter() {
                group.charts.push(Chart {
                    title: chart_title.str()?.to_string(),
                    content: chart_content(&chart_title, &spec)?,
                });
            }
            groups.push(group);
        }
        self.writer()?.add_custom_scalars_layout(&groups).py_err()
    }

    /// Waits until everything written so far is in the files. After `close()` everything
    /// is there already, and it does nothing (as SummaryWriter's).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        if self.inner.is_none() {
            return Ok(());
        }
        writers::flush(py, &self.inner, "EventWriter")
    }

    /// Flushes and closes the files. Calling it again does nothing.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        writers::close(py, &mut self.inner)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(
        &mut self,
        py: Python<'_>,
        _exc: &Bound<'_, pyo3::types::PyTuple>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
}

/// One histogram value as `read_events` gives it: where it was found and its summary.
struct HistogramPoint {
    step: i64,
    wall_time: f64,
    summary: [(&'static str, f64); 5],
}

/// Reads an event file or log directory into plain Python data (only `tags`, when given;
/// `KeyError` if one of them is nowhere):
/// `{"files": [{"path", "run", "records", "event_kinds", "truncated_at_byte", "damaged"}],
///   "tags": {key: {"run", "tag", "kind", "count", "first_step", "last_step",
///                  "steps", "wall_times", "values"}}}` (values are texts for text tags,
/// and `{"min", "max", "num", "sum", "sum_squares"}` dicts for histogram tags).
#[pyfunction]
#[pyo3(signature = (path, tags=None, keep_going=false))]
fn read_events<'py>(
    py: Python<'py>,
    path: PathBuf,
    tags: Option<Vec<String>>,
    keep_going: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let options = LoadOptions {
        keep_points: tags.clone(),
        keep_going,
    };
    // Histograms by (run, tag): their summary only, not their buckets.
    let mut histograms: HashMap<(String, String), Vec<HistogramPoint>> = HashMap::new();
    let mut keep_histogram =
        |at: tfevents::FoundAt<'_>, value: gpuscope::model::tensorboard::Value| {
            if let ValueData::Histogram(h) = value.data {
                histograms
                    .entry((at.run.to_owned(), value.tag))
                    .or_default()
                    .push(HistogramPoint {
                        step: at.step,
                        wall_time: at.wall_time,
                        summary: [
                            ("min", h.min),
                            ("max", h.max),
                            ("num", h.num),
                            ("sum", h.sum),
                            ("sum_squares", h.sum_squares),
                        ],
                    });
            }
        };
    let mut data = py
        .detach(|| {
            tfevents::load_log_dir_with(&path, &options, &mut |_, _| {}, &mut keep_histogram)
        })
        .py_err()?;
    if let Some(tags) = &tags {
        let missing = data.select_tags(tags);
        if !missing.is_empty() {
            return Err(PyKeyError::new_err(format!(
                "{}: no tag {}",
                path.display(),
                missing.join(", ")
            )));
        }
    }
    let files = PyList::empty(py);
    for f in &data.files {
        let d = PyDict::new(py);
        d.set_item("path", f.path.to_string_lossy())?;
        d.set_item("run", &f.run)?;
        d.set_item("records", f.records)?;
        d.set_item("event_kinds", f.event_kinds.clone())?;
        d.set_item("truncated_at_byte", f.truncated_at)?;
        d.set_item("damaged", f.damaged.as_deref())?;
        files.append(d)?;
    }
    let series = PyDict::new(py);
    for (s, key) in data.series.iter().zip(series_keys(&data.series)) {
        let d = PyDict::new(py);
        d.set_item("run", &s.run)?;
        d.set_item("tag", &s.tag)?;
        d.set_item("kind", s.kind.as_str())?;
        d.set_item("count", s.count)?;
        d.set_item("first_step", s.first_step)?;
        d.set_item("last_step", s.last_step)?;
        let kept_histograms = histograms
            .get(&(s.run.clone(), s.tag.clone()))
            .filter(|_| s.points.is_empty() && s.texts.is_empty());
        if let Some(points) = kept_histograms {
            d.set_item("steps", points.iter().map(|p| p.step).collect::<Vec<_>>())?;
            d.set_item(
                "wall_times",
                points.iter().map(|p| p.wall_time).collect::<Vec<_>>(),
            )?;
            let values = PyList::empty(py);
            for p in points {
                let summary = PyDict::new(py);
                for (name, v) in p.summary {
                    summary.set_item(name, v)?;
                }
                values.append(summary)?;
            }
            d.set_item("values", values)?;
        } else if s.texts.is_empty() {
            d.set_item("steps", s.points.iter().map(|p| p.step).collect::<Vec<_>>())?;
            d.set_item(
                "wall_times",
                s.points.iter().map(|p| p.wall_time).collect::<Vec<_>>(),
            )?;
            d.set_item(
                "values",
                s.points.iter().map(|p| p.value).collect::<Vec<_>>(),
            )?;
        } else {
            d.set_item("steps", s.texts.iter().map(|p| p.step).collect::<Vec<_>>())?;
            d.set_item(
                "wall_times",
                s.texts.iter().map(|p| p.wall_time).collect::<Vec<_>>(),
            )?;
            d.set_item(
                "values",
                s.texts.iter().map(|p| p.text.as_str()).collect::<Vec<_>>(),
            )?;
        }
        series.set_item(key, d)?;
    }
    let result = PyDict::new(py);
    result.set_item("files", files)?;
    result.set_item("tags", series)?;
    Ok(result)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEventWriter>()?;
    m.add("MAX_HISTOGRAM_BINS", Histogram::MAX_EQUAL_BUCKETS)?;
    m.add_function(wrap_pyfunction!(read_events, m)?)
}
