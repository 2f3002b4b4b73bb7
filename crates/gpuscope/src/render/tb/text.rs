//! `gpuscope tb` as text: a table of tags (kind, count, steps, last value) or the points
//! of chosen series.

use super::empty_file_warning;
use crate::model::tensorboard::{LogData, Series};
use std::collections::BTreeMap;
use std::io::{self, Write};

/// What the text renderer shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextView {
    /// One line per tag: kind, count, steps, last value.
    Tags,
    /// The points of every series that kept them.
    Series,
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
                s.kind.to_string(),
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
