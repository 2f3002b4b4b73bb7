//! Renders an [`NsysReport`]: text with the columns `nsys stats` prints (times in one unit
//! per table, chosen so the figures stay short — nsys's own `--timeunit`; sizes in nsys's
//! MB, 10^6 bytes), and the `gpuscope.nsys/1` JSON document (`*_us`, `*_bytes`, `null`
//! for what the export cannot tell). The tables are built once here for text and HTML.

pub mod html;

use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::nsys::{DeviceUsage, DurationStats, NsysReport, SizeStats};
use crate::render::{bytes, clip, paragraph, right_align, table, write_table};

/// JSON schema name and version of [`json`]'s output.
pub const SCHEMA: &str = "gpuscope.nsys/1";

/// Longest kernel or range name shown whole in text; JSON and HTML keep every name whole.
const NAME_CHARS: usize = 60;
/// Width from which text also shows kernels' grid and block dimensions.
const WIDE: u16 = 120;
/// Points of a device's memory timeline listed in text.
const TEXT_POINTS: usize = 12;

/// One section of the report: a table, or why the export has none.
pub(crate) struct Part {
    /// `CUDA GPU Kernel Summary (cuda_gpu_kern_sum)`.
    pub title: String,
    /// The table, or the sentence that says why there is none.
    pub body: Result<Table, String>,
}

/// A table of text cells; the last column names the row (kernel, operation, range...).
pub(crate) struct Table {
    /// The unit of its figures: `times in µs`.
    pub note: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Columns holding numbers (right-aligned).
    pub numeric: Vec<usize>,
}

/// The time unit of a table: the largest with which its longest total reads under 1000.
fn time_unit(max_us: f64) -> (&'static str, f64) {
    if max_us >= 1e6 {
        ("s", 1e6)
    } else if max_us >= 1e3 {
        ("ms", 1e3)
    } else if max_us >= 1.0 {
        ("µs", 1.0)
    } else {
        ("ns", 1e-3)
    }
}

/// The header cells of a duration summary and a formatter of its figures.
struct TimeColumns {
    unit: &'static str,
    scale: f64,
}

