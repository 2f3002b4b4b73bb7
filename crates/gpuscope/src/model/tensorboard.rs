//! What a TensorBoard event file holds, decoded from protobuf into plain Rust: one [`Event`]
//! per record, each summary value reduced to the kind of data it carries.

use super::words::words;

/// One record of an event file.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Unix seconds when the event was written.
    pub wall_time: f64,
    /// Training step (global_step) the event belongs to.
    pub step: i64,
    /// What the event carries.
    pub body: EventBody,
}

/// The payload of an [`Event`].
#[derive(Debug, Clone, PartialEq)]
pub enum EventBody {
    /// `brain.Event:2`, the first record of files written by TensorFlow-compatible writers.
    FileVersion(String),
    /// Summary values (scalars, texts, histograms, ...).
    Summary(Vec<Value>),
    /// A payload gpuscope does not decode, by its kind (`graph_def`, `session_log`, ...).
    Other(EventKind),
    /// An event with nothing but a time and a step.
    Empty,
}

words! {
    /// An event's kind as TensorBoard's proto names its payload field.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum EventKind {
        /// `file_version`.
        FileVersion = "file_version",
        /// `summary`.
        Summary = "summary",
        /// `graph_def`.
        GraphDef = "graph_def",
        /// `log_message`.
        LogMessage = "log_message",
        /// `session_log`.
        SessionLog = "session_log",
        /// `tagged_run_metadata`.
        TaggedRunMetadata = "tagged_run_metadata",
        /// `meta_graph_def`.
        MetaGraphDef = "meta_graph_def",
        /// No payload.
        Empty = "empty",
    }
}

impl EventBody {
    /// The event's kind.
    pub fn kind(&self) -> EventKind {
        match self {
            EventBody::FileVersion(_) => EventKind::FileVersion,
            EventBody::Summary(_) => EventKind::Summary,
            EventBody::Other(kind) => *kind,
            EventBody::Empty => EventKind::Empty,
        }
    }
}

/// One tagged value inside a summary event.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    /// The tag, e.g. `Loss/total`.
    pub tag: String,
    /// The data it carries.
    pub data: ValueData,
}

/// The data of a summary value, by kind.
#[derive(Debug, Clone, PartialEq)]
pub enum ValueData {
    /// A scalar, whether stored as `simple_value` or as a rank-0 tensor.
    Scalar(f64),
    /// Text (the text plugin), several strings joined by newlines.
    Text(String),
    /// A histogram.
    Histogram(Histogram),
    /// The custom-scalars plugin's chart layout.
    CustomScalarsLayout(Vec<ChartGroup>),
    /// A kind gpuscope lists but does not decode (`image`, `audio`, `tensor`, ...).
    Other(DataKind),
}

words! {
    /// The kind of data a summary value carries, as `gpuscope tb` lists it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum DataKind {
        /// A scalar, whether stored as `simple_value` or as a rank-0 tensor.
        Scalar = "scalar",
        /// Text of the text plugin.
        Text = "text",
        /// A histogram (`histo`).
        Histogram = "histogram",
        /// The custom-scalars plugin's layout.
        CustomScalars = "custom_scalars",
        /// An image.
        Image = "image",
        /// Audio.
        Audio = "audio",
        /// The obsolete old-style histogram field.
        HistogramOldStyle = "histogram_old_style",
        /// A histogram written as a tensor of the histograms plugin.
        HistogramTensor = "histogram_tensor",
        /// Any other tensor.
        Tensor = "tensor",
        /// A value with no data.
        Empty = "empty",
    }
}

impl ValueData {
    /// The kind of its data.
    pub fn kind(&self) -> DataKind {
        match self {
            ValueData::Scalar(_) => DataKind::Scalar,
            ValueData::Text(_) => DataKind::Text,
            ValueData::Histogram(_) => DataKind::Histogram,
            ValueData::CustomScalarsLayout(_) => DataKind::CustomScalars,
            ValueData::Other(kind) => *kind,
        }
    }
}

/// A histogram as TensorBoard stores it: bucket `i` counts values in
/// `(bucket_limit[i-1], bucket_limit[i]]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Histogram {
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Number of values.
    pub num: f64,
    /// Sum of the values.
    pub sum: f64,
    /// Sum of the squared values.
    pub sum_squares: f64,
    /// Upper edge of each bucket.
    pub bucket_limit: Vec<f64>,
    /// Count in each bucket.
    pub bucket: Vec<f64>,
}

/// A histogram without its buckets: the smallest and largest value, how many, their sum
/// and sum of squares (so the mean is `sum / num`, the variance
/// `sum_squares / num - mean²`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct HistogramSummary {
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// How many values.
    pub num: f64,
    /// Their sum.
    pub sum: f64,
    /// The sum of their squares.
    pub sum_squares: f64,
}

impl HistogramSummary {
    /// The summary of `h`.
    pub fn of(h: &Histogram) -> Self {
        HistogramSummary {
            min: h.min,
            max: h.max,
            num: h.num,
            sum: h.sum,
            sum_squares: h.sum_squares,
        }
    }
}

