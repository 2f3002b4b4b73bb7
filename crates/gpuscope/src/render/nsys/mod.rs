//! Renders an [`NsysReport`]: the `gpuscope.nsys/1` JSON document (`*_us`, `*_bytes`,
//! `null` for what the export cannot tell), and the tables built once here for the text
//! ([`text`]: the columns `nsys stats` prints) and the page ([`html`]). Times are in one
//! unit per table, chosen so the figures stay short (nsys's own `--timeunit`); sizes in
//! nsys's MB, 10^6 bytes.

pub mod html;
mod text;

pub use text::text;

use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::nsys::{DeviceUsage, DurationStats, NsysReport, SizeStats};
use crate::render::short_names::clip;
use crate::render::units::{bytes, figure, ByteUnit};
use crate::render::{unsupported, Format, Render};

/// JSON schema name and version of [`json`]'s output.
pub const SCHEMA: &str = "gpuscope.nsys/1";

/// Longest kernel or range name shown whole in text; JSON and HTML keep every name whole.
const NAME_CHARS: usize = 60;

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
    let mb = |b: i64| figure(b as f64, ByteUnit::DecimalMb, 3);
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

impl Render for NsysReport {
    fn render(&self, format: Format, width: u16, out: &mut dyn Write) -> io::Result<()> {
        match format {
            Format::Text => text(self, width, out),
            Format::Json => json(self, out),
            Format::Html => html::html(self, out),
            Format::Csv => Err(unsupported("an Nsight Systems report", format)),
        }
    }
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