impl TimeColumns {
    fn of<'a>(rows: impl Iterator<Item = &'a DurationStats>) -> Self {
        let max = rows.map(|s| s.total_us).fold(0.0, f64::max);
        let (unit, scale) = time_unit(max);
        TimeColumns { unit, scale }
    }

    fn header(&self, count: &str) -> Vec<String> {
        [
            "Time (%)",
            "Total Time",
            count,
            "Avg",
            "Med",
            "Min",
            "Max",
            "StdDev",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    fn note(&self) -> String {
        format!("times in {}", self.unit)
    }

    fn cells(&self, s: &DurationStats) -> Vec<String> {
        let f = |us: f64| format!("{:.3}", us / self.scale);
        vec![
            format!("{:.1}", s.time_percent),
            f(s.total_us),
            s.count.to_string(),
            f(s.avg_us),
            f(s.med_us),
            f(s.min_us),
            f(s.max_us),
            f(s.stddev_us),
        ]
    }
}

const TIME_NUMERIC: [usize; 8] = [0, 1, 2, 3, 4, 5, 6, 7];

fn dims(d: Option<[i64; 3]>) -> String {
    d.map_or_else(|| "-".to_owned(), |[x, y, z]| format!("{x} {y} {z}"))
}

/// A summary of durations: nsys's time columns (`count` naming the instances), then the
/// `tail` columns, the last naming the row.
fn time_table<R>(
    rows: &[R],
    count: &str,
    tail: &[&str],
    time: impl Fn(&R) -> &DurationStats,
    tail_cells: impl Fn(&R) -> Vec<String>,
) -> Table {
    let t = TimeColumns::of(rows.iter().map(&time));
    let mut header = t.header(count);
    header.extend(tail.iter().map(|h| (*h).to_owned()));
    let rows = rows
        .iter()
        .map(|row| {
            let mut cells = t.cells(time(row));
            cells.extend(tail_cells(row));
            cells
        })
        .collect();
    Table {
        note: t.note(),
        header,
        rows,
        numeric: TIME_NUMERIC.to_vec(),
    }
}

/// The report's sections as tables; `wide` adds kernels' grid and block columns, names
/// longer than `name_chars` are cut.
pub(crate) fn parts(r: &NsysReport, wide: bool, name_chars: usize) -> Vec<Part> {
    fn part<T>(
        r: &NsysReport,
        title: &str,
        key: &str,
        rows: &Option<T>,
        table: impl FnOnce(&T) -> Table,
    ) -> Part {
        let why = || {
            r.unavailable
                .get(key)
                .cloned()
                .unwrap_or_else(|| "not in this export".to_owned())
        };
        Part {
            title: title.to_owned(),
            body: rows.as_ref().ok_or_else(why).map(table),
        }
    }
    let kernel_tail: &[&str] = if wide {
        &["GridXYZ", "BlockXYZ", "Name"]
    } else {
        &["Name"]
    };
    vec![
        part(
            r,
            "CUDA GPU Kernel Summary (cuda_gpu_kern_sum)",
            "kernels",
            &r.kernels,
            |rows| {
                time_table(
                    rows,
                    "Instances",
                    kernel_tail,
                    |k| &k.time,
                    |k| {
                        let mut cells = Vec::new();
                        if wide {
                            cells.extend([dims(k.grid), dims(k.block)]);
                        }
                        cells.push(clip(&k.name, name_chars));
                        cells
                    },
                )
            },
        ),
        part(
            r,
            "GPU MemOps Summary by Time (cuda_gpu_mem_time_sum)",
            "memory_time",
            &r.memory_time,
            |rows| {
                time_table(
                    rows,
                    "Count",
                    &["Operation"],
                    |m| &m.time,
                    |m| vec![m.operation.clone()],
                )
            },
        ),
        part(
            r,
            "GPU MemOps Summary by Size (cuda_gpu_mem_size_sum)",
            "memory_size",
            &r.memory_size,
            |rows| Table {
                note: "sizes in MB (10^6 bytes)".to_owned(),
                header: [
                    "Total",
                    "Count",
                    "Avg",
                    "Med",
                    "Min",
                    "Max",
                    "StdDev",
                    "Operation",
                ]
                .map(str::to_owned)
                .to_vec(),
                rows: rows
                    .iter()
                    .map(|m| size_cells(&m.size, m.time.count, &m.operation))
                    .collect(),
                numeric: (0..7).collect(),
            },
        ),
        part(
            r,
            "CUDA API Summary (cuda_api_sum)",
            "cuda_api",
            &r.cuda_api,
            |rows| {
                time_table(
                    rows,
                    "Num Calls",
                    &["Name"],
                    |a| &a.time,
                    |a| vec![clip(&a.name, name_chars)],
                )
            },
        ),
        part(
            r,
            "NVTX Range Summary (nvtx_sum)",
            "nvtx",
            &r.nvtx,
            |rows| {
                time_table(
                    rows,
                    "Instances",
                    &["Style", "Range"],
                    |n| &n.time,
                    |n| vec![format!("{:?}", n.style), clip(&n.range, name_chars)],
                )
            },
        ),
        part(
            r,
            "GPU Memory Usage (--cuda-memory-usage true)",
            "memory_usage",
            &r.memory_usage,
            |devices| usage_table(devices),
        ),
    ]
}

fn size_cells(s: &SizeStats, count: u64, operation: &str) -> Vec<String> {
    let mb = |b: i64| format!("{:.3}", b as f64 / 1e6);
    vec![
        mb(s.total_bytes),
        count.to_string(),
        mb(s.avg_bytes),
        mb(s.med_bytes),
        mb(s.min_bytes),
        mb(s.max_bytes),
        mb(s.stddev_bytes),
        operation.to_owned(),
    ]
}

fn device_name(d: &DeviceUsage) -> String {
    let id = d.device.map_or_else(|| "?".to_owned(), |d| d.to_string());
    match &d.gpu {
        Some(g) => format!("{id} {g}"),
        None => id,
    }
}

fn usage_table(devices: &[DeviceUsage]) -> Table {
    let header = [
        "Peak",
        "Peak at (s)",
        "At end",
        "Allocs",
        "Frees",
        "Before capture",
        "Device",
    ]
    .map(str::to_owned)
    .to_vec();
    let rows = devices
        .iter()
        .map(|d| {
            vec![
                bytes(d.peak_bytes.max(0) as u64),
                format!("{:.3}", d.peak_at_us / 1e6),
                bytes(d.end_bytes.max(0) as u64),
                d.allocations.to_string(),
                d.frees.to_string(),
                bytes(d.allocated_before_capture_bytes.max(0) as u64),
                device_name(d),
            ]
        })
        .collect();
    Table {
        note: "time since the session began".to_owned(),
        header,
        rows,
        numeric: (0..6).collect(),
    }
}

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

#[derive(Serialize)]
struct JsonDoc<'a> {
    schema: &'static str,
    #[serde(flatten)]
    report: &'a NsysReport,
}

/// The `gpuscope.nsys/1` document.
pub fn json(r: &NsysReport, out: &mut dyn Write) -> io::Result<()> {
    let doc = JsonDoc {
        schema: SCHEMA,
        report: r,
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::from)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::time_unit;

    #[test]
    fn the_unit_keeps_the_longest_total_under_a_thousand() {
        assert_eq!(time_unit(536.542).0, "µs");
        assert_eq!(time_unit(61_322.687).0, "ms");
        assert_eq!(time_unit(701_940.381).0, "ms");
        assert_eq!(time_unit(2_000_000.0).0, "s");
        assert_eq!(time_unit(0.5).0, "ns");
    }
}