/// The summaries of one histogram tag's histograms (their buckets left out), a step each.
#[derive(Debug, Clone, Default)]
pub struct HistogramSeries {
    /// Training steps.
    pub steps: Vec<i64>,
    /// Unix seconds.
    pub wall_times: Vec<f64>,
    /// The histogram at each step.
    pub summaries: Vec<HistogramSummary>,
}

/// The histogram tags' summaries, by (run, tag).
pub type Histograms = std::collections::HashMap<(String, String), HistogramSeries>;

impl Histogram {
    /// The most equal-width buckets a writer should ask [`Histogram::from_values`] for.
    /// Every bucket is stored (16 bytes each, in every record) while TensorBoard re-bins to
    /// about 30 to draw them, and TensorFlow's default edges are about 1,500: `10**8`
    /// buckets would take gigabytes before anything is written.
    pub const MAX_EQUAL_BUCKETS: usize = 10_000;

    /// Builds a histogram of `values` with `bins` equal-width buckets (at least one).
    /// Non-finite values are left out.
    pub fn from_values(values: &[f64], bins: usize) -> Histogram {
        let finite = || values.iter().copied().filter(|v| v.is_finite());
        let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
        let (mut num, mut sum, mut sum_squares) = (0.0, 0.0, 0.0);
        for v in finite() {
            min = min.min(v);
            max = max.max(v);
            num += 1.0;
            sum += v;
            sum_squares += v * v;
        }
        if num == 0.0 {
            return Histogram::default();
        }
        let bins = bins.max(1);
        let width = (max - min) / bins as f64;
        let bucket_limit: Vec<f64> = if width > 0.0 {
            (1..=bins).map(|i| min + width * i as f64).collect()
        } else {
            vec![max]
        };
        let mut bucket = vec![0.0; bucket_limit.len()];
        for v in finite() {
            let i = if width > 0.0 {
                (((v - min) / width).ceil() as usize).clamp(1, bins) - 1
            } else {
                0
            };
            bucket[i] += 1.0;
        }
        Histogram {
            min,
            max,
            num,
            sum,
            sum_squares,
            bucket_limit,
            bucket,
        }
    }
}

impl Histogram {
    /// Merges adjacent buckets, in equal groups, until there are at most `max_buckets`
    /// (SummaryWriter's `max_bins`); a merged bucket keeps the upper edge of its last one,
    /// as buckets are `(previous edge, edge]`.
    pub fn merge_buckets(&mut self, max_buckets: usize) {
        let group = self.bucket.len().div_ceil(max_buckets.max(1));
        if group <= 1 {
            return;
        }
        self.bucket = self.bucket.chunks(group).map(|c| c.iter().sum()).collect();
        self.bucket_limit = self
            .bucket_limit
            .chunks(group)
            .filter_map(|c| c.last().copied())
            .collect();
    }

    /// Builds a histogram of `values` over fixed bucket upper edges `limits` (ascending):
    /// bucket `i` counts values in `(limits[i-1], limits[i]]`, values above the last edge
    /// fall in the last bucket. Empty buckets at both ends are left out, as TensorBoard
    /// writers do. Non-finite values are left out.
    pub fn from_values_with_limits(values: &[f64], limits: &[f64]) -> Histogram {
        let mut h = Histogram::from_values(values, 1);
        if h.num == 0.0 || limits.is_empty() {
            return h;
        }
        let mut counts = vec![0.0; limits.len()];
        for v in values.iter().copied().filter(|v| v.is_finite()) {
            let i = limits
                .partition_point(|&edge| edge < v)
                .min(limits.len() - 1);
            counts[i] += 1.0;
        }
        let first = counts.iter().position(|&c| c > 0.0).unwrap_or(0);
        let last = counts.iter().rposition(|&c| c > 0.0).unwrap_or(0);
        h.bucket_limit = limits[first..=last].to_vec();
        h.bucket = counts[first..=last].to_vec();
        h
    }
}

/// TensorFlow's default histogram bucket edges (what `bins="tensorflow"` means in
/// SummaryWriter): ±1e-12 growing by 10 % up to ±1e20, with 0 between.
pub fn tensorflow_bucket_limits() -> Vec<f64> {
    let mut positive = Vec::new();
    let mut v = 1e-12;
    while v < 1e20 {
        positive.push(v);
        v *= 1.1;
    }
    let mut limits: Vec<f64> = positive.iter().rev().map(|v| -v).collect();
    limits.push(0.0);
    limits.extend(positive);
    limits.push(f64::MAX);
    limits
}

/// One group of charts in a custom-scalars layout (a collapsible section in TensorBoard).
#[derive(Debug, Clone, PartialEq)]
pub struct ChartGroup {
    /// Section title.
    pub title: String,
    /// Charts in the section.
    pub charts: Vec<Chart>,
}

/// One chart of a custom-scalars layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Chart title.
    pub title: String,
    /// What it plots.
    pub content: ChartContent,
}

