//! `gpuscope nsys stats` as text: the tables of [`super::parts`] in the columns `nsys stats`
//! prints, and a few points of each device's memory in use.

use super::{device_name, parts, Table, NAME_CHARS};
use crate::analysis::nsys::{DeviceUsage, NsysReport};
use crate::render::short_names::clip;
use crate::render::units::bytes;
use crate::render::{paragraph, right_align, table, write_table};
use std::io::{self, Write};

/// Width from which text also shows kernels' grid and block dimensions.
const WIDE: u16 = 120;

/// Points of a device's memory timeline listed in text.
const TEXT_POINTS: usize = 12;

/// The report as text in `width` columns.
pub fn text(r: &NsysReport, width: u16, out: &mut dyn Write) -> io::Result<()> {
    let by = match &r.nsys_version {
        Some(v) => format!("Nsight Systems {v}"),
        None => "Nsight Systems".to_owned(),
    };
    paragraph(out, &format!("{} — {by} export", r.path.display()), width)?;
    for part in parts(r, width >= WIDE, NAME_CHARS) {
        writeln!(out)?;
        match part.body {
            Ok(t) => {
                paragraph(out, &format!("{}, {}", part.title, t.note), width)?;
                aligned(&t, width, out)?;
            }
            Err(why) => {
                writeln!(out, "{}", part.title)?;
                paragraph(out, &format!("  {why}"), width)?;
            }
        }
    }
    if let Some(devices) = &r.memory_usage {
        for d in devices {
            usage_points(d, width, out)?;
        }
    }
    Ok(())
}

/// `t` in columns: the figures right-aligned, the naming last column after them when the
/// widest row fits in `width`, else on a line of its own under its figures.
fn aligned(t: &Table, width: u16, out: &mut dyn Write) -> io::Result<()> {
    let figures = t.header.len().saturating_sub(1);
    let chars = |s: &str| s.chars().count();
    let widths: Vec<usize> = (0..figures)
        .map(|c| {
            t.rows
                .iter()
                .filter_map(|r| r.get(c))
                .map(|s| chars(s))
                .chain([chars(&t.header[c])])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| -> String {
        let mut l = String::new();
        for (c, w) in widths.iter().enumerate() {
            let cell = cells.get(c).map_or("", String::as_str);
            let pad = " ".repeat(w - chars(cell));
            if t.numeric.contains(&c) {
                l.push_str(&format!("{pad}{cell}  "));
            } else {
                l.push_str(&format!("{cell}{pad}  "));
            }
        }
        l
    };
    let used: usize = widths.iter().map(|w| w + 2).sum();
    let longest_name = t
        .rows
        .iter()
        .filter_map(|r| r.get(figures))
        .map(|s| chars(s))
        .chain([chars(t.header.last().map_or("", String::as_str))])
        .max()
        .unwrap_or(0);
    let inline = used + longest_name <= usize::from(width);
    let name = |cells: &[String]| cells.get(figures).cloned().unwrap_or_default();
    let head = line(&t.header);
    if inline {
        writeln!(out, "{head}{}", name(&t.header))?;
    } else {
        writeln!(out, "{}", head.trim_end())?;
        writeln!(out, "    {}", name(&t.header))?;
    }
    let rule = if inline { used + longest_name } else { used };
    writeln!(out, "{}", "─".repeat(rule.min(usize::from(width))))?;
    for row in &t.rows {
        if inline {
            writeln!(out, "{}{}", line(row), name(row))?;
        } else {
            writeln!(out, "{}", line(row).trim_end())?;
            let indent = 4;
            let room = usize::from(width).saturating_sub(indent).max(20);
            writeln!(out, "{}{}", " ".repeat(indent), clip(&name(row), room))?;
        }
    }
    Ok(())
}

/// A device's timeline, thinned to [`TEXT_POINTS`] points (the peak always among them).
fn usage_points(d: &DeviceUsage, width: u16, out: &mut dyn Write) -> io::Result<()> {
    let n = d.timeline.len();
    if n == 0 {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "Memory in use on device {} over time", device_name(d))?;
    let step = n.div_ceil(TEXT_POINTS).max(1);
    let mut tt = table(width);
    tt.set_header(["Time (s)", "In use"]);
    for (i, p) in d.timeline.iter().enumerate() {
        let is_peak = p.in_use_bytes == d.peak_bytes;
        if i % step == 0 || i + 1 == n || is_peak {
            let mark = if is_peak { " (peak)" } else { "" };
            tt.add_row([
                format!("{:.3}", p.at_us / 1e6),
                format!("{}{mark}", bytes(p.in_use_bytes.max(0) as u64)),
            ]);
        }
    }
    right_align(&mut tt, &[0, 1]);
    write_table(out, &tt)
}
