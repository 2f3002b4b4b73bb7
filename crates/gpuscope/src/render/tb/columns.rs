//! Event files read as columns, for notebooks (`gpuscope.read_events`): per tag its steps,
//! wall times and values side by side — numbers for scalars, texts for text tags, a
//! summary per step for histograms; other kinds (images, audio, ...) are counted, with no
//! steps or values. The tags are keyed as in the JSON document ([`super::series_keys`]).

use std::collections::BTreeMap;

use serde::ser::{Serialize, Serializer};

use crate::model::tensorboard::{
    DataKind, FileSummary, HistogramSummary, Histograms, LogData, Series,
};

/// The files read and the series of every tag, as columns.
#[derive(serde::Serialize)]
pub struct Columns<'a> {
    files: Vec<FileColumns<'a>>,
    tags: Keyed<'a>,
}

#[derive(serde::Serialize)]
struct FileColumns<'a> {
    path: String,
    run: &'a str,
    records: u64,
    event_kinds: &'a BTreeMap<&'static str, u64>,
    truncated_at_byte: Option<u64>,
    damaged: Option<&'a str>,
}

/// The series in the order they were read, under their keys (a map that keeps order).
struct Keyed<'a>(Vec<(String, TagColumns<'a>)>);

impl Serialize for Keyed<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

#[derive(serde::Serialize)]
struct TagColumns<'a> {
    run: &'a str,
    tag: &'a str,
    kind: DataKind,
    count: u64,
    first_step: i64,
    last_step: i64,
    steps: Vec<i64>,
    wall_times: Vec<f64>,
    values: Values<'a>,
}

#[derive(serde::Serialize)]
#[serde(untagged)]
enum Values<'a> {
    Numbers(Vec<f64>),
    Texts(Vec<&'a str>),
    Histograms(&'a [HistogramSummary]),
}

/// The columns of `data`, with the histograms kept beside it by (run, tag).
pub fn columns<'a>(data: &'a LogData, histograms: &'a Histograms) -> Columns<'a> {
    let files = data.files.iter().map(file_columns).collect();
    let tags = data
        .series
        .iter()
        .zip(super::series_keys(&data.series))
        .map(|(s, key)| (key, tag_columns(s, histograms)))
        .collect();
    Columns {
        files,
        tags: Keyed(tags),
    }
}

fn file_columns(f: &FileSummary) -> FileColumns<'_> {
    FileColumns {
        path: f.path.to_string_lossy().into_owned(),
        run: &f.run,
        records: f.records,
        event_kinds: &f.event_kinds,
        truncated_at_byte: f.truncated_at,
        damaged: f.damaged.as_deref(),
    }
}

fn tag_columns<'a>(s: &'a Series, histograms: &'a Histograms) -> TagColumns<'a> {
    let kept_histograms = histograms
        .get(&(s.run.clone(), s.tag.clone()))
        .filter(|_| s.points.is_empty() && s.texts.is_empty());
    let (steps, wall_times, values) = if let Some(h) = kept_histograms {
        (
            h.steps.clone(),
            h.wall_times.clone(),
            Values::Histograms(&h.summaries),
        )
    } else if s.texts.is_empty() {
        (
            s.points.iter().map(|p| p.step).collect(),
            s.points.iter().map(|p| p.wall_time).collect(),
            Values::Numbers(s.points.iter().map(|p| p.value).collect()),
        )
    } else {
        (
            s.texts.iter().map(|p| p.step).collect(),
            s.texts.iter().map(|p| p.wall_time).collect(),
            Values::Texts(s.texts.iter().map(|p| p.text.as_str()).collect()),
        )
    };
    TagColumns {
        run: &s.run,
        tag: &s.tag,
        kind: s.kind,
        count: s.count,
        first_step: s.first_step,
        last_step: s.last_step,
        steps,
        wall_times,
        values,
    }
}