/// What a custom-scalars chart plots.
#[derive(Debug, Clone, PartialEq)]
pub enum ChartContent {
    /// Every scalar tag matching any of these regular expressions, one line each.
    Multiline(Vec<String>),
    /// Lines with a shaded band between a lower and an upper tag.
    Margin(Vec<MarginSeries>),
}

/// One line of a margin chart: the tags of its value and of its band's edges.
#[derive(Debug, Clone, PartialEq)]
pub struct MarginSeries {
    /// Tag of the line.
    pub value: String,
    /// Tag of the band's lower edge.
    pub lower: String,
    /// Tag of the band's upper edge.
    pub upper: String,
}

/// Everything `gpuscope tb` knows about a log directory: its files and one series per
/// (run, tag), in the order tags first appeared.
#[derive(Debug, Clone, Default)]
pub struct LogData {
    /// Every file read, in reading order.
    pub files: Vec<FileSummary>,
    /// One series per (run, tag).
    pub series: Vec<Series>,
}

impl LogData {
    /// Keeps only the series of `tags` (in every run); returns the tags found nowhere.
    pub fn select_tags(&mut self, tags: &[String]) -> Vec<String> {
        let missing = tags
            .iter()
            .filter(|t| !self.series.iter().any(|s| &s.tag == *t))
            .cloned()
            .collect();
        self.series.retain(|s| tags.contains(&s.tag));
        missing
    }
}

/// What one event file held.
#[derive(Debug, Clone)]
pub struct FileSummary {
    /// Run (directory relative to the log directory, `.` at the top).
    pub run: String,
    /// The file.
    pub path: std::path::PathBuf,
    /// Records read.
    pub records: u64,
    /// Records per event kind, by its word (`file_version`, `summary`, ...): keyed by the
    /// word so that the JSON and Python list them alphabetically.
    pub event_kinds: std::collections::BTreeMap<&'static str, u64>,
    /// Byte offset of a truncated last record, if the file ends inside one.
    pub truncated_at: Option<u64>,
    /// Why reading stopped early on a damaged record (only when asked to keep going).
    pub damaged: Option<String>,
}

/// The values of one tag in one run.
#[derive(Debug, Clone)]
pub struct Series {
    /// Run the tag belongs to.
    pub run: String,
    /// The tag.
    pub tag: String,
    /// Kind of its first value.
    pub kind: DataKind,
    /// Number of values.
    pub count: u64,
    /// Step of the first value.
    pub first_step: i64,
    /// Step of the last value.
    pub last_step: i64,
    /// Scalar values, in file order (kept only for the tags asked for).
    pub points: Vec<Point>,
    /// Text values, in file order (kept only for the tags asked for).
    pub texts: Vec<TextPoint>,
}

/// One scalar value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Training step.
    pub step: i64,
    /// Unix seconds.
    pub wall_time: f64,
    /// The value.
    pub value: f64,
}

/// One text value.
#[derive(Debug, Clone, PartialEq)]
pub struct TextPoint {
    /// Training step.
    pub step: i64,
    /// Unix seconds.
    pub wall_time: f64,
    /// The text.
    pub text: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_counts_every_finite_value_once() {
        let values = [0.0, 1.0, 2.0, 3.0, 4.0, f64::NAN, 4.0];
        let h = Histogram::from_values(&values, 4);
        assert_eq!(h.num, 6.0);
        assert_eq!(h.bucket.iter().sum::<f64>(), 6.0);
        assert_eq!(h.bucket_limit, vec![1.0, 2.0, 3.0, 4.0]);
        // (-inf,1] holds 0 and 1; (3,4] holds both 4s.
        assert_eq!(h.bucket, vec![2.0, 1.0, 1.0, 2.0]);
        assert_eq!((h.min, h.max, h.sum), (0.0, 4.0, 14.0));
    }

    #[test]
    fn tensorflow_buckets_keep_only_the_occupied_range() {
        let limits = tensorflow_bucket_limits();
        assert!(limits.windows(2).all(|w| w[0] < w[1]));
        let h = Histogram::from_values_with_limits(&[-1.0, 0.0, 0.5, 0.5, 2.0], &limits);
        assert_eq!(h.num, 5.0);
        assert_eq!(h.bucket.iter().sum::<f64>(), 5.0);
        assert!(h.bucket[0] > 0.0 && *h.bucket.last().unwrap() > 0.0);
        // -1.0 lies in (-1.1^k * 1e-12 ..] just at or above it; 2.0 under its edge.
        assert!(h.bucket_limit[0] >= -1.0 && h.bucket_limit[0] < -0.9);
        let top = *h.bucket_limit.last().unwrap();
        assert!((2.0..2.2).contains(&top), "{top}");
    }

    #[test]
    fn histogram_of_constant_values_has_one_bucket() {
        let h = Histogram::from_values(&[2.5; 3], 10);
        assert_eq!(h.bucket_limit, vec![2.5]);
        assert_eq!(h.bucket, vec![3.0]);
        assert_eq!(Histogram::from_values(&[], 10), Histogram::default());
    }
}
