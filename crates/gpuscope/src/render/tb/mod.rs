//! Renders [`LogData`] for `gpuscope tb`: the `gpuscope.tb/1` JSON document and the
//! messages about empty files here, a tag table or the series of chosen tags as text in
//! [`text`], CSV rows in [`csv`].

pub mod columns;
mod csv;
mod text;

pub use csv::{csv, tags_csv};
pub use text::{text, TextView};

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use serde::Serialize;

use crate::model::tensorboard::{DataKind, FileSummary, LogData, Series};
use crate::render::{unsupported, Format, Render};

/// JSON schema name and version of [`json`]'s output.
pub const SCHEMA: &str = "gpuscope.tb/1";

/// The key of each series in JSON: its tag, prefixed by its run for runs below the top
/// (`<run>/<tag>`). Where that would give two series one key (a tag `train/loss` in the
/// top run, `loss` in run `train`), each of them is keyed `<run>:<tag>` instead, the top
/// run being `.`, so that neither is lost.
pub fn series_keys(series: &[Series]) -> Vec<String> {
    let plain: Vec<String> = series
        .iter()
        .map(|s| match s.run.as_str() {
            "." => s.tag.clone(),
            run => format!("{run}/{}", s.tag),
        })
        .collect();
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for key in &plain {
        *uses.entry(key.as_str()).or_default() += 1;
    }
    series
        .iter()
        .zip(&plain)
        .map(|(s, key)| match uses[key.as_str()] {
            1 => key.clone(),
            _ => format!("{}:{}", s.run, s.tag),
        })
        .collect()
}

/// The warning line for a file that gave no record (none for a damaged file, which has
/// its own): empty, or cut inside its first record.
pub fn empty_file_warning(f: &FileSummary) -> Option<String> {
    if f.records > 0 || f.damaged.is_some() {
        return None;
    }
    let why = match f.truncated_at {
        None => "is empty (0 bytes)",
        Some(_) => "ends inside its first record (writer killed or still writing)",
    };
    Some(format!(
        "warning: {} {why}: no records were read from it",
        f.path.display()
    ))
}

/// Why nothing at `path` can be read, when it has event files and none of them gave a
/// record (as for a directory without event files, the command then fails).
pub fn no_file_has_records(path: &std::path::Path, files: &[FileSummary]) -> Option<String> {
    if files.is_empty() || files.iter().any(|f| empty_file_warning(f).is_none()) {
        return None;
    }
    let what = match files {
        [f] if f.path == path => "the event file holds no records".to_owned(),
        [f] => format!("its one event file, {}, holds no records", f.path.display()),
        files => format!("none of its {} event files holds a record", files.len()),
    };
    Some(format!(
        "{}: {what} (empty, or cut inside the first record: a writer that has not flushed \
         yet, or was killed)",
        path.display()
    ))
}

#[derive(Serialize)]
struct JsonDoc<'a> {
    schema: &'static str,
    files: Vec<JsonFile<'a>>,
    tags: BTreeMap<String, JsonSeries<'a>>,
}

#[derive(Serialize)]
struct JsonFile<'a> {
    path: String,
    run: &'a str,
    records: u64,
    event_kinds: &'a BTreeMap<&'static str, u64>,
    truncated_at_byte: Option<u64>,
    damaged: Option<&'a str>,
}

#[derive(Serialize)]
struct JsonSeries<'a> {
    run: &'a str,
    tag: &'a str,
    kind: DataKind,
    count: u64,
    first_step: i64,
    last_step: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    points: Option<Vec<JsonPoint>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    texts: Option<Vec<JsonText<'a>>>,
}

#[derive(Serialize)]
struct JsonPoint {
    step: i64,
    wall_time: f64,
    /// `null` for NaN and infinities, which JSON cannot hold.
    value: Option<f64>,
}

#[derive(Serialize)]
struct JsonText<'a> {
    step: i64,
    wall_time: f64,
    text: &'a str,
}

/// The `gpuscope.tb/1` JSON document.
pub fn json(data: &LogData, out: &mut dyn Write) -> io::Result<()> {
    let doc = JsonDoc {
        schema: SCHEMA,
        files: data
            .files
            .iter()
            .map(|f| JsonFile {
                path: f.path.display().to_string(),
                run: &f.run,
                records: f.records,
                event_kinds: &f.event_kinds,
                truncated_at_byte: f.truncated_at,
                damaged: f.damaged.as_deref(),
            })
            .collect(),
        tags: data
            .series
            .iter()
            .zip(series_keys(&data.series))
            .map(|(s, key)| {
                let points = (s.kind == DataKind::Scalar && !s.points.is_empty()).then(|| {
                    s.points
                        .iter()
                        .map(|p| JsonPoint {
                            step: p.step,
                            wall_time: p.wall_time,
                            value: p.value.is_finite().then_some(p.value),
                        })
                        .collect()
                });
                let texts = (s.kind == DataKind::Text && !s.texts.is_empty()).then(|| {
                    s.texts
                        .iter()
                        .map(|p| JsonText {
                            step: p.step,
                            wall_time: p.wall_time,
                            text: &p.text,
                        })
                        .collect()
                });
                let series = JsonSeries {
                    run: &s.run,
                    tag: &s.tag,
                    kind: s.kind,
                    count: s.count,
                    first_step: s.first_step,
                    last_step: s.last_step,
                    points,
                    texts,
                };
                (key, series)
            })
            .collect(),
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::from)?;
    writeln!(out)
}

/// Event files read for `gpuscope tb`, with what to show of them.
pub struct Listing<'a> {
    /// What was read.
    pub data: &'a LogData,
    /// The text shows the points of the series kept (tags were chosen), else a table of
    /// tags.
    pub view: TextView,
    /// CSV has a row per tag (`--tags`), else a row per point.
    pub tags_only: bool,
}

impl Render for Listing<'_> {
    fn render(&self, format: Format, width: u16, out: &mut dyn Write) -> io::Result<()> {
        match format {
            Format::Text => text(self.data, self.view, width, out),
            Format::Json => json(self.data, out),
            Format::Csv if self.tags_only => tags_csv(self.data, out),
            Format::Csv => csv(self.data, out),
            Format::Html => Err(unsupported("an event-file listing", format)),
        }
    }
}
