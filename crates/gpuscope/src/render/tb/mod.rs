//! Renders [`LogData`] for `gpuscope tb`: a tag table or the series of chosen tags as text,
//! the `gpuscope.tb/1` JSON document, or CSV rows.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use serde::Serialize;

use crate::model::tensorboard::{FileSummary, LogData, Series};

/// JSON schema name and version of [`json`]'s output.
pub const SCHEMA: &str = "gpuscope.tb/1";

/// What the text renderer shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextView {
    /// One line per tag: kind, count, steps, last value.
    Tags,
    /// The points of every series that kept them.
    Series,
}

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

/// Text for a terminal `width` columns wide.
pub fn text(data: &LogData, view: TextView, width: u16, out: &mut dyn Write) -> io::Result<()> {
    for f in &data.files {
        writeln!(out, "{} ({} records)", f.path.display(), f.records)?;
    }
    let several_runs = data.series.iter().any(|s| s.run != ".");
    match view {
        TextView::Tags if data.series.is_empty() => {
            let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
            for f in &data.files {
                for (kind, n) in &f.event_kinds {
                    *kinds.entry(kind).or_default() += n;
                }
            }
            let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
            writeln!(out)?;
            writeln!(
                out,
                "no tags: the event files hold no summary values (records: {})",
                match kinds.is_empty() {
                    true => "none".to_owned(),
                    false => kinds.join(", "),
                }
            )?;
        }
        TextView::Tags => {
            writeln!(out)?;
            tag_table(data, several_runs, width, out)?;
        }
        TextView::Series => {
            for s in &data.series {
                writeln!(out)?;
                writeln!(
                    out,
                    "{} [{}, run {}, {} values]",
                    s.tag, s.kind, s.run, s.count
                )?;
                if s.points.is_empty() && s.texts.is_empty() {
                    writeln!(
                        out,
                        "  steps {}–{}; gpuscope tb shows the values of scalars and text \
                         only",
                        s.first_step, s.last_step
                    )?;
                    continue;
                }
                let mut t = crate::render::table(width);
                if s.texts.is_empty() {
                    t.set_header(vec!["step", "wall time (UTC)", "value"]);
                    for p in &s.points {
                        t.add_row(vec![p.step.to_string(), wall(p.wall_time), num(p.value)]);
                    }
                } else {
                    t.set_header(vec!["step", "wall time (UTC)", "text"]);
                    for p in &s.texts {
                        t.add_row(vec![p.step.to_string(), wall(p.wall_time), p.text.clone()]);
                    }
                }
                crate::render::write_table(out, &t)?;
            }
        }
    }
    for f in &data.files {
        if let Some(note) = empty_file_warning(f) {
            writeln!(out, "{note}")?;
            continue;
        }
        if let Some(at) = f.truncated_at {
            writeln!(
                out,
                "note: {} ends inside a record at byte {at} (writer killed or still writing); \
                 everything before it was read",
                f.path.display()
            )?;
        }
        if let Some(why) = &f.damaged {
            writeln!(
                out,
                "warning: {why}; later records of that file were skipped"
            )?;
        }
    }
    Ok(())
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

/// The tag table. Every tag is printed whole, so that it can be copied into `--tag`: a tag
/// too long for the room the other columns leave in `width` (or holding a line break) goes
/// on a line of its own, at the tag column, with the rest of its row on the next line.
fn tag_table(
    data: &LogData,
    several_runs: bool,
    width: u16,
    out: &mut dyn Write,
) -> io::Result<()> {
    let with_values = data
        .series
        .iter()
        .any(|s| !s.points.is_empty() || !s.texts.is_empty());
    // Nothing in it wraps: every cell is one line, and each column as wide as its content.
    let table = |tag_cell: &dyn Fn(&Series) -> String| {
        let mut header = vec!["tag", "kind", "count", "steps"];
        if with_values {
            header.push("last value");
        }
        if several_runs {
            header.insert(0, "run");
        }
        let mut t = crate::render::table(width);
        t.set_header(header);
        for s in &data.series {
            let mut row = vec![
                tag_cell(s),
                s.kind.to_owned(),
                s.count.to_string(),
                format!("{}–{}", s.first_step, s.last_step),
            ];
            if with_values {
                row.push(last_value(s));
            }
            if several_runs {
                row.insert(0, s.run.replace(['\n', '\r'], " "));
            }
            t.add_row(row);
        }
        for column in t.column_iter_mut() {
            column.set_constraint(comfy_table::ColumnConstraint::ContentWidth);
        }
        t
    };
    // The room for tags: the width less what the table takes with every tag cell empty.
    let bare = table(&|_| String::new());
    let others = bare
        .lines()
        .next()
        .map_or(0, |header| header.chars().count())
        .saturating_sub("tag".len());
    let room = usize::from(width).saturating_sub(others);
    let fits = |s: &Series| s.tag.chars().count() <= room && !s.tag.contains(['\n', '\r']);
    let in_cell = |s: &Series| match fits(s) {
        true => s.tag.clone(),
        false => String::new(),
    };
    let t = table(&in_cell);
    let mut lines = t.lines();
    let (Some(header), Some(rule)) = (lines.next(), lines.next()) else {
        return crate::render::write_table(out, &t);
    };
    writeln!(out, "{}", header.trim_end())?;
    writeln!(out, "{}", rule.trim_end())?;
    // Where the tag column starts: after the run column, if any.
    let indent = header.find(" tag").unwrap_or(0);
    for (s, line) in data.series.iter().zip(lines) {
        if !fits(s) {
            writeln!(out, "{:indent$} {}", "", s.tag)?;
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

fn last_value(s: &Series) -> String {
    if let Some(p) = s.points.last() {
        num(p.value)
    } else if let Some(t) = s.texts.last() {
        let one_line: String = t.text.replace(['\n', '\r'], " ");
        if one_line.chars().count() > 16 {
            format!("{}…", one_line.chars().take(15).collect::<String>())
        } else {
            one_line
        }
    } else {
        String::new()
    }
}

/// A value to 7 significant digits (what a float32 scalar holds), shortest form.
fn num(v: f64) -> String {
    let rounded: f64 = format!("{v:.6e}").parse().unwrap_or(v);
    if rounded != 0.0 && (rounded.abs() >= 1e9 || rounded.abs() < 1e-5) {
        format!("{rounded:e}")
    } else {
        format!("{rounded}")
    }
}

fn wall(t: f64) -> String {
    chrono::DateTime::from_timestamp(t.floor() as i64, 0)
        .map(|d| d.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| format!("{t}"))
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
    kind: &'static str,
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
                let points = (s.kind == "scalar" && !s.points.is_empty()).then(|| {
                    s.points
                        .iter()
                        .map(|p| JsonPoint {
                            step: p.step,
                            wall_time: p.wall_time,
                            value: p.value.is_finite().then_some(p.value),
                        })
                        .collect()
                });
                let texts = (s.kind == "text" && !s.texts.is_empty()).then(|| {
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

/// CSV rows `run,tag,kind,count,first_step,last_step`, one per tag (`--tags`).
pub fn tags_csv(data: &LogData, out: &mut dyn Write) -> io::Result<()> {
    let mut w = ::csv::Writer::from_writer(out);
    w.write_record(["run", "tag", "kind", "count", "first_step", "last_step"])
        .map_err(crate::render::csv_io)?;
    for s in &data.series {
        w.write_record([
            s.run.as_str(),
            &s.tag,
            s.kind,
            &s.count.to_string(),
            &s.first_step.to_string(),
            &s.last_step.to_string(),
        ])
        .map_err(crate::render::csv_io)?;
    }
    w.flush()
}

/// CSV rows `run,tag,kind,step,wall_time,value` for every kept scalar and text value.
pub fn csv(data: &LogData, out: &mut dyn Write) -> io::Result<()> {
    let mut w = ::csv::Writer::from_writer(out);
    w.write_record(["run", "tag", "kind", "step", "wall_time", "value"])
        .map_err(crate::render::csv_io)?;
    for s in &data.series {
        let numbers = s
            .points
            .iter()
            .map(|p| (p.step, p.wall_time, p.value.to_string()));
        let texts = s
            .texts
            .iter()
            .map(|p| (p.step, p.wall_time, p.text.clone()));
        for (step, wall_time, value) in numbers.chain(texts) {
            w.write_record([
                s.run.as_str(),
                &s.tag,
                s.kind,
                &step.to_string(),
                &wall_time.to_string(),
                &value,
            ])
            .map_err(crate::render::csv_io)?;
        }
    }
    w.flush()
}
