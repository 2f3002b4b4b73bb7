//! Reads a log directory (or one event file) into [`LogData`]: one series per run and tag.
//! Files are streamed; what stays in memory is the series' points, and only for the tags
//! the caller asks to keep.

use std::collections::HashMap;
use std::path::Path;

use super::reader::{find_event_files, EventFile, EventReader};
use crate::model::tensorboard::{
    DataKind, Event, EventBody, FileSummary, HistogramSummary, Histograms, LogData, Point, Series,
    TextPoint, Value, ValueData,
};
use crate::{Error, Result};

/// What to keep while loading.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Keep the points of these tags only; `None` keeps every tag's points.
    pub keep_points: Option<Vec<String>>,
    /// On a damaged record, keep what came before it and go on with the next file,
    /// instead of failing.
    pub keep_going: bool,
}

impl LoadOptions {
    fn keeps(&self, tag: &str) -> bool {
        self.keep_points
            .as_ref()
            .is_none_or(|tags| tags.iter().any(|t| t == tag))
    }
}

/// Where a value was found: its run, step and wall time (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FoundAt<'a> {
    /// The run (`.` at the top).
    pub run: &'a str,
    /// Training step.
    pub step: i64,
    /// Unix seconds.
    pub wall_time: f64,
}

/// Loads every event file at `path`. `progress` is told the bytes read so far and the
/// total after each file.
pub fn load_log_dir(
    path: &Path,
    options: &LoadOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<LogData> {
    load_log_dir_with(path, options, progress, &mut |_, _| {})
}

/// [`load_log_dir`], keeping also the summary of every histogram by (run, tag): what a
/// notebook plots of a histogram tag over time.
pub fn load_with_histograms(
    path: &Path,
    options: &LoadOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(LogData, Histograms)> {
    let mut histograms = Histograms::new();
    let mut keep = |at: FoundAt<'_>, value: Value| {
        if let ValueData::Histogram(h) = value.data {
            let series = histograms
                .entry((at.run.to_owned(), value.tag))
                .or_default();
            series.steps.push(at.step);
            series.wall_times.push(at.wall_time);
            series.summaries.push(HistogramSummary::of(&h));
        }
    };
    let data = load_log_dir_with(path, options, progress, &mut keep)?;
    Ok((data, histograms))
}

/// [`load_log_dir`], handing each kept value that a [`Series`] does not hold (histograms,
/// custom-scalars layouts, images, ...) to `other`, with where it was found; it is counted
/// in its series as before.
fn load_log_dir_with(
    path: &Path,
    options: &LoadOptions,
    progress: &mut dyn FnMut(u64, u64),
    other: &mut dyn FnMut(FoundAt<'_>, Value),
) -> Result<LogData> {
    let files = find_event_files(path)?;
    let sizes: Vec<u64> = files
        .iter()
        .map(|f| std::fs::metadata(&f.path).map_or(0, |m| m.len()))
        .collect();
    let total: u64 = sizes.iter().sum();
    let mut builder = Builder::new(options, other);
    let mut done = 0;
    for (file, size) in files.into_iter().zip(sizes) {
        builder.read_file(file)?;
        done += size;
        progress(done, total);
    }
    Ok(builder.data)
}

struct Builder<'a> {
    options: &'a LoadOptions,
    other: &'a mut dyn FnMut(FoundAt<'_>, Value),
    data: LogData,
    index: HashMap<String, HashMap<String, usize>>,
}

impl<'a> Builder<'a> {
    fn new(options: &'a LoadOptions, other: &'a mut dyn FnMut(FoundAt<'_>, Value)) -> Self {
        Builder {
            options,
            other,
            data: LogData::default(),
            index: HashMap::new(),
        }
    }

    fn read_file(&mut self, file: EventFile) -> Result<()> {
        let mut reader = EventReader::open(&file.path)?;
        let mut summary = FileSummary {
            run: file.run,
            path: file.path,
            records: 0,
            event_kinds: Default::default(),
            truncated_at: None,
            damaged: None,
        };
        loop {
            match reader.next_event() {
                Ok(Some(event)) => {
                    summary.records += 1;
                    *summary
                        .event_kinds
                        .entry(event.body.kind().as_str())
                        .or_default() += 1;
                    self.add(&summary.run, event);
                }
                Ok(None) => break,
                Err(e @ Error::BadInput { .. }) if self.options.keep_going => {
                    summary.damaged = Some(e.to_string());
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        summary.truncated_at = reader.truncated().map(|t| t.offset);
        self.data.files.push(summary);
        Ok(())
    }

    fn add(&mut self, run: &str, event: Event) {
        let EventBody::Summary(values) = event.body else {
            return;
        };
        for value in values {
            let keep = self.options.keeps(&value.tag);
            let series = self.series(run, &value.tag, value.data.kind());
            if series.count == 0 {
                series.first_step = event.step;
            }
            series.count += 1;
            series.last_step = event.step;
            if !keep {
                continue;
            }
            match value.data {
                ValueData::Scalar(v) => series.points.push(Point {
                    step: event.step,
                    wall_time: event.wall_time,
                    value: v,
                }),
                ValueData::Text(text) => series.texts.push(TextPoint {
                    step: event.step,
                    wall_time: event.wall_time,
                    text,
                }),
                _ => {
                    let at = FoundAt {
                        run,
                        step: event.step,
                        wall_time: event.wall_time,
                    };
                    (self.other)(at, value);
                }
            }
        }
    }

    fn series(&mut self, run: &str, tag: &str, kind: DataKind) -> &mut Series {
        let by_tag = match self.index.get_mut(run) {
            Some(by_tag) => by_tag,
            None => self.index.entry(run.to_owned()).or_default(),
        };
        let i = match by_tag.get(tag) {
            Some(&i) => i,
            None => {
                let i = self.data.series.len();
                by_tag.insert(tag.to_owned(), i);
                self.data.series.push(Series {
                    run: run.to_owned(),
                    tag: tag.to_owned(),
                    kind,
                    count: 0,
                    first_step: 0,
                    last_step: 0,
                    points: Vec::new(),
                    texts: Vec::new(),
                });
                i
            }
        };
        &mut self.data.series[i]
    }
}
